#!/bin/sh
# The project's benchmark: prints one markdown table (machine and date above it), every row
# beside its floor measured in the same run and the ratio to it: memory per recorded call and
# RSS after 100,000 and 1,000,000 calls, call cycles per second (POST /api/call/start + POST
# /api/call/complete, a new connection per request) at 1, 4 and 16 client threads against nginx
# answering every request with a fixed small JSON body (goal: at least 0.9× its rate; beside a
# do-nothing tiny_http server too), and at 4 threads with a breakpoint, a condition and a
# logpoint on the called function (nginx again beside them), MCP stdio latency against a pipe
# through `cat`, the pause round trip against a trivial loopback HTTP server,
# `external_call_tool` against calling the fixture MCP server directly, start-up time, idle
# RSS, binary size, the same with `--db FILE` against an append+fdatasync floor (plus nginx's
# time per call cycle for the throughput rows), the content store at 1,000,000 objects, pickle
# decode-and-render against python3, and text search and JSON Lines export over 100,000
# recorded calls (in memory and with --db) against a scan of the same texts held in memory.
# With `--baseline BIN` every server row is also measured on BIN (e.g. an older release binary;
# only flags that exist in it are used) in extra columns of the same table.
# It builds the release binaries (the server and the fixture MCP server) and benches/bench.rs (the load
# generator and floors, in Rust), and generates the load with scripts/bench_load.py and
# `scripts/bench_pickle.py --emit`. Servers run with RUST_LOG=warn and CIDELDILL_HOME in a
# temporary directory (removed at the end), on loopback ports chosen by the kernel. nginx runs
# as the current user from a configuration bench.rs writes there (pid file, logs and temporary
# paths there too; `daemon off`, `worker_processes auto`, no access log, keep-alive allowed,
# request bodies discarded) on a loopback port the kernel chose a moment before, and the load
# generator sends it exactly what it sends ours; it is stopped at the end of its rows, and on
# error or interrupt (a trap stops one a killed bench left behind).
# A timing, never a test: not part of scripts/test.sh. Takes about seven minutes on 2 cores
# (progress on stderr): the 1,000,000-call phase of the memory rows runs last and gets what is
# left of --budget seconds (default 420, counted from the start of the script, builds included;
# it says "after only N calls (time box)" if that is not enough); --scale X multiplies request
# counts and deadlines (e.g. 0.1 for a quick try).
# Needs: cargo, python3 (stdlib only), cat, kill, taskset (util-linux: the pipe rows are also
# measured with client and server pinned to one CPU); loopback networking; nginx, from Debian's
# nginx-light package, installed on first use when the throughput or conditions rows run and
# `nginx` is missing (`apt-get install -y nginx-light` as root or through sudo, `apt-get update`
# first only if that fails; Debian's package mirror on that first run only; on a machine with
# systemd the package also starts the system's nginx, which the bench does not use).
# Usage: scripts/bench.sh [--baseline /path/to/old/cideldill-server] [--scale X] [--budget S]
#        [--only STEPS] (comma-separated: throughput, conditions, MCP stdio, pause, external, start-up, --db,
#        content store, pickle, search, pages, memory)
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

# nginx, the floor of the throughput and conditions rows: Debian's nginx-light, installed on
# first use (as root, or through sudo when there is one; apt-get update only when the install
# fails without it). Only when a step that uses it is selected.
nginx=""
case ",${only:-throughput}," in
    *,throughput,* | *,conditions,*)
        nginx=$(command -v nginx || true)
        [ -n "$nginx" ] || [ ! -x /usr/sbin/nginx ] || nginx=/usr/sbin/nginx
        if [ -z "$nginx" ]; then
            echo "bench: installing Debian's nginx-light (the throughput floor)" >&2
            export DEBIAN_FRONTEND=noninteractive
            SUDO=
            [ "$(id -u)" = 0 ] || ! command -v sudo >/dev/null || SUDO="sudo -E"
            # Where systemd runs, the package also starts the system's nginx: not the one used.
            { $SUDO apt-get install -y nginx-light >&2 ||
                { $SUDO apt-get update >&2 && $SUDO apt-get install -y nginx-light >&2; }; } || true
            nginx=$(command -v nginx || true)
            [ -n "$nginx" ] || [ ! -x /usr/sbin/nginx ] || nginx=/usr/sbin/nginx
            [ -n "$nginx" ] || {
                echo "scripts/bench.sh: nginx is required (the throughput floor) and could not be installed: run \`apt-get install -y nginx-light\` as root" >&2
                exit 1
            }
        fi
        ;;
esac

started=$(date +%s)
echo "bench: building (release binary, fixture MCP server, bench program)" >&2
cargo build --release --bins --quiet
cargo bench --bench bench --no-run --quiet

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cideldill-bench.XXXXXX")
# bench.rs stops the nginx it starts (its pid file is then gone); one left behind by a bench
# that was killed is stopped here, by the pid in its pid file (checked to be nginx).
cleanup() {
    for pidfile in "$tmp"/run/*/nginx.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile" 2>/dev/null || true)
        case "$pid" in
            "" | *[!0-9]*) continue ;;
        esac
        if grep -q nginx "/proc/$pid/cmdline" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            i=0
            while [ -d "/proc/$pid" ] && [ "$i" -lt 50 ]; do
                sleep 0.1
                i=$((i + 1))
            done
        fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
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
if [ -n "$nginx" ]; then
    set -- "$@" --nginx "$nginx"
fi
cargo bench --quiet --bench bench -- "$@"
echo "Total wall time of scripts/bench.sh: $(($(date +%s) - started)) s (builds included)."
