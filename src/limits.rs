//! Every limit the server enforces on what it is sent or keeps, in one place: docs/limits.md's
//! limits table lists the same, each with its flag where a user may need to raise it. Limits
//! with a flag hold the default here; `config` carries the chosen value.

// ---- HTTP connections: tiny_http's `Limits` (see `http::spawn_http`) ----

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

/// File descriptors one connection holds: its socket, and tiny_http's two copies of it (the
/// read side, and the one for its timeouts and closing).
pub const FDS_PER_CONNECTION: u64 = 3;

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
/// read; past either the session is dropped. A single message larger than `MCP_OUTBOX_BYTES`
/// is not sent at all (a warning in the log), and the session stays: it says nothing of the
/// client.
pub const MCP_OUTBOX_MESSAGES: usize = 1024;
pub const MCP_OUTBOX_BYTES: usize = 8 << 20;
/// Resumable Streamable HTTP streams (legacy era, 2025-03-26 to 2025-11-25): what one session
/// keeps to replay to a client that reconnects with `Last-Event-ID`. Each stream (a POST's
/// event stream, or the session's GET stream) keeps its last `MCP_REPLAY_EVENTS` messages; a
/// session keeps the logs of its last `MCP_REPLAY_STREAMS` streams and `MCP_REPLAY_BYTES` of
/// messages in all (the oldest messages of the oldest streams go first).
pub const MCP_REPLAY_EVENTS: usize = 64;
pub const MCP_REPLAY_STREAMS: usize = 16;
pub const MCP_REPLAY_BYTES: usize = 1 << 20;
/// Resource subscriptions per MCP session (those of resources that no longer exist are pruned
/// first when it is reached).
pub const MCP_MAX_SUBSCRIPTIONS: usize = 1000;
/// Open `subscriptions/listen` streams of one modern MCP connection (each holds no thread, only
/// its filter; each may name up to `MCP_MAX_SUBSCRIPTIONS` resources).
pub const MCP_MAX_LISTENS: usize = 16;
/// Open `subscriptions/listen` streams on Streamable HTTP, all clients together (each holds a
/// request thread and an open connection).
pub const MCP_HTTP_MAX_LISTENS: usize = 64;
/// Bytes of a client's `clientInfo` a session keeps (beyond it, its name and version, cut).
pub const MCP_MAX_CLIENT_INFO_BYTES: usize = 4096;
/// Longest `progressToken` (as JSON text) a request may carry: it is repeated in every
/// progress notification.
pub const MCP_MAX_PROGRESS_TOKEN_BYTES: usize = 1024;
/// Unknown pause ids that clients poll (pauses from before a restart), remembered so `continue`
/// can release them; ids longer than `MAX_ORPHAN_ID_BYTES` still poll `waiting` but are not
/// remembered (ours are 36-character UUIDs).
pub const MAX_ORPHANS: usize = 1_000;
/// Browser origins waiting for the user's answer in the web UI ("wants to report calls to this
/// debugger: Allow / Deny"), and the denied ones remembered (each list this long); an origin
/// longer than `MAX_ORIGIN_BYTES` is refused without being listed.
pub const MAX_PENDING_ORIGINS: usize = 16;
/// Browser origins granted in the web UI (kept with `--db`).
pub const MAX_GRANTED_ORIGINS: usize = 64;
pub const MAX_ORIGIN_BYTES: usize = 256;
/// `origins_changed` events caused by refused pages: at most one per this interval (the
/// first at once, the changes since in one event at its end).
pub const ORIGINS_EVENT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
/// Warnings about refused requests (421, 403) logged per window; the others are counted and
/// summarised in one line when the window is over.
pub const REFUSAL_LOG_LINES: usize = 32;
pub const REFUSAL_LOG_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);
/// Longest request target, `Host` or `Origin` a log line shows (the rest is cut).
pub const LOGGED_URL_BYTES: usize = 256;
pub const MAX_ORPHAN_ID_BYTES: usize = 256;
/// Com-error reports kept (the original kept the last 500), and the bytes they may take in all;
/// a report over `MAX_COM_ERROR_REPORT_BYTES` has its long strings cut, then its `payload`
/// dropped, then everything but its short fields.
pub const MAX_COM_ERRORS: usize = 500;
pub const MAX_COM_ERRORS_BYTES: usize = 8 << 20;
pub const MAX_COM_ERROR_REPORT_BYTES: usize = 64 << 10;
/// Default of `--max-records-mb`: what the in-memory window of call records (and, separately,
/// of breakpoint history) may keep, besides its count (`--max-records`). Records are counted
/// by what they keep, every shared string or tree (names, call sites, signatures) counted once
/// while any record in the window holds it (`Records::parts`);
/// a typical call keeps a few hundred bytes, so only records carrying large values reach it.
/// The oldest fall out first, as by count (with a database file they stay in the file).
pub const DEFAULT_MAX_RECORDS_MB: usize = 256;
pub const DEFAULT_MAX_RECORDS_BYTES: usize = DEFAULT_MAX_RECORDS_MB << 20;
/// Calls started and not completed that are kept, by count and by what they keep: a call whose
/// completion never comes (its process died, or a web page only starts calls through the
/// browser-client endpoint) would otherwise be kept forever. Past either, the oldest that is
/// not paused is dropped and counted (`open_calls_dropped` in `/api/status`); its completion,
/// if it comes, is recorded like one of a call the server never saw start. An open call counts
/// every field it holds in full (`CallRecord::weight`), its interned name and the strings and
/// trees it shares with other calls included.
pub const MAX_OPEN_CALLS: usize = 100_000;
pub const MAX_OPEN_CALLS_BYTES: usize = 256 << 20;
/// Registered functions (`POST /api/functions`, a browser-client endpoint any web page may
/// call): at most this many names (a new one past it gets 400 `too_many_functions`), each name at
/// most `MAX_FUNCTION_NAME_BYTES` (else 400), and a signature or `function_metadata` longer than
/// `MAX_FUNCTION_METADATA_BYTES` as JSON text is not kept (the metadata says so in `shrunk`),
/// nor a signature longer than `MAX_FUNCTION_SIGNATURE_BYTES`. Real signatures are far
/// shorter: the longest of Python's standard library (`subprocess.Popen`) is 386 bytes,
/// `pandas.read_csv`'s about 2.5 KiB. Metadata holds the rendered placeholder of a function
/// that could not be pickled, up to its render budget (`RENDER_SLACK` and more).
pub const MAX_FUNCTIONS: usize = 100_000;
pub const MAX_FUNCTION_NAME_BYTES: usize = 4096;
pub const MAX_FUNCTION_SIGNATURE_BYTES: usize = 16 << 10;
pub const MAX_FUNCTION_METADATA_BYTES: usize = 64 << 10;
/// What the registered functions may keep in all (names, signatures and metadata as JSON
/// text); a registration that would pass it gets 400 `too_many_functions`. It also bounds
/// `GET /api/functions` without `limit`.
pub const MAX_FUNCTIONS_BYTES: usize = 32 << 20;
/// What a debug client sends besides payloads (`service/fields.rs`): names and ids
/// (`method_name`, `function_name`, `call_id`, `status`, `event_type`, `exception_type`,
/// `pause_id`, ..., and the names of keyword arguments) at most `MAX_FUNCTION_NAME_BYTES`; any
/// other field of a browser-client or Python-client body (a signature, a call site, a page
/// URL, an exception message, a REPL answer, an item's fields but its `data`) at most this
/// many bytes as JSON text. A longer one is refused whole with 400 `field_too_long` naming the
/// field, but for texts a program may legitimately send long (the Python client exits on any
/// 400): `exception_message` and `exception_traceback` are cut to it (ending with
/// `...<cut: N bytes>`), a call site keeps the innermost frames of its `stack_trace` that fit,
/// and so are a REPL answer's `result`, `stdout` and `error`. Payloads (`data`, `*_data`) are
/// bounded by the request body alone: they go to the content store.
pub const MAX_CLIENT_FIELD_BYTES: usize = 1 << 20;
/// Bytes of strings and trees the interner holds before it drops those nobody else holds
/// (besides its count of entries); then again each time they double.
pub const INTERNER_SWEEP_BYTES: usize = 16 << 20;
/// Pauses that calls reported by one browser origin (a page, through the browser-client
/// endpoints) may hold at once, before-pauses and after-pauses together, by count and by what
/// their calls keep (`CallRecord::weight`, each counted in full): a paused call waits for a
/// person (and a paused open call is never dropped), and a page can start as many calls as it
/// likes. A call of that origin that would pause past either runs instead (it is answered `continue`, as with no breakpoint) and its record
/// says so (`resolution` by `pause_limit`); the first of each burst is logged, and every one is
/// counted (`pauses_limited` in `/api/status`). Programs (no origin) are not limited this way:
/// their pauses are as many as their threads.
pub const MAX_PAUSES_PER_ORIGIN: usize = 64;
pub const MAX_PAUSED_BYTES_PER_ORIGIN: usize = 64 << 20;
/// What the pauses listed by one `GET /api/paused` with payloads may carry as `data` in all;
/// past it, items are listed without `data` (their CIDs stay, readable by `GET /api/cid/...`).
pub const MAX_PAUSED_DATA_BYTES: usize = 32 << 20;

// Rendering of pickled values (`pickle`, `pretty`, `render`; docs/trust.md): every
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
/// What the rendered values of one response listing many (call records, history, snapshots)
/// may take in all, as `render::kept_bytes` counts them; each further value shows as
/// `"<cut: response budget>"` (the value itself stays readable by its CID).
pub const MAX_RENDERED_PER_RESPONSE: usize = 32 << 20;
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

// ---------------------------------------------------------------------------------------------
// Defaults of the other flags that set a limit (docs/flags.md). Each flag takes its default
// from here; `config` checks and carries the chosen value.

/// Default of `--max-body-mb`: the largest request body, in MiB. A declared body over it is
/// answered 413 without being read; a chunked one is read up to it.
pub const DEFAULT_MAX_BODY_MB: u64 = 64;
/// Default of `--mcp-max-sessions`: concurrent MCP HTTP sessions, both transports.
pub const DEFAULT_MCP_MAX_SESSIONS: usize = 64;
/// Default of `--mcp-page-size`: items per page of MCP list results.
pub const DEFAULT_MCP_PAGE_SIZE: usize = 100;
/// Default of `--repl-timeout-s`: how long a REPL eval waits for the debugged program's answer
/// (then 504).
pub const DEFAULT_REPL_TIMEOUT_S: f64 = 30.0;

// ---------------------------------------------------------------------------------------------
// Call records, listings and searches (`records`, `search`, `service/records.rs`,
// `service/processes.rs`, `http/routes.rs`, `ui/calls.rs`).

/// Default of `--max-records`: call records (and, separately, breakpoint history entries) kept
/// in memory. Older ones stay in the database file, or with `--memory` are dropped and counted.
pub const DEFAULT_MAX_RECORDS: usize = 100_000;
/// How many object snapshots `/api/snapshots` covers (the newest), as before.
pub const MAX_SNAPSHOTS: usize = 100_000;
/// How long a listing that reads records one by one (a text search, a process filter) scans,
/// newest first, before it answers with what it found so far (`search_truncated`).
pub const SCAN_BUDGET: std::time::Duration = std::time::Duration::from_millis(1500);
/// The same for the web UI's Calls page, which also stops once it found a page of matches: a
/// page answers within 200 ms however many records are stored; it offers a longer search
/// ([`SCAN_BUDGET`]) when this one ends before the oldest record.
pub const PAGE_SCAN_BUDGET: std::time::Duration = std::time::Duration::from_millis(120);
/// CIDs whose outcome one search remembers, at most (about 40 bytes each); further ones are
/// rendered again each time a record names them.
pub const SEARCH_MEMO_MAX: usize = 1 << 18;
/// Rows of a call tree shown at a time (the page links to the earlier and later ones).
pub const TREE_WINDOW: usize = 200;
/// Nodes of a call tree folded at once (the page's address lists them); more are ignored.
pub const MAX_TREE_COLLAPSED: usize = 100;
/// Processes the call-tree index lists (the most recently active; the page says so).
pub const MAX_PROCESSES_LISTED: usize = 500;
/// Calls of each run a comparison aligns (the first ones in call-tree order); the alignment's
/// table holds at most this squared (about 2 MB), so it answers within a fraction of a second.
pub const MAX_COMPARE_CALLS: usize = 1000;
/// Aligned pairs the web UI's comparison of two runs shows at a time.
pub const COMPARE_PAGE_PAIRS: usize = 50;
/// Bytes of one page of the web UI's comparison of two runs: its rows stop short of it (each
/// value cut to a preview, each side to its first arguments), whatever the runs hold.
pub const COMPARE_PAGE_BYTES: usize = 256 * 1024;
/// Runs the comparison page's pickers offer (the newest, and the two compared).
pub const COMPARE_PICKER_RUNS: usize = 50;
/// Largest `limit` (page size) of a REST or MCP listing; a larger one is refused.
pub const MAX_PAGE_LIMIT: usize = 1000;
/// Largest page of the web UI's call records (a larger `limit` is cut to it).
pub const UI_MAX_PAGE_LIMIT: usize = 500;
/// Breakpoints one request may add (`POST /api/breakpoints` with a list, `breakpoint_add`
/// with `breakpoints`).
pub const MAX_BREAKPOINTS_PER_REQUEST: usize = 1000;
/// Longest label of a run, in characters (one line).
pub const MAX_RUN_LABEL_CHARS: usize = 200;
/// Longest notes of a run, in characters.
pub const MAX_RUN_NOTES_CHARS: usize = 10_000;
/// Longest note on a call record, in characters.
pub const MAX_RECORD_NOTE_CHARS: usize = 10_000;

// ---------------------------------------------------------------------------------------------
// The event stream `GET /api/events` (`events`, `http/events.rs`).

/// Events the bus keeps for subscribers that come back (`Last-Event-ID`); one that missed older
/// ones gets `resync`.
pub const REPLAY_EVENTS: usize = 1024;
/// Events a stream may have waiting before its reader counts as stalled: it then gets `resync`
/// and the stream ends.
pub const EVENT_STREAM_QUEUE: usize = 256;
/// Event streams open at once; one more is answered 503.
pub const MAX_EVENT_STREAMS: usize = 32;

// ---------------------------------------------------------------------------------------------
// The debug-client protocol: what is kept for clients still polling (`calls`), and what is
// remembered of the payloads they send (`cas`).

/// How many resume actions of after-pauses (and of released orphan pauses) are kept for clients
/// still polling them. The original never deletes them; we keep the newest ones (a client polls
/// within milliseconds).
pub const MAX_AFTER_ACTIONS: usize = 10_000;
/// Strings of a shrunk com-error report keep this many characters (the Python client cuts
/// `response_text` and `traceback` to 4000 itself).
pub const REPORT_TEXT_CHARS: usize = 4000;
/// Text bytes of verified payloads (`cas::Verified`) kept at most; when full, everything is
/// forgotten and resent payloads are decoded and hashed again.
pub const VERIFIED_BYTES: usize = 4 << 20;

// ---------------------------------------------------------------------------------------------
// Decoding pickles (`pickle::Limits`, `pickle/bigint.rs`) and the cache of rendered values
// (`render`). A payload over a decoder limit shows as `<unavailable: ...>`.

/// Deepest nesting of a pickle: the MARK stack while decoding, recursion while rendering.
pub const PICKLE_MAX_DEPTH: usize = 200;
/// Most memo entries of one pickle.
pub const PICKLE_MAX_MEMO: usize = 1_000_000;
/// Decoder memory allowed per payload byte (charged before each allocation) ...
pub const PICKLE_MEMORY_PER_INPUT_BYTE: usize = 8;
/// ... plus this many bytes.
pub const PICKLE_MEMORY_SLACK: usize = 1 << 20;
/// Largest magnitude of an integer, in bytes (about 20,000 decimal digits), converted to
/// decimal; a larger one renders as `<int of N bits>` so time stays bounded.
pub const MAX_DECIMAL_BYTES: usize = 8 * 1024;
/// Rendered values the render cache keeps, at most (oldest out first).
pub const RENDER_CACHE_ENTRIES: usize = 4096;
/// Bytes of the values the render cache keeps (as `render::kept_bytes` counts them), at most.
pub const RENDER_CACHE_BYTES: usize = 8 * 1024 * 1024;
/// Payloads larger than this are rendered every time (their values are large too).
pub const RENDER_CACHE_MAX_PAYLOAD: usize = 64 * 1024;
/// Values larger than this (as `render::kept_bytes` counts them) are rendered every time.
pub const RENDER_CACHE_MAX_VALUE: usize = 256 * 1024;

// ---------------------------------------------------------------------------------------------
// MCP tools (`mcp/tools.rs`, `mcp/external.rs`) and sessions (`mcp/sessions.rs`).

/// The longest a tool may block (`timeout_s` of `breakpoint_wait_for_pause` and
/// `breakpoint_repl_eval` is cut to it): below the 60 s after which common MCP hosts give up.
pub const MAX_BLOCK_S: f64 = 55.0;
/// The longest a listing of external servers waits for servers still connecting (within the
/// tools' `MAX_BLOCK_S`).
pub const MAX_SETTLE: std::time::Duration = std::time::Duration::from_secs(55);
/// Largest serialized tool result handed to an agent, in bytes (about 12 000 tokens; Claude
/// Code refuses results over 25 000 tokens); a larger one is cut, and says where the whole is.
pub const AGENT_RESULT_LIMIT: usize = 50_000;
/// Bytes of each of `name` and `version` a session keeps of a `clientInfo` over
/// `MCP_MAX_CLIENT_INFO_BYTES`.
pub const MCP_CLIENT_INFO_FIELD_BYTES: usize = 256;

// ---------------------------------------------------------------------------------------------
// The web UI (`ui/`).

/// The largest source file the call-stack pages show.
pub const MAX_SOURCE_BYTES: u64 = 2 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// External MCP servers, what the MCP client manager accepts from them (`upstream/`).

/// Default of `--mcp-connect-timeout-s`: how long an external server may take to start (spawn
/// or HTTP handshake), initialize and list its tools; then its status is `error`.
pub const UPSTREAM_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Tool-call timeout when a server's entry sets no `timeout_s`; then the call is cancelled and
/// fails with `call_timeout`.
pub const UPSTREAM_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// The longest stdout line of a stdio server accepted (a single JSON-RPC message); longer lines
/// are skipped.
pub const UPSTREAM_STDIO_MAX_LINE: usize = 256 * 1024 * 1024;
/// Longest stderr line of a stdio server copied into the log (a longer one is logged by size).
pub const UPSTREAM_MAX_LOG_LINE: usize = 4096;
/// Largest JSON answer read from an HTTP server; a longer one fails its request.
pub const UPSTREAM_MAX_BODY: u64 = 256 << 20;
/// How much of an HTTP server's error answer is read for its description.
pub const UPSTREAM_ERROR_BODY: u64 = 64 << 10;
/// The longest line (and event) of an HTTP server's event stream; a longer one ends the stream
/// with an error.
pub const UPSTREAM_SSE_MAX_LINE: usize = 256 << 20;
/// Most pages a paginated list (`tools/list`, `resources/list`) may take before we stop (a
/// server looping on its cursor).
pub const UPSTREAM_MAX_PAGES: usize = 1000;
/// Longest tool name of an external server, in characters (the MCP specification's advice);
/// a longer one is skipped.
pub const UPSTREAM_TOOL_NAME_CHARS: usize = 128;
/// Longest resource URI of an external server, in characters; a longer one is skipped.
pub const UPSTREAM_RESOURCE_URI_CHARS: usize = 2048;
/// Most resources of one external server listed at once (`resources/list`); the rest are
/// skipped (and no further page is asked for).
pub const UPSTREAM_MAX_RESOURCES: usize = 1000;
/// Most tools kept of one external server; the rest are skipped (and no further page is asked
/// for).
pub const UPSTREAM_MAX_TOOLS: usize = 1000;
/// Most bytes of one external server's tool list kept (each tool's JSON: name, description,
/// schemas); the tools past it are skipped. Bounds what the catalog holds in memory.
pub const UPSTREAM_MAX_CATALOG_BYTES: usize = 4 << 20;
/// Messages waiting to be written to an external server (a stdio server's stdin, a legacy SSE
/// server's POSTs); when it does not take them, and one more would wait, that write fails and
/// the connection is dropped as broken.
pub const UPSTREAM_WRITE_QUEUE: usize = 256;
/// Reconnections in a row (GET with `Last-Event-ID`) that may bring no new event before a
/// legacy Streamable HTTP server's response stream, closed without the answer, is given up.
pub const UPSTREAM_RESUME_ATTEMPTS: u32 = 5;
/// Wait before such a reconnection when the server set no `retry`.
pub const UPSTREAM_RESUME_DELAY: std::time::Duration = std::time::Duration::from_secs(1);
/// Longest wait before such a reconnection, whatever `retry` the server set.
pub const UPSTREAM_RESUME_MAX_DELAY: std::time::Duration = std::time::Duration::from_secs(60);

// ---- REPL sessions (`repl.rs`) ----

/// Closed REPL sessions kept, with their transcripts: when one more closes, the session closed
/// longest ago is forgotten (its id then answers 404 `session_not_found`). Open sessions are
/// never dropped.
pub const MAX_CLOSED_REPL_SESSIONS: usize = 1_000;

// ---- Replays (`replay.rs`, `service/replay.rs`) ----

/// How deeply nested an argument of a replay may be (lists, dicts, tuples in one another) for
/// the server to write it as a Python literal; deeper is refused (400 naming the argument).
pub const MAX_REPLAY_LITERAL_DEPTH: usize = 32;
/// Calls one `POST /api/runs/<run_id>/replay` replays at most (given or taken from the run,
/// oldest first); more given are refused (400 `too_many_calls`).
pub const MAX_REPLAY_SEQUENCE: usize = 100;
/// Reports of replay sequences kept in memory for the web UI (`/runs/replayed/<report_id>`).
pub const MAX_REPLAY_REPORTS: usize = 20;

// ---- Programs that stop polling (`calls.rs`, `service/pauses.rs`) ----

/// A paused program polls its pause every `--poll-interval-ms` (100 ms by default, protocol doc
/// §2.6). A pause that has not been polled for this many intervals, and for at least
/// `PROGRAM_GONE_AFTER_S`, belongs to a program that is gone (killed, or stopped): its card
/// says so and can be dismissed, a REPL on it is refused and a waiting eval fails.
pub const PROGRAM_GONE_MISSED_POLLS: f64 = 3.0;
/// The shortest silence after which a paused program counts as gone, whatever the poll
/// interval (a busy program, or a collection pause, can delay a poll by a second or two).
pub const PROGRAM_GONE_AFTER_S: f64 = 5.0;

// ---- Conditional breakpoints and logpoints (`breakpoints.rs`, `condition.rs`) ----

/// Longest condition, and longest log message, in bytes.
pub const CONDITION_TEXT_BYTES: usize = 4 * 1024;
/// Deepest nesting of a condition (of its syntax tree, and of brackets while parsing).
pub const CONDITION_DEPTH: usize = 64;
/// Steps one evaluation may take (node visits, and elements scanned by `in` or shown in a log
/// line); then the condition counts as undecidable (the call pauses, saying so).
pub const CONDITION_STEPS: usize = 10_000;
/// Most `{expression}` parts of a log message.
pub const LOG_MESSAGE_PARTS: usize = 64;
/// Longest text of one value in a log line, in characters: a longer one is cut there and ends
/// with `...`.
pub const LOG_VALUE_CHARS: usize = 1000;
/// Longest log line, in bytes, its closing `...` included.
pub const LOG_LINE_BYTES: usize = 4096;

/// Log lines kept for `GET /api/logpoints` and the web UI (the newest; each call record keeps
/// its own line too).
pub const MAX_LOG_LINES: usize = 1_000;

// ---------------------------------------------------------------------------------------------
// The limits table of docs/limits.md: generated from `TABLE` by `reference_markdown`
// and compared with it by `tests/it/tidy.rs`. Every value is computed from the
// constants of this file, so the document cannot drift from them; the effects hold no numbers.

/// One row of the limits table (docs/limits.md).
pub struct Limit {
    /// What is limited.
    pub what: &'static str,
    /// Its value (for a limit with a flag, the flag's default), from the constants above.
    pub value: fn() -> String,
    /// The flag that sets it, if any.
    pub flag: Option<&'static str>,
    /// What happens when it is reached.
    pub reached: &'static str,
}

/// Every limit a user or a client may reach, in the order of docs/limits.md.
pub const TABLE: &[Limit] = &[
    // HTTP connections.
    Limit {
        what: "Request body",
        value: || format!("{} MiB", DEFAULT_MAX_BODY_MB),
        flag: Some("--max-body-mb"),
        reached: "413 `payload_too_large`. A declared length over it is refused without reading \
                  the body, and the connection closes. The Python client exits when \
                  `/api/call/start` answers 413.",
    },
    Limit {
        what: "Request head (request line and headers)",
        value: || bytes(MAX_REQUEST_HEAD_BYTES as u64),
        flag: None,
        reached: "431, and the connection closes.",
    },
    Limit {
        what: "Time to send a request head (a new connection its first byte, any request the \
               rest of its head)",
        value: || secs(HEAD_TIMEOUT),
        flag: None,
        reached: "408 (a connection that sent nothing is closed).",
    },
    Limit {
        what: "Idle keep-alive connection",
        value: || secs(IDLE_TIMEOUT),
        flag: None,
        reached: "The connection is closed.",
    },
    Limit {
        what: "Silence in the middle of a request body",
        value: || secs(BODY_STALL_TIMEOUT),
        flag: None,
        reached: "400 `unreadable_body`, and the connection closes.",
    },
    Limit {
        what: "Write blocked on a client that stopped reading",
        value: || secs(WRITE_STALL_TIMEOUT),
        flag: None,
        reached: "The connection is closed; a stream it was reading ends.",
    },
    Limit {
        what: "Open HTTP connections",
        value: || {
            format!(
                "{}, lowered to fit the open-file limit ({FDS_PER_CONNECTION} file descriptors \
                 each)",
                count(DEFAULT_MAX_CONNECTIONS as u64)
            )
        },
        flag: Some("--max-connections"),
        reached: "One more is answered 503 and closed; the server accepts again as soon as \
                  connections close.",
    },
    // The event stream.
    Limit {
        what: "Open event streams (`/api/events`)",
        value: || count(MAX_EVENT_STREAMS as u64),
        flag: None,
        reached: "503 `too_many_streams`.",
    },
    Limit {
        what: "Events waiting for one event stream's reader",
        value: || count(EVENT_STREAM_QUEUE as u64),
        flag: None,
        reached: "The stream gets a `resync` event and ends (its client reconnects and reloads).",
    },
    Limit {
        what: "Events kept for replay (`Last-Event-ID`)",
        value: || count(REPLAY_EVENTS as u64),
        flag: None,
        reached: "A client that missed older ones gets a `resync` event instead.",
    },
    // The debug-client protocol.
    Limit {
        what: "Silence after which a paused program counts as gone",
        value: || {
            format!(
                "{} without a poll, or {} poll intervals if that is longer",
                secs_f64(PROGRAM_GONE_AFTER_S),
                PROGRAM_GONE_MISSED_POLLS
            )
        },
        flag: None,
        reached: "Its pause is listed with `gone: true` and can be dismissed \
                  (`POST /api/paused/<id>/dismiss`); `POST /api/repl/start` and a REPL eval \
                  on it answer 410 `program_gone` (a waiting eval within a second). A poll \
                  brings it back.",
    },
    Limit {
        what: "REPL eval waiting for the debugged program",
        value: || secs_f64(DEFAULT_REPL_TIMEOUT_S),
        flag: Some("--repl-timeout-s"),
        reached: "`POST /api/repl/<id>/eval` answers 504.",
    },
    Limit {
        what: "Browser origins asking to report calls (pending in the web UI), and denied ones \
               remembered",
        value: || {
            format!(
                "{} of each, origins of at most {}",
                count(MAX_PENDING_ORIGINS as u64),
                bytes(MAX_ORIGIN_BYTES as u64)
            )
        },
        flag: None,
        reached: "The oldest request (or denial) is forgotten; a longer origin is refused \
                  without being listed.",
    },
    Limit {
        what: "`origins_changed` events caused by refused pages",
        value: || format!("1 every {}", secs(ORIGINS_EVENT_INTERVAL)),
        flag: None,
        reached: "The changes since the last one are told in one event at the end of the \
                  interval. These events are replayed apart from the others (only the newest is \
                  kept), so they never push a pause or any other event out of the replay.",
    },
    Limit {
        what: "Warnings about refused requests (421, 403) in the log",
        value: || {
            format!(
                "{} every {}, each naming at most {} of the request target, `Host` or \
                 `Origin`",
                count(REFUSAL_LOG_LINES as u64),
                secs(REFUSAL_LOG_WINDOW),
                bytes(LOGGED_URL_BYTES as u64)
            )
        },
        flag: None,
        reached: "The others are counted and summarised in one line (\"N more refused requests \
                  from M origins ... were not logged\") when the window is over; every log line \
                  cuts a longer target and redacts secrets in the query.",
    },
    Limit {
        what: "Browser origins granted in the web UI",
        value: || count(MAX_GRANTED_ORIGINS as u64),
        flag: None,
        reached: "Allowing one more answers 409 `too_many_origins`: deny (revoke) one first, or \
                  use `--allow-origin`.",
    },
    Limit {
        what: "Unknown pause ids remembered (clients polling pauses from before a restart)",
        value: || {
            format!(
                "{} ids of at most {}",
                count(MAX_ORPHANS as u64),
                bytes(MAX_ORPHAN_ID_BYTES as u64)
            )
        },
        flag: None,
        reached: "The oldest is forgotten. A longer id still polls `waiting` but is not \
                  remembered, so `continue` cannot release it.",
    },
    Limit {
        what: "Resume actions kept for clients still polling after-pauses and released unknown \
               pauses",
        value: || count(MAX_AFTER_ACTIONS as u64),
        flag: None,
        reached: "The oldest is forgotten (its id polls `waiting` again).",
    },
    Limit {
        what: "Com-error reports (`/api/report-com-error`)",
        value: || {
            format!(
                "{} reports, {} in all, {} each (strings cut to {} characters)",
                count(MAX_COM_ERRORS as u64),
                bytes(MAX_COM_ERRORS_BYTES as u64),
                bytes(MAX_COM_ERROR_REPORT_BYTES as u64),
                count(REPORT_TEXT_CHARS as u64)
            )
        },
        flag: None,
        reached: "The oldest reports are dropped; a report over its own limit has its long \
                  strings cut, then its `payload` dropped, then everything but its short fields.",
    },
    Limit {
        what: "Calls started and not completed",
        value: || {
            format!(
                "{} calls or {}",
                count(MAX_OPEN_CALLS as u64),
                bytes(MAX_OPEN_CALLS_BYTES as u64)
            )
        },
        flag: None,
        reached: "The oldest that is not paused is dropped and counted (`open_calls_dropped` in \
                  `/api/status`); its completion, if it comes, is recorded like one of a call \
                  the server never saw start.",
    },
    Limit {
        what: "Paused calls of one browser origin (a page's calls through the browser-client \
               endpoints), before and after together, and what their calls keep",
        value: || {
            format!(
                "{} calls or {}",
                count(MAX_PAUSES_PER_ORIGIN as u64),
                bytes(MAX_PAUSED_BYTES_PER_ORIGIN as u64)
            )
        },
        flag: None,
        reached: "A call of that page that would pause runs instead (answered `continue`, as \
                  without a breakpoint); its record's `resolution` is `continue` by \
                  `pause_limit`, the first of each burst is logged, and all are counted \
                  (`pauses_limited` in `/api/status`). Resuming its pauses makes room again. \
                  Programs (no origin) are not limited.",
    },
    Limit {
        what: "Registered functions (`POST /api/functions`)",
        value: || {
            format!(
                "{} names of at most {}; signature {}, metadata {}",
                count(MAX_FUNCTIONS as u64),
                bytes(MAX_FUNCTION_NAME_BYTES as u64),
                bytes(MAX_FUNCTION_SIGNATURE_BYTES as u64),
                bytes(MAX_FUNCTION_METADATA_BYTES as u64)
            )
        },
        flag: None,
        reached: "A new name past the count, or a longer name, gets 400 (`too_many_functions`, \
                  `invalid_function_name`); a longer signature or metadata is not kept (the \
                  metadata says so in `shrunk`).",
    },
    Limit {
        what: "Registered functions in all (names, signatures, metadata)",
        value: || bytes(MAX_FUNCTIONS_BYTES as u64),
        flag: None,
        reached: "A registration that would pass it gets 400 `too_many_functions`.",
    },
    Limit {
        what: "A field a debug client sends that is not a payload (`/api/call/start`, \
               `/api/call/complete`, `/api/call/event`, `/api/functions`, \
               `/api/call/repl-result`)",
        value: || {
            format!(
                "{} for names and ids (`method_name`, `function_name`, `call_id`, `status`, \
                 `event_type`, keyword names, ...); {} as JSON text for any other field \
                 (signature, call site, page URL, messages, an item without its `data`)",
                bytes(MAX_FUNCTION_NAME_BYTES as u64),
                bytes(MAX_CLIENT_FIELD_BYTES as u64)
            )
        },
        flag: None,
        reached: "400 `field_too_long`, naming the field and its limit; nothing of the request \
                  is kept. Texts a program may send long are cut instead, ending with \
                  `...<cut: N bytes>`: `exception_message`, `exception_traceback`, a REPL \
                  answer's `result`, `stdout` and `error`; a call site keeps the innermost \
                  frames of its `stack_trace` that fit.",
    },
    Limit {
        what: "Payloads of one `GET /api/paused` listing (`data` of the pauses' items)",
        value: || bytes(MAX_PAUSED_DATA_BYTES as u64),
        flag: None,
        reached: "Further items are listed without `data`, by CID only.",
    },
    Limit {
        what: "Closed REPL sessions kept with their transcripts",
        value: || count(MAX_CLOSED_REPL_SESSIONS as u64),
        flag: None,
        reached: "The session closed longest ago is forgotten (its id answers 404 \
                  `session_not_found`); open sessions are never dropped.",
    },
    Limit {
        what: "Nesting of a replayed argument written as a Python literal",
        value: || count(MAX_REPLAY_LITERAL_DEPTH as u64),
        flag: None,
        reached: "400 `invalid_args` or `invalid_kwargs`, naming the argument.",
    },
    Limit {
        what: "Calls replayed by one replay sequence (`POST /api/runs/<run_id>/replay`)",
        value: || count(MAX_REPLAY_SEQUENCE as u64),
        flag: None,
        reached: "Given `call_ids`: 400 `too_many_calls`. Taken from the run: its first ones \
                  are replayed, and `truncated` is true.",
    },
    Limit {
        what: "Replay sequence reports kept for the web UI (`/runs/replayed/<report_id>`)",
        value: || count(MAX_REPLAY_REPORTS as u64),
        flag: None,
        reached: "The oldest report is forgotten (its page answers 404); the replayed calls stay \
                  call records.",
    },
    Limit {
        what: "Condition or log message of a breakpoint",
        value: || {
            format!(
                "{}, nesting {}, {} `{{expression}}` parts",
                bytes(CONDITION_TEXT_BYTES as u64),
                CONDITION_DEPTH,
                LOG_MESSAGE_PARTS
            )
        },
        flag: None,
        reached: "400 `invalid_condition` or `invalid_log_message`, with the position.",
    },
    Limit {
        what: "Work of one evaluation of a condition or log message",
        value: || format!("{} steps", count(CONDITION_STEPS as u64)),
        flag: None,
        reached: "The condition cannot be decided: the call pauses with `pause_reason: \
                  condition_error` saying so (a logpoint writes the reason instead).",
    },
    Limit {
        what: "Logpoint line",
        value: || {
            format!(
                "{}; each value {} characters",
                bytes(LOG_LINE_BYTES as u64),
                count(LOG_VALUE_CHARS as u64)
            )
        },
        flag: None,
        reached: "Cut, ending with `...`.",
    },
    Limit {
        what: "Logpoint lines kept for `GET /api/logpoints` and the web UI",
        value: || count(MAX_LOG_LINES as u64),
        flag: None,
        reached: "The oldest line is dropped (the call record keeps its own).",
    },
    Limit {
        what: "Payload texts remembered as verified (the client resends them with every call)",
        value: || bytes(VERIFIED_BYTES as u64),
        flag: None,
        reached: "All are forgotten; payloads sent again are decoded and hashed again.",
    },
    // Records and listings.
    Limit {
        what: "Call records in memory (and, separately, breakpoint history entries)",
        value: || count(DEFAULT_MAX_RECORDS as u64),
        flag: Some("--max-records"),
        reached: "Older ones stay in the database file and are read from it; with `--memory` \
                  they are dropped and counted (`calls_dropped` in `/api/status`).",
    },
    Limit {
        what: "Memory the call records in memory may take (and, separately, the breakpoint \
               history entries)",
        value: || bytes(DEFAULT_MAX_RECORDS_BYTES as u64),
        flag: Some("--max-records-mb"),
        reached: "The oldest fall out first, as by count.",
    },
    Limit {
        what: "Rendered values of one response listing many (call records, history, snapshots)",
        value: || bytes(MAX_RENDERED_PER_RESPONSE as u64),
        flag: None,
        reached: "Each further value shows as `\"<cut: response budget>\"`; it stays readable by \
                  its CID.",
    },
    Limit {
        what: "Object snapshots (`/api/snapshots`)",
        value: || count(MAX_SNAPSHOTS as u64),
        flag: None,
        reached: "Only the newest are listed.",
    },
    Limit {
        what: "Largest `limit` of a listing (page size)",
        value: || {
            format!(
                "{} (REST, MCP); {} in the web UI",
                count(MAX_PAGE_LIMIT as u64),
                count(UI_MAX_PAGE_LIMIT as u64)
            )
        },
        flag: None,
        reached: "REST answers 400 `invalid_limit`, MCP refuses the arguments, the web UI shows \
                  that many.",
    },
    Limit {
        what: "Reading records one by one (a text search, a process filter)",
        value: || secs(SCAN_BUDGET),
        flag: None,
        reached: "The page answers with what it found so far; `scanned` and `search_truncated` \
                  say how far it got.",
    },
    Limit {
        what: "The same on the web UI's Calls page (which also stops at a full page)",
        value: || secs(PAGE_SCAN_BUDGET),
        flag: None,
        reached: "The page shows the matches found so far, says how many records it searched, \
                  and links to a longer search (the REST budget above).",
    },
    Limit {
        what: "Distinct values one search remembers",
        value: || count(SEARCH_MEMO_MAX as u64),
        flag: None,
        reached: "Further values are rendered again each time a record names them.",
    },
    Limit {
        what: "Rows of a call tree shown at a time",
        value: || count(TREE_WINDOW as u64),
        flag: None,
        reached: "The page links to the earlier and later rows.",
    },
    Limit {
        what: "Nodes of a call tree folded at once",
        value: || count(MAX_TREE_COLLAPSED as u64),
        flag: None,
        reached: "Folding more nodes unfolds none of them; the further ones are not folded.",
    },
    Limit {
        what: "Processes listed on the call-tree index",
        value: || count(MAX_PROCESSES_LISTED as u64),
        flag: None,
        reached: "The most recently active are listed, and the page says how many more there are.",
    },
    Limit {
        what: "Calls of each run a comparison of two runs aligns",
        value: || count(MAX_COMPARE_CALLS as u64),
        flag: None,
        reached: "The first ones (in call-tree order) are compared; the answer says truncated and how many calls each run has.",
    },
    Limit {
        what: "Aligned pairs the comparison page shows at a time",
        value: || count(COMPARE_PAGE_PAIRS as u64),
        flag: None,
        reached: "The page opens a few pairs before the first divergence and links to the first, earlier and later pairs.",
    },
    Limit {
        what: "Bytes of one page of the comparison of two runs",
        value: || bytes(COMPARE_PAGE_BYTES as u64),
        flag: None,
        reached: "The page ends at the last pair that fits and links to the later ones; values are previews linking to their object pages.",
    },
    Limit {
        what: "Runs the comparison page's pickers offer",
        value: || count(COMPARE_PICKER_RUNS as u64),
        flag: None,
        reached: "The newest are offered, with the two compared; any run is compared through its address.",
    },
    Limit {
        what: "Breakpoints added by one request (a list)",
        value: || count(MAX_BREAKPOINTS_PER_REQUEST as u64),
        flag: None,
        reached: "400 `invalid_breakpoints` (REST and MCP); none is added.",
    },
    Limit {
        what: "A run's label; its notes (characters)",
        value: || {
            format!(
                "{}; {}",
                count(MAX_RUN_LABEL_CHARS as u64),
                count(MAX_RUN_NOTES_CHARS as u64)
            )
        },
        flag: None,
        reached: "400 `invalid_label` or `invalid_notes` naming the limit (REST and MCP); a label is one line.",
    },
    Limit {
        what: "A note on a call record (characters)",
        value: || count(MAX_RECORD_NOTE_CHARS as u64),
        flag: None,
        reached: "400 `invalid_note` naming the limit.",
    },
    // Stored values and the pages that show them.
    Limit {
        what: "Decoding one pickle",
        value: || {
            format!(
                "nesting depth {}, {} memo entries, memory {} × payload + {}",
                count(PICKLE_MAX_DEPTH as u64),
                count(PICKLE_MAX_MEMO as u64),
                PICKLE_MEMORY_PER_INPUT_BYTE,
                bytes(PICKLE_MEMORY_SLACK as u64)
            )
        },
        flag: None,
        reached: "The value shows as `<unavailable: ...>`.",
    },
    Limit {
        what: "Integer converted to decimal",
        value: || format!("{} of magnitude", bytes(MAX_DECIMAL_BYTES as u64)),
        flag: None,
        reached: "It shows as `<int of N bits>`.",
    },
    Limit {
        what: "Rendering one pickled value (its repr text, display value or structured view): \
               output bytes and node visits, each",
        value: || {
            format!(
                "{} × payload + {} ({} for a structured view), at most {}",
                RENDER_PER_INPUT_BYTE,
                bytes(RENDER_SLACK as u64),
                bytes(RENDER_VIEW_SLACK as u64),
                bytes(RENDER_MAX as u64)
            )
        },
        flag: None,
        reached: "The output stops with a marker: `...<output limit>` in text, \
                  `\"<cut: render budget>\"` in values (`__cut__` counts the entries left out).",
    },
    Limit {
        what: "Class descriptions remembered while rendering one pickle",
        value: || {
            format!(
                "{} × payload + {}",
                RENDER_LOOKUP_PER_INPUT_BYTE,
                bytes(RENDER_LOOKUP_SLACK as u64)
            )
        },
        flag: None,
        reached: "Classes found afterwards render in the generic forms.",
    },
    Limit {
        what: "Memory of decoding and rendering one payload",
        value: || {
            format!(
                "{} × payload + {}",
                RENDER_MEMORY_PER_INPUT_BYTE,
                bytes(RENDER_MEMORY_SLACK as u64)
            )
        },
        flag: None,
        reached: "A bound, not a check: the limits above keep decoding and rendering under it \
                  (property tests check this).",
    },
    Limit {
        what: "Rendered values cached",
        value: || {
            format!(
                "{} values, {}; payloads over {} and values over {} are not kept",
                count(RENDER_CACHE_ENTRIES as u64),
                bytes(RENDER_CACHE_BYTES as u64),
                bytes(RENDER_CACHE_MAX_PAYLOAD as u64),
                bytes(RENDER_CACHE_MAX_VALUE as u64)
            )
        },
        flag: None,
        reached: "The oldest are dropped and rendered again when shown.",
    },
    Limit {
        what: "Source file shown in the web UI",
        value: || bytes(MAX_SOURCE_BYTES),
        flag: None,
        reached: "The page says the file is too large instead of showing it.",
    },
    // MCP.
    Limit {
        what: "JSON-RPC batch (MCP 2025-03-26)",
        value: || format!("{} messages", count(MAX_BATCH_LEN as u64)),
        flag: None,
        reached: "The batch is refused whole with -32600.",
    },
    Limit {
        what: "Answers to one JSON-RPC batch",
        value: || bytes(MAX_BATCH_ANSWER_BYTES as u64),
        flag: None,
        reached: "Each request left gets -32000 instead of an answer: `data.handled` false when \
                  it was not run, true when it ran but its answer did not fit.",
    },
    Limit {
        what: "MCP stdio line",
        value: || bytes(MAX_STDIO_LINE_BYTES),
        flag: None,
        reached: "The rest of the line is discarded as it arrives, and it is answered -32700.",
    },
    Limit {
        what: "MCP HTTP sessions (both transports)",
        value: || count(DEFAULT_MCP_MAX_SESSIONS as u64),
        flag: Some("--mcp-max-sessions"),
        reached: "The Streamable HTTP session idle longest is closed to make room; when every \
                  session is in use, `initialize` gets 503.",
    },
    Limit {
        what: "Idle time of a Streamable HTTP session",
        value: || secs_f64(MCP_SESSION_IDLE_S),
        flag: Some("--mcp-session-idle-s"),
        reached: "The session is closed; its client gets 404 and initializes again. An open \
                  stream or a request in flight counts as activity: such a session is never \
                  idle.",
    },
    Limit {
        what: "Messages queued for an MCP HTTP stream its client does not read",
        value: || {
            format!(
                "{} messages or {}",
                count(MCP_OUTBOX_MESSAGES as u64),
                bytes(MCP_OUTBOX_BYTES as u64)
            )
        },
        flag: None,
        reached: "The session is dropped, with a warning in the log. A single message larger \
                  than the queue is not sent (and logged); the session stays.",
    },
    Limit {
        what: "Messages a Streamable HTTP session keeps for resumption (`Last-Event-ID`)",
        value: || {
            format!(
                "{} per stream, {} streams, {} in all",
                count(MCP_REPLAY_EVENTS as u64),
                count(MCP_REPLAY_STREAMS as u64),
                bytes(MCP_REPLAY_BYTES as u64)
            )
        },
        flag: None,
        reached: "The oldest messages (of the oldest streams) are forgotten. A client that \
                  reconnects with the id of an event whose successors are forgotten, or of a \
                  forgotten stream, gets HTTP 410 with -32600: those messages are lost (a \
                  request answered on that stream is not answered again).",
    },
    Limit {
        what: "Resource subscriptions of one MCP session",
        value: || count(MCP_MAX_SUBSCRIPTIONS as u64),
        flag: None,
        reached: "Those of resources that no longer exist are pruned; if that frees none, \
                  `resources/subscribe` fails with -32602.",
    },
    Limit {
        what: "Open `subscriptions/listen` streams of one modern MCP connection",
        value: || count(MCP_MAX_LISTENS as u64),
        flag: None,
        reached: "Another `subscriptions/listen` fails with -32000; cancel one first.",
    },
    Limit {
        what: "Open `subscriptions/listen` streams on Streamable HTTP (all clients)",
        value: || count(MCP_HTTP_MAX_LISTENS as u64),
        flag: None,
        reached: "Another `subscriptions/listen` POST is answered with -32000 (HTTP 200); close \
                  a stream first.",
    },
    Limit {
        what: "`clientInfo` kept by an MCP session",
        value: || {
            format!(
                "{}; beyond it {} of each of `name` and `version`",
                bytes(MCP_MAX_CLIENT_INFO_BYTES as u64),
                bytes(MCP_CLIENT_INFO_FIELD_BYTES as u64)
            )
        },
        flag: None,
        reached: "Only its `name` and `version` are kept, cut.",
    },
    Limit {
        what: "MCP `progressToken` (as JSON text)",
        value: || bytes(MCP_MAX_PROGRESS_TOKEN_BYTES as u64),
        flag: None,
        reached: "The request fails with -32602 (the token is repeated in every progress \
                  notification).",
    },
    Limit {
        what: "Items per page of MCP list results",
        value: || count(DEFAULT_MCP_PAGE_SIZE as u64),
        flag: Some("--mcp-page-size"),
        reached: "The rest comes in further pages (`nextCursor`).",
    },
    Limit {
        what: "Longest an MCP tool blocks",
        value: || secs_f64(MAX_BLOCK_S),
        flag: None,
        reached: "A longer `timeout_s` of `breakpoint_wait_for_pause` or `breakpoint_repl_eval` \
                  is cut to it; the `external_*` listings wait no longer for servers still \
                  connecting.",
    },
    Limit {
        what: "External tool result shown to an agent (`external_call_tool`)",
        value: || bytes(AGENT_RESULT_LIMIT as u64),
        flag: None,
        reached: "The result is cut and says so (`truncated`, a `note` with the CID of the whole \
                  result, which the REST API returns whole).",
    },
    // External MCP servers.
    Limit {
        what: "External server start (spawn or HTTP handshake, `initialize`, first `tools/list`)",
        value: || secs(UPSTREAM_CONNECT_TIMEOUT),
        flag: Some("--mcp-connect-timeout-s"),
        reached: "Its status becomes `error`.",
    },
    Limit {
        what: "External tool call",
        value: || secs(UPSTREAM_CALL_TIMEOUT),
        flag: None,
        reached: "The call is cancelled and fails with `call_timeout`. The server's `timeout_s` \
                  (in its config entry or `POST /api/mcp-clients/connect`) sets it.",
    },
    Limit {
        what: "Line on an external stdio server's stdout (one message)",
        value: || bytes(UPSTREAM_STDIO_MAX_LINE as u64),
        flag: None,
        reached: "The line is skipped, with an error in the log.",
    },
    Limit {
        what: "Line on an external stdio server's stderr copied into the log",
        value: || bytes(UPSTREAM_MAX_LOG_LINE as u64),
        flag: None,
        reached: "Only its length is logged.",
    },
    Limit {
        what: "Answer of an external HTTP server",
        value: || {
            format!(
                "{} ({} of an error answer)",
                bytes(UPSTREAM_MAX_BODY),
                bytes(UPSTREAM_ERROR_BODY)
            )
        },
        flag: None,
        reached: "The request fails; of an error answer, the rest is not read.",
    },
    Limit {
        what: "Line or event of an external HTTP server's event stream",
        value: || bytes(UPSTREAM_SSE_MAX_LINE as u64),
        flag: None,
        reached: "The stream ends with an error.",
    },
    Limit {
        what: "Pages of one external list (`tools/list`, `resources/list`)",
        value: || count(UPSTREAM_MAX_PAGES as u64),
        flag: None,
        reached: "The list stops there, with a warning in the log.",
    },
    Limit {
        what: "Tools of one external server",
        value: || {
            format!(
                "{} tools, {} of their JSON",
                count(UPSTREAM_MAX_TOOLS as u64),
                bytes(UPSTREAM_MAX_CATALOG_BYTES as u64)
            )
        },
        flag: None,
        reached: "The tools past it are skipped (no further page is asked for), with a warning \
                  in the log and their count in the server's `skipped_tools` \
                  (`GET /api/mcp-clients`).",
    },
    Limit {
        what: "Resources of one external server in a listing",
        value: || {
            format!(
                "{} resources, {} of their JSON",
                count(UPSTREAM_MAX_RESOURCES as u64),
                bytes(UPSTREAM_MAX_CATALOG_BYTES as u64)
            )
        },
        flag: None,
        reached: "The resources past it are skipped (no further page is asked for), with a \
                  warning in the log and their count in the listing's `skipped`.",
    },
    Limit {
        what: "Resource URI of an external server",
        value: || format!("{} characters", count(UPSTREAM_RESOURCE_URI_CHARS as u64)),
        flag: None,
        reached: "The resource is skipped, as is one whose URI is empty or holds whitespace, a \
                  control or an invisible formatting character, whose name holds a control or \
                  invisible formatting character, and a second resource of the same URI; each \
                  is logged and counted in the listing's `skipped`.",
    },
    Limit {
        what: "Tool name of an external server",
        value: || format!("{UPSTREAM_TOOL_NAME_CHARS} characters"),
        flag: None,
        reached: "The tool is skipped, as is one whose name is empty or holds whitespace, a \
                  control or an invisible formatting character, and a second tool of the same \
                  name; each is logged and counted in `skipped_tools`.",
    },
    Limit {
        what: "Messages waiting to be written to an external server (a stdio server's stdin, a \
               legacy SSE server's POSTs)",
        value: || count(UPSTREAM_WRITE_QUEUE as u64),
        flag: None,
        reached: "The write fails: the call fails with `call_failed` saying the server does \
                  not read (or take) its input, and the connection is dropped (then reconnected).",
    },
    Limit {
        what: "Resuming a Streamable HTTP response stream the server closed before the answer \
               (revisions up to 2025-11-25)",
        value: || {
            format!(
                "{} reconnections in a row without a new event, each after the server's \
                 `retry` (else {}, at most {})",
                UPSTREAM_RESUME_ATTEMPTS,
                secs(UPSTREAM_RESUME_DELAY),
                secs(UPSTREAM_RESUME_MAX_DELAY)
            )
        },
        flag: None,
        reached: "The call fails with `call_failed` saying the stream closed without the \
                  answer; the call's own timeout still applies while it is resumed.",
    },
];

/// The limits table of docs/limits.md, as Markdown.
pub fn reference_markdown() -> String {
    let mut out =
        String::from("| Limit | Value | Flag | When it is reached |\n|---|---|---|---|\n");
    for l in TABLE {
        let flag = l
            .flag
            .map_or_else(|| "none".to_owned(), |f| format!("`{f}`"));
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            l.what,
            (l.value)(),
            flag,
            l.reached
        ));
    }
    out
}

/// `n` with thousands separators: 1,000,000 (also the web UI's counts).
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A size in the largest binary unit that divides it: 64 MiB, 4 KiB, 50,000 bytes.
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", count(n >> 20)),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", count(n >> 10)),
        n => format!("{} bytes", count(n)),
    }
}

/// A duration in seconds: 10 s, 1.5 s.
fn secs(d: std::time::Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", count(d.as_secs()))
    } else {
        format!("{} s", d.as_secs_f64())
    }
}

/// Seconds given as a number: 1,800 s.
fn secs_f64(s: f64) -> String {
    if s.fract() == 0.0 && s >= 0.0 {
        format!("{} s", count(s as u64))
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn values_read_well() {
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(count(256), "256");
        assert_eq!(bytes(64 << 20), "64 MiB");
        assert_eq!(bytes(4096), "4 KiB");
        assert_eq!(bytes(50_000), "50,000 bytes");
        assert_eq!(secs(std::time::Duration::from_millis(1500)), "1.5 s");
        assert_eq!(secs_f64(1800.0), "1,800 s");
    }

    #[test]
    fn every_flag_in_the_table_is_a_flag_of_the_server() {
        for l in TABLE {
            if let Some(flag) = l.flag {
                let parsed =
                    <crate::config::Args as argh::FromArgs>::from_args(&["x"], &[flag, "1"]);
                assert!(parsed.is_ok(), "{}: {flag} is not a flag", l.what);
            }
        }
    }

    #[test]
    fn rows_are_one_line_each_and_hold_no_table_syntax() {
        for l in TABLE {
            for cell in [l.what, &(l.value)(), l.reached] {
                assert!(!cell.contains(['|', '\n']), "{}: {cell}", l.what);
                assert!(!cell.contains("  "), "{}: a double space in {cell}", l.what);
            }
        }
    }
}
