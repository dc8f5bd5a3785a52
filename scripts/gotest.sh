#!/usr/bin/env bash
# gotest.sh runs `go test ARGS...` with its output passed through and, when
# the run fails, repeats at the end what failed: each failed test with the
# lines it logged, any panic, and the tests that were still running when
# the -timeout struck. A long run's log is often seen only by its tail
# (a CI summary), and a timeout's goroutine dump would bury the names.
set -uo pipefail
log=$(mktemp "${TMPDIR:-/tmp}/gotest.XXXXXX")
trap 'rm -f "$log"' EXIT
"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if ((rc != 0)); then
  echo
  echo "== go test failed (exit $rc); what failed:"
  awk '
    /^panic: / { print; next }
    /^\trunning tests:/ { running = 1; print; next }
    running && /^\t\t/ { print; next }
    { running = 0 }
    /^[ ]*--- FAIL/ { print; failing = 1; shown = 0; next }
    failing && /^    / && shown < 40 { print; shown++; next }
    { failing = 0 }
    /^(FAIL|ok)[ \t]/ { print }
  ' "$log"
fi
exit "$rc"
