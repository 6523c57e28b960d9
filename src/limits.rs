//! Every limit the server enforces on what it is sent or keeps, in one place: the README's
//! limits table lists the same, each with its flag where a user may need to raise it. Limits
//! with a flag hold the default here; `config` carries the chosen value.

// ---- HTTP connections: the front door (`http/door.rs`) ----

/// Largest request head (request line and headers, with their line ends); a longer one is
/// answered 431 and its connection closed.
pub const MAX_REQUEST_HEAD_BYTES: usize = 64 * 1024;

/// How long a client may take to send a request head: a new connection its first byte, and any
/// request the rest of its head once the first byte came. Then 408 (or, with nothing sent,
/// a plain close).
pub const HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a keep-alive connection may sit idle between two requests before it is closed.
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Longest silence in the middle of a request body; then the body counts as cut short.
pub const BODY_STALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Longest time a write to a client may stay blocked (a client that stopped reading); then
/// the connection is closed, and a stream it was reading ends.
pub const WRITE_STALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Default cap on open connections (`--max-connections`); the server lowers it to fit its
/// open-file limit. A connection beyond it is answered 503 and closed.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// File descriptors one connection may hold at once: its socket, and while a request forwarded
/// to tiny_http is in flight, the door's connection to it and tiny_http's two descriptors of it.
pub const FDS_PER_CONNECTION: u64 = 4;

/// File descriptors kept for everything but connections (database, external MCP servers,
/// listening sockets, logs).
pub const FDS_RESERVED: u64 = 64;

// ---------------------------------------------------------------------------------------------
// MCP server: sessions, batches, stdio framing, what a session keeps; and what the debug-client
// protocol remembers of requests (unknown pause ids, com-error reports).

/// Default of `--mcp-session-idle-s`: a Streamable HTTP session with no request in flight and no
/// open stream for this long is closed (the official Python SDK's default is 30 minutes too).
/// At the cap of concurrent MCP HTTP sessions (`--mcp-max-sessions`, default 64) the longest-idle
/// such session is closed to make room; when there is none, `initialize` gets 503.
pub const MCP_SESSION_IDLE_S: f64 = 1800.0;
/// How often at most the MCP notifier looks for idle sessions when nothing else does.
pub const MCP_SESSION_SWEEP_S: u64 = 60;
/// Most messages in one JSON-RPC batch (MCP 2025-03-26 only): a longer one is refused whole with
/// -32600 before any member is parsed further. The official SDKs send no batches at all; other
/// MCP clients batch a handful (mcp_dart defaults to 10).
pub const MAX_BATCH_LEN: usize = 100;
/// Most bytes of the answers to one batch. Once they are reached, each request left is answered
/// with an error (-32000, `data.handled` false) instead of being handled; a handled request whose
/// answer would cross the limit gets that error with `data.handled` true.
pub const MAX_BATCH_ANSWER_BYTES: usize = 4 << 20;
/// Longest MCP stdio line; the rest of a longer one is discarded as it streams in, and the line
/// is answered with one parse error (-32700).
pub const MAX_STDIO_LINE_BYTES: u64 = 64 << 20;
/// Messages, and bytes, an MCP HTTP session may have queued for a stream its client does not
/// read; past either the session is dropped.
pub const MCP_OUTBOX_MESSAGES: usize = 1024;
pub const MCP_OUTBOX_BYTES: usize = 8 << 20;
/// Resource subscriptions per MCP session (those of resources that no longer exist are pruned
/// first when it is reached).
pub const MCP_MAX_SUBSCRIPTIONS: usize = 1000;
/// Bytes of a client's `clientInfo` a session keeps (beyond it, its name and version, cut).
pub const MCP_MAX_CLIENT_INFO_BYTES: usize = 4096;
/// Longest `progressToken` (as JSON text) a request may carry: it is repeated in every
/// progress notification.
pub const MCP_MAX_PROGRESS_TOKEN_BYTES: usize = 1024;
/// Unknown pause ids that clients poll (pauses from before a restart), remembered so `continue`
/// can release them; ids longer than `MAX_ORPHAN_ID_BYTES` still poll `waiting` but are not
/// remembered (ours are 36-character UUIDs).
pub const MAX_ORPHANS: usize = 1_000;
pub const MAX_ORPHAN_ID_BYTES: usize = 256;
/// Com-error reports kept (the original kept the last 500), and the bytes they may take in all;
/// a report over `MAX_COM_ERROR_REPORT_BYTES` has its long strings cut, then its `payload`
/// dropped, then everything but its short fields.
pub const MAX_COM_ERRORS: usize = 500;
pub const MAX_COM_ERRORS_BYTES: usize = 8 << 20;
pub const MAX_COM_ERROR_REPORT_BYTES: usize = 64 << 10;

// Rendering of pickled values (`pickle`, `pretty`, `render`; README "Trust model"): every
// rendered value (one repr text, one JSON display value, one structured view) gets one budget,
// proportional to its payload and capped, because values shared through the pickle memo would
// otherwise be copied out once per reference (a few hundred bytes can stand for gigabytes).
// The budget counts output bytes (JSON forms also charge each value's overhead) and,
// separately, node visits, so time is bounded too; when either runs out the output stops with
// a marker: `...<output limit>` in text, `"<cut: render budget>"` in JSON.

/// Render budget per payload byte: output bytes and node visits, each.
pub const RENDER_PER_INPUT_BYTE: usize = 16;
/// Render budget of a repr text or a display value on top of `RENDER_PER_INPUT_BYTE` times the
/// payload (small values never reach it). Small, because listings show many values at once.
pub const RENDER_SLACK: usize = 32 * 1024;
/// The same for a structured view, shown one at a time: nested views of small containers
/// (each with its type, repr and attributes) are larger than their payload.
pub const RENDER_VIEW_SLACK: usize = 256 * 1024;
/// Render budget at most, whatever the payload size (also the longest repr text).
pub const RENDER_MAX: usize = 16 << 20;
/// What one JSON value (or key) costs beyond its text: about its size in memory.
pub const RENDER_JSON_VALUE_COST: usize = 32;
/// What the memoized lookups of one decoded pickle (class descriptions and the names they
/// share; indexes of larger dicts, each smaller than its dict, are not counted) may keep, per
/// input byte ...
pub const RENDER_LOOKUP_PER_INPUT_BYTE: usize = 8;
/// ... plus this many bytes; a class found once it is spent renders in the generic forms.
pub const RENDER_LOOKUP_SLACK: usize = 256 * 1024;
/// Stated bound of the memory used while decoding and rendering one payload (decoder, tree,
/// caches and the rendered value): at most this many bytes per payload byte ...
pub const RENDER_MEMORY_PER_INPUT_BYTE: usize = 128;
/// ... plus this many bytes (checked by the property tests of `tests/pickle_props.rs`).
pub const RENDER_MEMORY_SLACK: usize = 8 << 20;

// ---- REPL sessions (`repl.rs`) ----

/// Closed REPL sessions kept, with their transcripts: when one more closes, the session closed
/// longest ago is forgotten (its id then answers 404 `session_not_found`). Open sessions are
/// never dropped.
pub const MAX_CLOSED_REPL_SESSIONS: usize = 1_000;
