//! The one integration test binary: it starts the real `cideldill-server` executable on port 0
//! and talks HTTP to it, with a deadline on every wait.
#![allow(clippy::print_stdout, clippy::print_stderr, dead_code)]

// The shared test support crate (`tests/support`), under the names the tests use.
use cideldill_test_support::{pickle_builder, server as support};

mod call_protocol;
mod cli;
mod compare;
mod conditions;
mod debug_client;
mod delete_run;
mod demo;
mod event_stream;
mod events;
mod fixture;
mod http_stack;
mod join;
mod mcp_http;
mod mcp_limits;
mod mcp_modern;
mod mcp_stdio;
mod mcp_support;
mod mcp_tools;
mod parity;
mod persistence;
mod pickle_python;
mod readme_run;
mod readme_snippets;
mod readme_walkthrough;
mod render_limits;
mod repl_gone;
mod replay;
mod resolution;
mod rest_api;
mod runs;
mod switches;
mod tidy;
mod trust;
mod ui_calls;
mod ui_pages;
mod ui_tree;
mod upstream;
mod upstream_auth;
mod upstream_http;
mod upstream_modern;
