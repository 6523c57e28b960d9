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
