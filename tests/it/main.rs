//! The one integration test binary: it starts the real `cideldill-server` executable on port 0
//! and talks HTTP to it, with a deadline on every wait.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod support;

mod pickle_python;
