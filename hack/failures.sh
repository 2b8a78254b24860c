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
	# Each failing test's block (its "--- FAIL" line and the indented lines
	# that follow, 80 at most), then the package verdicts and any panic.
	awk '
		/^[[:space:]]*--- FAIL/ { n = 80; print; next }
		n > 0 && /^[[:space:]]/ { n--; print; next }
		{ n = 0 }
		/^FAIL|^panic:|^fatal error:/ { print }
	' "$log" | tail -n 400
fi
exit "$status"
