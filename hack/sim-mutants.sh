#!/usr/bin/env bash
# Shows that the simulation finds real bugs: each patch in
# test/sim/testdata/mutants reverts the fix of one defect the simulation
# was built to catch; this applies each to a temporary worktree of HEAD,
# runs SEEDS seeds (300, the standard count of make test) and expects the
# simulation to fail. It prints how many seeds failed and the first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seeds="${SEEDS:-300}"
status=0
for patch in test/sim/testdata/mutants/*.patch; do
	name="$(basename "$patch" .patch)"
	dir="$(mktemp -d)"
	git worktree add -q --detach "$dir" HEAD
	if ! git -C "$dir" apply "$PWD/$patch"; then
		echo "$name: the patch no longer applies; update it to revert the fix again"
		status=1
	else
		out="$(cd "$dir" && go test -count=1 -timeout 60m ./test/sim/ -run '^TestSimulation$' -sim.seeds="$seeds" 2>&1 || true)"
		failed="$(grep -c '^    --- FAIL' <<<"$out" || true)"
		first="$(grep -m1 '^    --- FAIL' <<<"$out" | sed 's/.*TestSimulation\/\([0-9]*\).*/\1/' || true)"
		if [ "$failed" -gt 0 ]; then
			echo "$name: caught: $failed of $seeds seeds failed, the first is seed $first"
		else
			echo "$name: NOT caught in $seeds seeds"
			status=1
		fi
	fi
	git worktree remove --force "$dir"
done
exit "$status"
