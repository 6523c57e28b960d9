//! Upstream MCP servers: the MCP client manager, which connects to external MCP servers
//! (stdio, legacy HTTP+SSE, Streamable HTTP), aggregates their tools into one catalog named
//! `server/tool`, routes calls to them, and keeps the connections healthy.
//!
//! - [`config`]: server entries from `{"servers": …}` / `{"mcpServers": …}` files and
//!   `--mcp-client NAME:VALUE` flags, `${VAR}` expansion, the config-file path, and the rules
//!   for which file is read and how inline servers merge over it.
//! - [`names`]: server-name validation, tool glob filters and the catalog resolver.
//! - [`peer`]: one JSON-RPC conversation over any transport ([`peer::Link`]).
//! - [`params`]: tool parameters a modern Streamable HTTP server wants mirrored into
//!   `Mcp-Param-*` headers (`x-mcp-header`), and which annotations make a tool invalid.
//! - [`stdio`], [`http`], [`sse`] (with [`sse_parse`]): the transports; `crate::sys`: process-group
//!   signals, the crate's one `unsafe` module.
//! - [`manager`]: the servers, their statuses, routing, health and reconnection.
//! - [`timing`]: connect timeout, ping interval and timeout, reconnection backoff, kill grace.
//!
//! Nothing here knows the server's state: `crate::service::external` holds the operations the
//! REST API and the `external_*` MCP tools share (calls recorded into the state and the store).

pub mod auth;
pub mod config;
pub mod http;
pub mod manager;
pub mod names;
pub mod params;
pub mod peer;
pub mod sse;
pub mod sse_parse;
pub mod stdio;
pub mod timing;
