#!/bin/sh
# The project's benchmark: prints one markdown table (machine and date above it), every row
# beside its floor measured in the same run and the ratio to it: memory per recorded call and
# RSS after 100,000 and 1,000,000 calls, call cycles per second at 1, 4 and 16 client threads
# against a trivial loopback HTTP server (and at 4 threads with a breakpoint, a condition and a
# logpoint on the called function), MCP stdio latency against a pipe through `cat`, the
# pause round trip, `external_call_tool` against calling the fixture MCP server directly,
# start-up time, idle RSS, binary size, the same with `--db FILE` against an append+fdatasync
# floor, the content store at 1,000,000 objects, pickle decode-and-render against python3, and
# text search and JSON Lines export over 100,000 recorded calls (in memory and with --db)
# against a scan of the same texts held in memory.
# With `--baseline BIN` every server row is also measured on BIN (e.g. an older release binary;
# only flags that exist in it are used) in extra columns of the same table.
# It builds the release binaries (the server and the fixture MCP server) and benches/bench.rs (the load
# generator and floors, in Rust), and generates the load with scripts/bench_load.py and
# `scripts/bench_pickle.py --emit`. Servers run with RUST_LOG=warn and CIDELDILL_HOME in a
# temporary directory (removed at the end), on loopback ports chosen by the kernel.
# A timing, never a test: not part of scripts/test.sh. Takes about seven minutes on 2 cores
# (progress on stderr): the 1,000,000-call phase of the memory rows runs last and gets what is
# left of --budget seconds (default 420, counted from the start of the script, builds included;
# it says "after only N calls (time box)" if that is not enough); --scale X multiplies request
# counts and deadlines (e.g. 0.1 for a quick try).
# Needs: cargo, python3 (stdlib only), cat, kill, taskset (util-linux: the pipe rows are also
# measured with client and server pinned to one CPU); loopback networking.
# Usage: scripts/bench.sh [--baseline /path/to/old/cideldill-server] [--scale X] [--budget S]
#        [--only STEPS] (comma-separated: throughput, conditions, MCP stdio, pause, external, start-up, --db,
#        content store, pickle, search, memory)
set -eu

usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

baseline=""
only=""
scale=1
budget=420
while [ $# -gt 0 ]; do
    case "$1" in
        --baseline)
            [ $# -ge 2 ] || { echo "scripts/bench.sh: --baseline needs a path" >&2; exit 2; }
            baseline=$2
            shift 2
            ;;
        --scale)
            [ $# -ge 2 ] || { echo "scripts/bench.sh: --scale needs a number" >&2; exit 2; }
            scale=$2
            shift 2
            ;;
        --only)
            [ $# -ge 2 ] || { echo "scripts/bench.sh: --only needs step names" >&2; exit 2; }
            only=$2
            shift 2
            ;;
        --budget)
            [ $# -ge 2 ] || { echo "scripts/bench.sh: --budget needs seconds" >&2; exit 2; }
            budget=$2
            shift 2
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            echo "scripts/bench.sh: unknown argument $1 (see --help)" >&2
            exit 2
            ;;
    esac
done
case "$scale" in
    "" | *[!0-9.]* | *.*.* | .)
        echo "scripts/bench.sh: --scale takes a number, not $scale" >&2
        exit 2
        ;;
esac
case "$budget" in
    "" | *[!0-9]*)
        echo "scripts/bench.sh: --budget takes whole seconds, not $budget" >&2
        exit 2
        ;;
esac
if [ -n "$baseline" ]; then
    case "$baseline" in
        /*) ;;
        *) baseline="$PWD/$baseline" ;;
    esac
    [ -x "$baseline" ] || { echo "scripts/bench.sh: $baseline is not an executable" >&2; exit 2; }
fi

cd "$(dirname "$0")/.."
root=$PWD
for tool in cargo python3 cat kill; do
    command -v "$tool" >/dev/null || { echo "scripts/bench.sh: $tool is required" >&2; exit 1; }
done

started=$(date +%s)
echo "bench: building (release binary, fixture MCP server, bench program)" >&2
cargo build --release --bins --quiet
cargo bench --bench bench --no-run --quiet

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cideldill-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

echo "bench: generating the load and timing python3's pickle.loads + repr" >&2
python3 scripts/bench_load.py >"$tmp/load.json"
python3 scripts/bench_pickle.py --emit "$tmp/pickles" "$(python3 -c "print(0.5 * $scale)")" >"$tmp/pickles.tsv"

mkdir "$tmp/run"
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    revision="$revision (with uncommitted changes)"
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "## cideldill-server benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- machine: $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr)"
echo "- ours: target/release/cideldill-server at $revision"
if [ -n "$baseline" ]; then
    echo "- baseline: $baseline"
fi
echo "- scale: $scale"
echo

set -- --server "$root/target/release/cideldill-server" \
    --fixture "$root/target/release/cideldill-fixture-mcp-server" \
    --load "$tmp/load.json" --pickles "$tmp/pickles.tsv" --tmp "$tmp/run" --scale "$scale" \
    --budget-s "$((budget - ($(date +%s) - started) - 15))"
if [ -n "$baseline" ]; then
    set -- "$@" --baseline "$baseline"
fi
if [ -n "$only" ]; then
    set -- "$@" --only "$only"
fi
cargo bench --quiet --bench bench -- "$@"
echo "Total wall time of scripts/bench.sh: $(($(date +%s) - started)) s (builds included)."
