//! The reliability suite: the server under a mixed 30 s load on every face, under faults (kill
//! -9 during heavy writes, SIGTERM with calls in flight, an external MCP server killed mid-call),
//! under a hostile external MCP server (floods, a child that stops reading, hostile tool lists),
//! and under hostile input (the JSON-RPC framing and the configuration parsers in process, the
//! HTTP routes and the MCP stdio transport against the real binary, path traversal on every
//! path parameter). Liveness, not speed: every wait has a deadline of seconds to tens of
//! seconds, and every property test and fuzzer checks its fixed case count in full (no time cap
//! lets cases pass unchecked).
//!
//! Its own test binary for two reasons: it installs a counting global allocator to bound the memory of the in-process parsers, and its load test should not share two cores with
//! the hundreds of tests of `it`. From the test support crate (`tests/support`) it uses the
//! server support (spawning the server, the HTTP client, protocol items), the counting allocator
//! and the benchmark's load generator.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use cideldill_test_support::{alloc, load as loadgen, server as support};

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

mod harness;
mod props;

mod client_bytes;
mod config_props;
mod faults;
mod framing;
mod hostile_upstream;
mod load;
mod local_users;
mod origins;
mod ownership;
mod page_pauses;
mod page_soak;
mod routes;
mod traversal;
