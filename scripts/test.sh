#!/bin/sh
# The project's test command (CI runs exactly this): formatting, lints, then every unit and
# integration test. The integration tests start the real binary on port 0, run the demo
# program against it, and compare the pickle writer with python3.
# Needs: cargo with rustfmt and clippy, python3 (with pip, which installs dill from PyPI into
# .cache/python on first use). Usage: scripts/test.sh
set -eu
cd "$(dirname "$0")/.."

command -v python3 >/dev/null || { echo "scripts/test.sh: python3 is required" >&2; exit 1; }

cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
cargo test --all-targets
