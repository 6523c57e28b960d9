#!/bin/sh
# ui_test.sh: the web UI's browser tests. Real headless Chromium, driven by playwright-core,
# against the real binary and scripts/demo_app.py (scripts/ui_test.mjs holds the checks).
#
# What it does
#   1. Installs what is missing:
#        Chromium         Debian's `chromium` package (apt-get install -y chromium; apt-get
#                         update first only when the install fails without it), used only
#                         when /usr/bin/chromium is missing
#        playwright-core  @1.64.1 from npm into <repo>/.cache/ui/ (no browser download:
#                         playwright-core drives the system Chromium)
#        axe-core         @4.14.1 from npm into the same place: the accessibility rules the
#                         "every page" checks run in each page
#   2. Builds target/debug/cideldill-server if it is missing (cargo build --quiet).
#   3. Runs `node scripts/ui_test.mjs` under `timeout 300`. Every check starts its own
#      server (--memory --port 0, CIDELDILL_HOME and CIDELDILL_PORT_FILE inside a
#      `mktemp -d` directory) and its own browser context; screenshots of each state go to
#      target/ui-screenshots/<name>.png. On exit every process started by the run (servers,
#      demos, the browser) is stopped and the directory removed.
#
# What it needs
#   node (20+) and npm, python3 (3.8+), cargo (only if the binary is missing), GNU coreutils
#   `timeout`, root or an installed /usr/bin/chromium; network access to npm (and Debian's
#   package mirror without Chromium) on the first run only.
#
# How to call it
#   scripts/ui_test.sh [check name substring ...]
#                                 # from anywhere; prints one line per check and ends with
#                                 # `ui: N passed, N failed`; exit 1 if anything failed.
#                                 # With arguments, only the checks whose names contain one.
#   Environment: CIDELDILL_SERVER_BIN (binary to test, default target/debug/cideldill-server),
#   CIDELDILL_UI_CACHE (npm cache, default <repo>/.cache/ui), CIDELDILL_CHROMIUM (browser,
#   default /usr/bin/chromium), UI_TIMEOUT (seconds the whole run may take, default 300).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CIDELDILL_UI_CACHE:-$ROOT/.cache/ui}
BIN=${CIDELDILL_SERVER_BIN:-$ROOT/target/debug/cideldill-server}
CHROMIUM=${CIDELDILL_CHROMIUM:-/usr/bin/chromium}
RUN_TIMEOUT=${UI_TIMEOUT:-300}
INSTALL_TIMEOUT=600
PLAYWRIGHT=1.64.1
AXE=4.14.1

TMP=$(mktemp -d "${TMPDIR:-/tmp}/cideldill-ui.XXXXXX")

. "$ROOT/scripts/lib.sh"

# Stops processes started by this run that outlived it: everything whose environment carries
# CIDELDILL_UI_TMP=$TMP (node, the servers, the demos and the browser inherit it).
sweep() { SWEEP_SIGNAL=KILL sweep_env xF "CIDELDILL_UI_TMP=$TMP"; }
cleanup() {
    sweep
    rm -rf "$TMP"
}
on_exit cleanup

# Prints the closing line for a run that could not start, and fails.
give_up() {
    echo "FAIL $*"
    echo "ui: 0 passed, 1 failed"
    exit 1
}

# ---------------------------------------------------------------------------------------
# 1. Chromium and playwright-core

if [ ! -x "$CHROMIUM" ]; then
    if [ "$CHROMIUM" != /usr/bin/chromium ]; then
        give_up "no browser at $CHROMIUM"
    fi
    echo "ui: installing Debian's chromium" >&2
    export DEBIAN_FRONTEND=noninteractive
    # As root directly; otherwise through sudo when there is one.
    SUDO=
    [ "$(id -u)" = 0 ] || ! command -v sudo >/dev/null || SUDO="sudo -E"
    timeout "$INSTALL_TIMEOUT" $SUDO apt-get install -y chromium >&2 ||
        { timeout "$INSTALL_TIMEOUT" $SUDO apt-get update >&2 &&
            timeout "$INSTALL_TIMEOUT" $SUDO apt-get install -y chromium >&2; } ||
        give_up "install chromium (apt-get install -y chromium)"
fi

# Whether the npm package $1 is installed in the cache at version $2.
installed() {
    grep -q "\"version\": *\"$2\"" "$CACHE/node_modules/$1/package.json" 2>/dev/null
}
if ! installed playwright-core "$PLAYWRIGHT" || ! installed axe-core "$AXE"; then
    echo "ui: installing playwright-core@$PLAYWRIGHT and axe-core@$AXE into $CACHE" >&2
    mkdir -p "$CACHE"
    timeout "$INSTALL_TIMEOUT" npm install --prefix "$CACHE" --no-audit --no-fund \
        "playwright-core@$PLAYWRIGHT" "axe-core@$AXE" >&2 || true
    installed playwright-core "$PLAYWRIGHT" || give_up "install playwright-core@$PLAYWRIGHT"
    installed axe-core "$AXE" || give_up "install axe-core@$AXE"
fi
# CIDELDILL_INSTALL_ONLY=1: Chromium and the npm packages installed, nothing run.
[ "${CIDELDILL_INSTALL_ONLY:-0}" = 1 ] && exit 0

# ---------------------------------------------------------------------------------------
# 2. The binary

if [ ! -x "$BIN" ]; then
    echo "ui: building $BIN" >&2
    (cd "$ROOT" && cargo build --quiet) || true
fi
[ -x "$BIN" ] || give_up "build: no binary at $BIN"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

# ---------------------------------------------------------------------------------------
# 3. The checks

# The output is kept to count what passed when the run is cut short by the timeout.
{
    status=0
    CIDELDILL_UI_TMP=$TMP CIDELDILL_SERVER_BIN=$BIN CIDELDILL_UI_CACHE=$CACHE CIDELDILL_CHROMIUM=$CHROMIUM \
        timeout "$RUN_TIMEOUT" node "$ROOT/scripts/ui_test.mjs" "$@" </dev/null 2>&1 || status=$?
    echo "$status" >"$TMP/rc"
} | tee "$TMP/out"
rc=$(cat "$TMP/rc")
if [ "$rc" -eq 124 ]; then
    echo "FAIL the UI checks did not finish within $RUN_TIMEOUT s"
    echo "ui: $(grep -c '^PASS ' "$TMP/out" || true) passed, $(($(grep -c '^FAIL ' "$TMP/out" || true) + 1)) failed"
    exit 1
fi
[ "$rc" -eq 0 ] || exit 1
