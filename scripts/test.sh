#!/bin/sh
# The project's test command (CI runs exactly this): formatting, lints, every unit and
# integration test (the real binary on port 0 driven over HTTP and MCP, the demo program, the
# README's MCP registration snippets, the pickle writer against python3, the pickle reader's
# property and corpus tests), the tests of the vendored tiny_http's patches, the binary
# installed with `cargo install` as the README says (into .cache/install, reusing the debug
# build) answering --version, then the MCP
# interop peers (official Python SDK 1.30.0 and 2.3.0, MCP Inspector CLI 2.12.0; as external
# servers of our MCP client: server-everything/filesystem/memory 2026.8.31, mcp-server-time;
# the official MCP conformance suite 0.1.16 and 0.2.0-alpha.12 against server and client),
# then the web UI in headless Chromium (scripts/ui_test.sh: Debian's chromium, driven by
# playwright-core 1.64.1 from npm; screenshots in target/ui-screenshots/).
# Needs: cargo with rustfmt and clippy, python3 with pip and venv, node 20+ and npm, and apt-get
# when chromium is missing. Pinned peers, playwright-core and dill are installed from PyPI and
# npm into .cache/ on first use. Usage: scripts/test.sh
set -eu
cd "$(dirname "$0")/.."

command -v python3 >/dev/null || { echo "scripts/test.sh: python3 is required" >&2; exit 1; }

# The peers of the last two steps (PyPI, npm, Debian's Chromium) are installed on first use;
# they are fetched now, in the background, while the Rust steps run (network more than CPU),
# and waited for before those steps, which would otherwise fetch them then.
mkdir -p .cache
# At the lowest CPU and (where ionice exists) disk priority, so the tests' timings see little of it.
idle=
command -v ionice >/dev/null && idle="ionice -c 3"
(CIDELDILL_INSTALL_ONLY=1 $idle nice -n 19 sh scripts/interop.sh
    CIDELDILL_INSTALL_ONLY=1 $idle nice -n 19 sh scripts/ui_test.sh) >.cache/prefetch.log 2>&1 &
prefetch=$!
trap 'kill "$prefetch" 2>/dev/null || true' EXIT

# Each step says how long it took (stderr), to see where the time goes.
timed() {
    t0=$(date +%s)
    "$@"
    echo "test.sh: $* took $(($(date +%s) - t0)) s" >&2
}

timed cargo fmt --check
timed cargo clippy --all-targets --quiet -- -D warnings
timed cargo test
# The vendored tiny_http's patches, each against a real server (vendor/tiny_http/PATCHES.md).
timed cargo test --quiet -p tiny_http
# The README's install command, into .cache/install (--debug and --target-dir reuse the build
# above, so this takes a second); the installed binary must run.
timed cargo install --quiet --locked --path . --bin cideldill-server --debug --root .cache/install --target-dir target
version=$(.cache/install/bin/cideldill-server --version)
expected="cideldill-server $(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
[ "$version" = "$expected" ] || {
    echo "scripts/test.sh: the installed cideldill-server --version printed '$version', expected '$expected'" >&2
    exit 1
}
# https to external MCP servers is an optional feature (rustls): it must keep building and pass
# its lints; the default build comes last so the interop peers run the default binary.
timed cargo clippy --features tls --all-targets --quiet -- -D warnings
timed cargo build --features tls --quiet
timed cargo build --quiet
timed wait "$prefetch" || true
timed sh scripts/interop.sh
timed sh scripts/ui_test.sh
