//! Upstream MCP servers: this directory will hold the MCP client manager, which connects to
//! external MCP servers (stdio, legacy HTTP+SSE, Streamable HTTP), aggregates their tools into
//! one catalog named `server/tool`, and routes calls to them.
//!
//! For now it holds the pure groundwork:
//! - [`config`]: server entries from `{"servers": …}` / `{"mcpServers": …}` files and
//!   `--mcp-client NAME:VALUE` flags, `${VAR}` expansion, the config-file path, and the rules
//!   for which file is read and how inline servers merge over it.
//! - [`names`]: server-name validation, tool glob filters and the catalog resolver.

pub mod config;
pub mod http;
pub mod names;
pub mod peer;
pub mod sse;
pub mod sse_parse;
