#!/bin/sh
# interop.sh: checks `cideldill-server --mcp` (stdio) and `--mcp-sse` (HTTP) against real
# MCP clients, and cideldill-server as an MCP client against real MCP servers.
#
# What it does
#   1. Installs pinned peers once into <repo>/.cache/interop/ (skipped when present):
#        v1/   Python venv with mcp==1.30.0
#        v2/   Python venv with mcp==2.3.0
#        npm/  @modelcontextprotocol/inspector@2.12.0 (install scripts skipped; the CLI
#              does not need them; it declares node 22.19 or newer: on an older node npm
#              warns EBADENGINE and this script prints a note, yet its checks run, as its CLI
#              works on node 20.20), and
#              the upstream peers @modelcontextprotocol/server-everything, server-filesystem
#              and server-memory, all @2026.8.31 (install scripts skipped too)
#        time/ Python venv with mcp-server-time==2026.10.19 (which brings mcp 2.x)
#   2. Builds target/debug/cideldill-server if it is missing (cargo build --quiet).
#   3. Runs, each under `timeout 120`:
#        scripts/interop_client.py with mcp 1.30.0 and with mcp 2.3.0 over stdio (every
#          tool, resource, template, prompt, completion, subscription, notifications: a pause
#          heard through resources/updated of breakpoint://paused and notifications/message,
#          notifications/breakpoint/* only where mcp 2.x declares their capability as a
#          ClientExtension, and no SDK warning in a session), once
#          against its own server and once through `--mcp` joining a running server; with
#          mcp 2.3.0 also in the stateless revision 2026-07-28 (mode="auto", which goes modern
#          through server/discover, and the revision pinned: the suite with a listen stream),
#        scripts/interop_http.py with mcp 1.30.0 and with mcp 2.3.0 over HTTP: the SDK's
#          legacy SSE client against /mcp/sse and its Streamable HTTP client against /mcp,
#          each with its own `--mcp-sse` server (tools, status resource, progress, a pause
#          made over the REST API heard through resources/updated, notifications/message and
#          list_changed, execution_paused only where declared, completion, no SDK warning, close),
#        the Inspector CLI over stdio, legacy SSE and Streamable HTTP (every tool is called once:
#          over HTTP with scripts/interop_app.py pausing a call and answering a REPL eval;
#          over stdio: `mcp-inspector --cli --config <file> --server
#          cideldill ...`: tools/list, tools/call, resources/*, prompts/*, logging/setLevel,
#          isError) and over HTTP (`--transport sse --server-url .../mcp/sse` and
#          `--transport http --server-url .../mcp`, one `--mcp-sse` server each: tools/list,
#          tools/call breakpoint_add, resources/read breakpoint://status),
#        scripts/agent_demo.py with mcp 2.3.0 (an agent debugging scripts/demo_app.py,
#          plus tools/call and ping latency over stdio),
#        scripts/interop_upstream.py with mcp 2.3.0: the server as an MCP client. An agent
#          session (`--mcp --exit-on-stdin-close --mcp-clients-config`) with server-everything,
#          server-filesystem, server-memory and mcp-server-time over stdio uses every
#          external_* tool (late tools from tools/list_changed, call_timeout, REST calls and
#          call records, resources); no child process or zombie may outlive the session;
#          SIGKILL of a child -> disconnected -> reconnected; server-everything over legacy
#          SSE, Streamable HTTP and auto (falls back to SSE) via POST /api/mcp-clients/connect;
#          INFO lines with the latency added to an echo call (p50/p99 against a direct call);
#          the protocol era chosen per peer (mcp-server-time modern, the npm peers legacy) and a
#          modern-only Python SDK fixture (initialize refused) over stdio and Streamable HTTP.
#        scripts/conformance.sh (under `timeout 300`): the official MCP conformance suite,
#          @modelcontextprotocol/conformance 0.1.16 and 0.2.0-alpha.12 on node 22.23.3 (all
#          installed into <repo>/.cache/conformance/ on first use), against the server in both
#          eras and against the client (see that script: its excluded scenarios, with reasons,
#          and its known failures, each with the issue section that fixes it; XFAIL lines are
#          not counted).
#   Every server runs with --memory --port 0, CIDELDILL_HOME and CIDELDILL_PORT_FILE inside
#   a `mktemp -d` directory, so ~/.cideldill is never touched; the directory is removed and
#   any process still running from it is stopped on exit.
#
# What it needs
#   python3 (3.10+, with venv), node and npm (node 22.19+ as the Inspector declares; 20+ at
#   least, else the npm peers' checks fail with a message), cargo (only if the binary is missing),
#   GNU coreutils `timeout`; network access to PyPI and npm on the first run only.
#
# How to call it
#   scripts/interop.sh            # from anywhere; prints one line per check and ends with
#                                 # `interop: N passed, N failed`; exit 1 if anything failed
#   Environment: CIDELDILL_SERVER_BIN (binary to test, default target/debug/cideldill-server),
#   CIDELDILL_INTEROP_CACHE (peer cache, default <repo>/.cache/interop),
#   INTEROP_RUST_LOG (server log filter for the Python peers, default warn),
#   INTEROP_TIMEOUT (seconds each peer run may take, default 120),
#   CIDELDILL_INSTALL_ONLY=1 (install the peers and the conformance suite, run nothing).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CIDELDILL_INTEROP_CACHE:-$ROOT/.cache/interop}
BIN=${CIDELDILL_SERVER_BIN:-$ROOT/target/debug/cideldill-server}
PEER_TIMEOUT=${INTEROP_TIMEOUT:-120}
INSTALL_TIMEOUT=600
MCP_V1=1.30.0
MCP_V2=2.3.0
INSPECTOR=2.12.0
NPM_PEERS_V=2026.8.31 # server-everything, server-filesystem, server-memory
TIME_V=2026.10.19     # mcp-server-time (PyPI; requires mcp 2.x)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/cideldill-interop.XXXXXX")
PASSED=0
FAILED=0

. "$ROOT/scripts/lib.sh"

# Stops processes started by this run that outlived their parent: servers and demos whose
# CIDELDILL_HOME lies inside $TMP (only this run uses that directory).
sweep() { sweep_env F "CIDELDILL_HOME=$TMP/"; }
cleanup() {
    SWEEP_KEEP=
    sweep
    rm -rf "$TMP"
}
on_exit cleanup

# start_http_server <dir>: starts `$BIN --mcp-sse --memory --port 0` in the background with
# its home and port file in <dir>; sets HTTP_PID and HTTP_PORT (fails after 15 s without a port).
start_http_server() {
    mkdir -p "$1"
    CIDELDILL_HOME=$1 CIDELDILL_PORT_FILE=$1/port RUST_LOG=${INTEROP_RUST_LOG:-warn} \
        "$BIN" --mcp-sse --memory --port 0 >"$1/server.log" 2>&1 </dev/null &
    HTTP_PID=$!
    tries=0
    while [ ! -s "$1/port" ]; do
        tries=$((tries + 1))
        if [ "$tries" -gt 150 ] || ! kill -0 "$HTTP_PID" 2>/dev/null; then
            stop_http_server
            return 1
        fi
        sleep 0.1
    done
    HTTP_PORT=$(cat "$1/port")
}
# stop_http_server: SIGTERM to the server started last, then waits for it.
stop_http_server() {
    kill "$HTTP_PID" 2>/dev/null || true
    wait "$HTTP_PID" 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------
# 1. Peers

mcp_version_is() { # venv version
    [ -x "$1/bin/python" ] &&
        "$1/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("mcp") != sys.argv[1])' "$2" 2>/dev/null
}

install_venv() { # name version
    venv=$CACHE/$1
    if mcp_version_is "$venv" "$2"; then
        return 0
    fi
    echo "interop: installing mcp==$2 into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" &&
        timeout "$INSTALL_TIMEOUT" "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$2" >&2 &&
        mcp_version_is "$venv" "$2"
}

INSPECTOR_PKG=$CACHE/npm/node_modules/@modelcontextprotocol/inspector/package.json
INSPECTOR_BIN=$CACHE/npm/node_modules/.bin/mcp-inspector
inspector_installed() {
    [ -f "$INSPECTOR_PKG" ] && [ -e "$INSPECTOR_BIN" ] &&
        grep -q "\"version\": *\"$INSPECTOR\"" "$INSPECTOR_PKG"
}
install_inspector() {
    inspector_installed && return 0
    echo "interop: installing @modelcontextprotocol/inspector@$INSPECTOR into $CACHE/npm" >&2
    mkdir -p "$CACHE/npm"
    timeout "$INSTALL_TIMEOUT" npm install --prefix "$CACHE/npm" --no-audit --no-fund --ignore-scripts \
        "@modelcontextprotocol/inspector@$INSPECTOR" >&2 &&
        inspector_installed
}

# Upstream peers for the MCP client side (section 6): three npm servers in the Inspector's
# prefix and mcp-server-time in a venv of its own.
NPM_PEERS="server-everything server-filesystem server-memory"
MCP_MODULES=$CACHE/npm/node_modules/@modelcontextprotocol
EV_JS=$MCP_MODULES/server-everything/dist/index.js
FS_JS=$MCP_MODULES/server-filesystem/dist/index.js
MEM_JS=$MCP_MODULES/server-memory/dist/index.js
TIME_BIN=$CACHE/time/bin/mcp-server-time
npm_peer_installed() { # short name
    [ -f "$MCP_MODULES/$1/package.json" ] &&
        grep -q "\"version\": *\"$NPM_PEERS_V\"" "$MCP_MODULES/$1/package.json"
}
install_npm_peers() {
    missing=
    for p in $NPM_PEERS; do
        npm_peer_installed "$p" || missing="$missing @modelcontextprotocol/$p@$NPM_PEERS_V"
    done
    if [ -n "$missing" ]; then
        echo "interop: installing$missing into $CACHE/npm" >&2
        mkdir -p "$CACHE/npm"
        # shellcheck disable=SC2086 # one word per package
        timeout "$INSTALL_TIMEOUT" npm install --prefix "$CACHE/npm" --no-audit --no-fund --ignore-scripts \
            $missing >&2 || return 1
    fi
    for p in $NPM_PEERS; do
        npm_peer_installed "$p" || return 1
    done
    [ -f "$EV_JS" ] && [ -f "$FS_JS" ] && [ -f "$MEM_JS" ]
}
time_installed() {
    [ -x "$TIME_BIN" ] &&
        "$CACHE/time/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("mcp-server-time") != sys.argv[1])' "$TIME_V" 2>/dev/null
}
install_time() {
    time_installed && return 0
    echo "interop: installing mcp-server-time==$TIME_V into $CACHE/time" >&2
    rm -rf "$CACHE/time"
    python3 -m venv "$CACHE/time" &&
        timeout "$INSTALL_TIMEOUT" "$CACHE/time/bin/pip" install --quiet --disable-pip-version-check "mcp-server-time==$TIME_V" >&2 &&
        time_installed
}

# node: the npm peers need 20 or newer; the Inspector declares 22.19 or newer (npm warns
# EBADENGINE below that), yet its CLI runs on node 20.20, so there its checks run with a note.
node_at_least() { # major minor: whether `node --version` is at least major.minor
    nv=$(node --version 2>/dev/null) || return 1
    nv=${nv#v}
    nmajor=${nv%%.*}
    nminor=${nv#*.}
    nminor=${nminor%%.*}
    [ "$nmajor" -gt "$1" ] 2>/dev/null || { [ "$nmajor" -eq "$1" ] && [ "$nminor" -ge "$2" ]; } 2>/dev/null
}
HAVE_NODE=1
INSPECTOR_NOTE=
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    fail "node and npm are required for the MCP Inspector CLI and the npm peers (node 22.19 or newer; 20 at least); their checks are not run"
    HAVE_NODE=0
elif ! node_at_least 20 0; then
    fail "node $(node --version) is too old: the npm peers need node 20 or newer and the MCP Inspector CLI $INSPECTOR node 22.19 or newer; their checks are not run"
    HAVE_NODE=0
elif ! node_at_least 22 19; then
    echo "interop: note: node $(node --version) is older than the 22.19 that @modelcontextprotocol/inspector@$INSPECTOR declares, so npm warns EBADENGINE when installing it; its CLI works on node 20.20 and its checks run, but if they fail, try node 22.19 or newer first" >&2
    INSPECTOR_NOTE=" (note: node $(node --version) is older than the Inspector's declared 22.19)"
fi

mkdir -p "$CACHE"
HAVE_V1=1 HAVE_V2=1 HAVE_INSPECTOR=$HAVE_NODE HAVE_UPSTREAM=$HAVE_NODE
install_venv v1 "$MCP_V1" || { fail "install mcp==$MCP_V1"; HAVE_V1=0; }
install_venv v2 "$MCP_V2" || { fail "install mcp==$MCP_V2"; HAVE_V2=0; }
if [ "$HAVE_NODE" = 1 ]; then
    install_inspector || { fail "install @modelcontextprotocol/inspector@$INSPECTOR$INSPECTOR_NOTE"; HAVE_INSPECTOR=0; }
    install_npm_peers || { fail "install @modelcontextprotocol/{$(echo $NPM_PEERS | tr ' ' ,)}@$NPM_PEERS_V"; HAVE_UPSTREAM=0; }
fi
install_time || { fail "install mcp-server-time==$TIME_V"; HAVE_UPSTREAM=0; }

# CIDELDILL_INSTALL_ONLY=1: install the peers (and the conformance suite's) and stop, so that
# scripts/test.sh can fetch them while the Rust tests run.
if [ "${CIDELDILL_INSTALL_ONLY:-0}" = 1 ]; then
    sh "$ROOT/scripts/conformance.sh" || true
    echo "interop: installs done ($FAILED failed)"
    exit 0
fi

# ---------------------------------------------------------------------------------------
# 2. The binary

if [ ! -x "$BIN" ]; then
    echo "interop: building $BIN" >&2
    (cd "$ROOT" && cargo build --quiet) || true
fi
if [ ! -x "$BIN" ]; then
    fail "build: no binary at $BIN"
    echo "interop: $PASSED passed, $FAILED failed"
    exit 1
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

# ---------------------------------------------------------------------------------------
# 3. Python peers: their PASS/FAIL lines are counted here.

run_peer() { # name command... (RUN_TIMEOUT, when set, replaces PEER_TIMEOUT)
    name=$1
    shift
    log=$TMP/$(echo "$name" | tr -c 'A-Za-z0-9.\n' '_').log
    rc=0
    limit=${RUN_TIMEOUT:-$PEER_TIMEOUT}
    TMPDIR=$TMP INTEROP_RUST_LOG=${INTEROP_RUST_LOG:-warn} \
        timeout "$limit" "$@" >"$log" 2>"$log.err" </dev/null || rc=$?
    grep -E '^(PASS|FAIL|XFAIL|SKIP|INFO) |^conformance: ' "$log" || true
    p=$(grep -c '^PASS ' "$log" || true)
    f=$(grep -c '^FAIL ' "$log" || true)
    PASSED=$((PASSED + p))
    FAILED=$((FAILED + f))
    if [ "$rc" -eq 124 ]; then
        fail "$name: timed out after ${limit} s"
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        fail "$name: exited with status $rc and no FAIL line"
    fi
    if [ "$rc" -ne 0 ]; then
        echo "---- $name stderr (last 25 lines) ----"
        tail -n 25 "$log.err"
        echo "----"
    fi
    sweep
}

if [ "$HAVE_V1" = 1 ]; then
    run_peer "interop_client mcp $MCP_V1" "$CACHE/v1/bin/python" "$ROOT/scripts/interop_client.py" --binary "$BIN"
fi
if [ "$HAVE_V2" = 1 ]; then
    run_peer "interop_client mcp $MCP_V2" "$CACHE/v2/bin/python" "$ROOT/scripts/interop_client.py" --binary "$BIN"
fi
if [ "$HAVE_V1" = 1 ]; then
    run_peer "interop_http mcp $MCP_V1" "$CACHE/v1/bin/python" "$ROOT/scripts/interop_http.py" --binary "$BIN"
fi
if [ "$HAVE_V2" = 1 ]; then
    run_peer "interop_http mcp $MCP_V2" "$CACHE/v2/bin/python" "$ROOT/scripts/interop_http.py" --binary "$BIN"
fi

# ---------------------------------------------------------------------------------------
# 4. Inspector CLI: over stdio each run starts a fresh server from the config file; over
#    HTTP (ISERVER_URL set) each run connects to the `--mcp-sse` server of its transport.

if [ "$HAVE_INSPECTOR" = 1 ]; then
    IHOME=$TMP/inspector
    mkdir -p "$IHOME/home"
    CONFIG=$IHOME/mcp.json
    python3 - "$CONFIG" "$BIN" "$IHOME/home" <<'EOF'
import json, sys
path, binary, home = sys.argv[1:4]
cfg = {"mcpServers": {"cideldill": {"command": binary, "args": ["--mcp", "--memory", "--port", "0"],
                                    "env": {"CIDELDILL_HOME": home, "CIDELDILL_PORT_FILE": home + "/port"}}}}
json.dump(cfg, open(path, "w"))
EOF
    n=0
    ISERVER_URL=
    # inspector <check name> <expected exit status> <python expression over r = output JSON> -- <cli args>
    inspector() {
        label=$1 want_rc=$2 expr=$3
        shift 4
        n=$((n + 1))
        out=$IHOME/out$n.json
        if [ -n "$ISERVER_URL" ]; then
            set -- --transport "$ITRANSPORT" --server-url "$ISERVER_URL" "$@"
            tag="inspector $INSPECTOR $ITRANSPORT"
        else
            set -- --config "$CONFIG" --server cideldill "$@"
            tag="inspector $INSPECTOR"
        fi
        rc=0
        HOME=$IHOME MCP_CLIENT_CONFIG_PATH=$IHOME/client.json MCP_INSPECTOR_SECRET_STORE=memory \
            timeout "$PEER_TIMEOUT" node "$INSPECTOR_BIN" --cli --format json "$@" \
            >"$out" 2>"$out.err" </dev/null || rc=$?
        why=""
        if [ "$rc" -eq 124 ]; then
            why="timed out after ${PEER_TIMEOUT} s"
        elif [ "$rc" -ne "$want_rc" ]; then
            why="exit status $rc (expected $want_rc)"
        elif ! python3 - "$out" "$expr" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    ok = bool(eval(sys.argv[2], {"r": r, "json": json}))
except Exception as e:
    print(f"{type(e).__name__}: {e}", file=sys.stderr)
    ok = False
sys.exit(0 if ok else 1)
EOF
        then
            why="output does not satisfy: $expr"
        fi
        if [ -z "$why" ]; then
            pass "[$tag] $label"
        else
            fail "[$tag] $label: $why$INSPECTOR_NOTE; stdout: $(head -c 400 "$out"); stderr: $(grep -v '^\[mcp-inspector\]\|^\[INFO\|^cideldill-server\|^Server running\|^Database\|^Port file' "$out.err" | tail -n 5)"
        fi
        sweep
    }
    TOOLS='{"breakpoint_list_breakpoints","breakpoint_add","breakpoint_remove","breakpoint_set_behavior","breakpoint_set_after_behavior","breakpoint_set_replacement","breakpoint_get_default_behavior","breakpoint_set_default_behavior","breakpoint_list_paused","breakpoint_continue","breakpoint_list_functions","breakpoint_get_call_records","breakpoint_repl_eval","breakpoint_inspect_object","breakpoint_wait_for_pause","breakpoint_continue_all","breakpoint_compare_runs","breakpoint_set_enabled","breakpoint_set_pausing","external_list_servers","external_list_tools","external_call_tool","external_list_resources","external_read_resource","breakpoint_list_runs","breakpoint_label_run","breakpoint_replay_call","breakpoint_replay_run","breakpoint_delete_run"}'

    inspector "tools/list (--strict)" 0 "{t['name'] for t in r['result']['tools']} == $TOOLS" \
        -- --method tools/list --strict
    warnings=$(grep -c '^Warning: tool' "$IHOME/out$n.json.err" || true)
    if [ "$warnings" -gt 0 ]; then
        echo "INFO [inspector $INSPECTOR] --strict schema portability warnings: $(grep -A1 '^Warning: tool' "$IHOME/out$n.json.err" | grep -v '^--' | paste -sd' ' -)"
    fi
    inspector "tools/call breakpoint_add" 0 \
        "r['result']['structuredContent'] == {'status': 'ok', 'function_name': 'add', 'condition': None, 'hit_condition': None, 'log_message': None, 'one_shot': False, 'hit_count': 0} and r['result']['isError'] is False and json.loads(r['result']['content'][0]['text']) == r['result']['structuredContent']" \
        -- --method tools/call --tool-name breakpoint_add --tool-arg function_name=add
    inspector "tools/call breakpoint_list_breakpoints" 0 \
        "r['result']['structuredContent']['breakpoints'] == [] and r['result']['isError'] is False" \
        -- --method tools/call --tool-name breakpoint_list_breakpoints
    # As the original answers it: a result (not isError) naming the error.
    inspector "tools/call not-found result (breakpoint_continue unknown pause)" 0 \
        "r['result']['isError'] is False and json.loads(r['result']['content'][0]['text'])['error'] == 'pause_not_found' and r['result']['structuredContent']['pause_id'] == 'no-such-pause'" \
        -- --method tools/call --tool-name breakpoint_continue --tool-arg pause_id=no-such-pause
    inspector "tools/call isError (breakpoint_set_behavior unknown breakpoint)" 5 \
        "r['result']['isError'] is True and {'error', 'message', 'hint'} <= set(json.loads(r['result']['content'][0]['text']))" \
        -- --method tools/call --tool-name breakpoint_set_behavior --tool-arg function_name=nope --tool-arg behavior=stop
    inspector "resources/list" 0 \
        "{x['uri'] for x in r['result']['resources']} >= {'breakpoint://status', 'breakpoint://breakpoints', 'breakpoint://paused', 'breakpoint://call-history', 'breakpoint://functions'}" \
        -- --method resources/list
    inspector "resources/read breakpoint://status" 0 \
        "r['result']['contents'][0]['uri'] == 'breakpoint://status' and json.loads(r['result']['contents'][0]['text']) == {'breakpoints': 0, 'paused': 0, 'total_calls': 0, 'pausing': True}" \
        -- --method resources/read --uri breakpoint://status
    inspector "resources/templates/list" 0 \
        "{x['uriTemplate'] for x in r['result']['resourceTemplates']} == {'breakpoint://paused/{pause_id}', 'breakpoint://call/{call_id}', 'breakpoint://object/{cid}'}" \
        -- --method resources/templates/list
    inspector "prompts/list" 0 \
        "{p['name'] for p in r['result']['prompts']} == {'debug-session-start', 'inspect-paused-call'}" \
        -- --method prompts/list
    inspector "prompts/get debug-session-start" 0 \
        "r['result']['messages'][0]['role'] == 'user' and 'breakpoint_wait_for_pause' in r['result']['messages'][0]['content']['text']" \
        -- --method prompts/get --prompt-name debug-session-start
    inspector "logging/setLevel" 0 "r['result'] == {}" \
        -- --method logging/setLevel --log-level info

    # Over HTTP: a `--mcp-sse` server per transport, kept out of the sweeps while in use.
    for ITRANSPORT in sse http; do
        case $ITRANSPORT in
        sse) mcp_path=/mcp/sse ;;
        *) mcp_path=/mcp ;;
        esac
        sdir=$IHOME/server-$ITRANSPORT
        if ! start_http_server "$sdir"; then
            fail "[inspector $INSPECTOR $ITRANSPORT] server start (--mcp-sse --memory --port 0): $(tail -n 3 "$sdir/server.log" | paste -sd' ' -)"
            continue
        fi
        SWEEP_KEEP=$HTTP_PID
        ISERVER_URL=http://127.0.0.1:$HTTP_PORT$mcp_path
        inspector "tools/list" 0 "{t['name'] for t in r['result']['tools']} == $TOOLS" \
            -- --method tools/list
        inspector "tools/call breakpoint_add" 0 \
            "r['result']['structuredContent'] == {'status': 'ok', 'function_name': 'add', 'condition': None, 'hit_condition': None, 'log_message': None, 'one_shot': False, 'hit_count': 0} and r['result']['isError'] is False" \
            -- --method tools/call --tool-name breakpoint_add --tool-arg function_name=add
        inspector "resources/read breakpoint://status" 0 \
            "r['result']['contents'][0]['uri'] == 'breakpoint://status' and json.loads(r['result']['contents'][0]['text']) == {'breakpoints': 1, 'paused': 0, 'total_calls': 0, 'pausing': True}" \
            -- --method resources/read --uri breakpoint://status
        if [ "$ITRANSPORT" = http ]; then
            # Every tool through the Inspector, on one server whose state carries over: a call
            # paused over REST, and a simulated program answering the REPL eval.
            PAUSE_AND_CID=$(python3 "$ROOT/scripts/interop_app.py" start "$HTTP_PORT")
            PAUSE=${PAUSE_AND_CID% *}
            CID=${PAUSE_AND_CID#* }
            ok="r['result']['isError'] is False"
            inspector "tools/call breakpoint_list_paused" 0 "$ok and r['result']['structuredContent']['paused'][0]['id'] == '$PAUSE'" \
                -- --method tools/call --tool-name breakpoint_list_paused
            inspector "tools/call breakpoint_wait_for_pause" 0 "$ok and r['result']['structuredContent']['pause']['id'] == '$PAUSE'" \
                -- --method tools/call --tool-name breakpoint_wait_for_pause --tool-arg function_name=add
            inspector "tools/call breakpoint_inspect_object" 0 "$ok and r['result']['structuredContent']['repr'] == '2'" \
                -- --method tools/call --tool-name breakpoint_inspect_object --tool-arg cid="$CID"
            python3 "$ROOT/scripts/interop_app.py" answer "$HTTP_PORT" "$PAUSE" &
            ANSWER_PID=$!
            inspector "tools/call breakpoint_repl_eval" 0 "$ok and r['result']['structuredContent']['output'] == '3'" \
                -- --method tools/call --tool-name breakpoint_repl_eval --tool-arg pause_id="$PAUSE" --tool-arg "expression=args[0] + 1"
            wait "$ANSWER_PID" || true
            inspector "tools/call breakpoint_set_behavior" 0 "$ok and r['result']['structuredContent']['behavior'] == 'stop'" \
                -- --method tools/call --tool-name breakpoint_set_behavior --tool-arg function_name=add --tool-arg behavior=stop
            inspector "tools/call breakpoint_set_after_behavior" 0 "$ok and r['result']['structuredContent']['behavior'] == 'go'" \
                -- --method tools/call --tool-name breakpoint_set_after_behavior --tool-arg function_name=add --tool-arg behavior=go
            inspector "tools/call breakpoint_set_replacement" 0 "$ok and r['result']['structuredContent']['replacement_function'] == 'add_fast'" \
                -- --method tools/call --tool-name breakpoint_set_replacement --tool-arg function_name=add --tool-arg replacement_function=add_fast
            inspector "tools/call breakpoint_set_default_behavior" 0 "$ok and r['result']['structuredContent']['behavior'] == 'exception'" \
                -- --method tools/call --tool-name breakpoint_set_default_behavior --tool-arg behavior=exception
            inspector "tools/call breakpoint_get_default_behavior" 0 "$ok and r['result']['structuredContent']['behavior'] == 'exception'" \
                -- --method tools/call --tool-name breakpoint_get_default_behavior
            inspector "tools/call breakpoint_list_functions" 0 "$ok and 'add' in r['result']['structuredContent']['functions']" \
                -- --method tools/call --tool-name breakpoint_list_functions
            inspector "tools/call breakpoint_continue" 0 "$ok and r['result']['structuredContent']['action'] == 'continue'" \
                -- --method tools/call --tool-name breakpoint_continue --tool-arg pause_id="$PAUSE"
            inspector "tools/call breakpoint_get_call_records" 0 "$ok and r['result']['structuredContent']['total_count'] >= 0" \
                -- --method tools/call --tool-name breakpoint_get_call_records
            inspector "tools/call breakpoint_remove" 0 "$ok and r['result']['structuredContent']['function_name'] == 'add'" \
                -- --method tools/call --tool-name breakpoint_remove --tool-arg function_name=add
            # --protocol-era auto: a server/discover probe first, then the initialize fallback.
            inspector "tools/list (--protocol-era auto)" 0 "{t['name'] for t in r['result']['tools']} == $TOOLS" \
                -- --method tools/list --protocol-era auto
        fi
        ISERVER_URL=
        SWEEP_KEEP=
        stop_http_server
        if grep -q 'panicked' "$sdir/server.log"; then
            fail "[inspector $INSPECTOR $ITRANSPORT] server log shows a panic: $(grep -m1 'panicked' "$sdir/server.log")"
        fi
    done
fi

# ---------------------------------------------------------------------------------------
# 5. An agent session with mcp 2.x.

if [ "$HAVE_V2" = 1 ]; then
    run_peer "agent_demo mcp $MCP_V2" "$CACHE/v2/bin/python" "$ROOT/scripts/agent_demo.py" --binary "$BIN"
fi

# ---------------------------------------------------------------------------------------
# 6. The server as an MCP client of the reference servers, driven by an mcp 2.x agent.

if [ "$HAVE_UPSTREAM" = 1 ] && [ "$HAVE_V2" = 1 ]; then
    run_peer "interop_upstream mcp $MCP_V2" "$CACHE/v2/bin/python" "$ROOT/scripts/interop_upstream.py" \
        --binary "$BIN" --everything "$EV_JS" --filesystem "$FS_JS" --memory "$MEM_JS" --time-bin "$TIME_BIN"
else
    fail "interop_upstream: not run, its peers (or mcp==$MCP_V2) failed to install"
fi

# ---------------------------------------------------------------------------------------
# 7. The official conformance suite, server and client side (it installs its own node 22).

RUN_TIMEOUT=300
run_peer "conformance" sh "$ROOT/scripts/conformance.sh"
RUN_TIMEOUT=

echo "interop: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
