#!/usr/bin/env bash
# Runs a command (a `go test`), streaming its output, and when it fails
# repeats the lines that say what failed at the end: `go test` prints a
# failing test's lines where the test ran, and with the integration suites'
# logs they can be thousands of lines above the final FAIL, out of reach of
# a CI page that keeps only the tail.
#
#   hack/failures.sh go test ./...
set -uo pipefail
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
status="${PIPESTATUS[0]}"
if ((status != 0)); then
	echo
	echo "=== what failed in: $* (exit $status) ==="
	grep -E -e '--- FAIL|^FAIL|^panic:|^fatal error:|^\s+[A-Za-z0-9_]+\.go:[0-9]+: ' "$log" | tail -n 150
fi
exit "$status"
