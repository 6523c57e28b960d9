# scripts/lib.sh: what the test scripts (interop.sh, conformance.sh, ui_test.sh) share. Sourced
# by them (POSIX sh), never run on its own.
#
#   sweep_env FLAGS PATTERN   kills every process but this shell and $SWEEP_KEEP whose
#                             environment has a line that `grep -q$FLAGS PATTERN` matches
#                             (SWEEP_SIGNAL, default TERM, is the signal sent)
#   on_exit COMMAND           runs COMMAND when the script exits, also on INT and TERM
#   pass / fail TEXT          print PASS or FAIL TEXT and count it in PASSED / FAILED

sweep_env() {
    [ -d /proc ] || return 0
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        [ "$pid" = "$$" ] && continue
        [ "$pid" = "${SWEEP_KEEP:-}" ] && continue
        if { tr '\0' '\n' <"$d/environ"; } 2>/dev/null | grep -q"$1" -- "$2"; then
            kill -"${SWEEP_SIGNAL:-TERM}" "$pid" 2>/dev/null || true
        fi
    done
}

on_exit() {
    trap "$1" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }
