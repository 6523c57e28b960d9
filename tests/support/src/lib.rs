//! What the test binaries (`tests/it`, `tests/reliability`, `tests/pickle_props.rs`), the
//! crate's own unit tests and the benchmark share, as one crate (a path dev-dependency of
//! `cideldill-server`) rather than files included by path:
//!
//! - [`server`]: starting the real binary on port 0, the blocking HTTP client, protocol items,
//!   process facts from `/proc`, raw HTTP; every wait with a deadline;
//! - [`alloc`]: the counting global allocator (per-thread current and peak bytes), installed by
//!   the binaries that bound memory;
//! - [`pickle_builder`]: protocol 4 pickles built opcode by opcode;
//! - [`load`]: the benchmark's load generator (a hand-written HTTP/1.1 client and the client's
//!   call cycle), also driven by the reliability suite.

pub mod alloc;
pub mod load;
pub mod pickle_builder;
pub mod server;
