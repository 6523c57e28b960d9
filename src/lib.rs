//! cideldill-server: a breakpoint server for programs instrumented with the CID el Dill client.
//! Modules in reading order: configuration and errors, the pure domain stores, the content
//! store, the state that composes them, the operations, the HTTP face, and start-up.

pub mod config;
pub mod error;
pub mod ids;
pub mod intern;
pub mod limits;
mod lock_rule;

pub mod align;
pub mod breakpoints;
pub mod calls;
pub mod condition;
pub mod records;
pub mod repl;
pub mod replay;
pub mod resolution;
pub mod search;

pub mod cas;
pub mod node;
pub mod origins;
pub mod pickle;
pub mod pickle_write;
pub mod pool;
pub mod port_file;
pub mod pretty;
pub mod process_index;
pub mod render;
pub mod runs;
pub mod schema;
pub mod store;
pub mod sys;
pub mod urlenc;

pub mod events;
pub mod files;
pub mod jsonrpc;
pub mod state;

pub mod service;
pub mod sse;
pub mod ui;
pub mod upstream;

pub mod http;
pub mod mcp;

pub mod app;
