//! cideldill-server: a breakpoint server for programs instrumented with the CID el Dill client.
//! Modules in reading order: configuration and errors, the pure domain stores, the content
//! store, the state that composes them, the operations, the HTTP face, and start-up.

pub mod config;
pub mod error;
pub mod ids;
pub mod intern;
pub mod limits;
mod lock_rule;

pub(crate) mod align;
pub(crate) mod breakpoints;
pub(crate) mod calls;
pub(crate) mod condition;
pub mod records;
pub(crate) mod repl;
pub(crate) mod replay;
pub(crate) mod resolution;
pub(crate) mod search;

pub mod cas;
pub(crate) mod node;
pub(crate) mod origins;
pub mod pickle;
pub mod pickle_write;
pub(crate) mod pool;
pub(crate) mod port_file;
pub(crate) mod pretty;
pub(crate) mod process_index;
pub(crate) mod render;
pub(crate) mod runs;
pub mod schema;
pub mod store;
pub mod sys;
pub mod urlenc;

pub mod events;
pub(crate) mod files;
pub mod jsonrpc;
pub(crate) mod state;

pub(crate) mod service;
pub(crate) mod sse;
pub(crate) mod ui;
pub mod upstream;

pub mod http;
pub mod mcp;

pub mod app;
