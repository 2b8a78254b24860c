//go:build chaos

package chaos

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestChaos is the full run: per lost-lease policy, CHAOS_ROUNDS (default
// 1) times the base plan, which with both policies makes 32 leader
// partitions, 50 SIGTERMs (plus 10 behind an ignoring controller), 10
// SIGKILLs and 6 API server restarts; then a sharded plan, and a smaller
// plan with leader migration and one with per-controller ServiceAccount
// credentials; it stops at CHAOS_DEADLINE (default 40m) and reports what
// it ran.
func TestChaos(t *testing.T) {
	rounds := 1
	if s := os.Getenv("CHAOS_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("CHAOS_ROUNDS=%q: want a positive integer", s)
		}
		rounds = v
	}
	budget := 40 * time.Minute
	if s := os.Getenv("CHAOS_DEADLINE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_DEADLINE=%q: want a positive duration such as 40m", s)
		}
		budget = d
	}
	runPolicies(t, plan{
		partitionHang: 6 * rounds, partitionCut: 6 * rounds, partitionLate: 4 * rounds, sigterm: 25 * rounds, sigkill: 5 * rounds,
		apiRestart: 3 * rounds, ctrlPanic: 3 * rounds, ignoreContext: 5 * rounds,
	}, budget)
	runSharded(t, plan{partitionHang: 4 * rounds, partitionCut: 4 * rounds, sigterm: 8 * rounds, sigkill: 4 * rounds, apiRestart: 2 * rounds}, budget/4)
	small := plan{partitionHang: 3 * rounds, partitionCut: 3 * rounds, partitionLate: 2 * rounds, sigterm: 6 * rounds,
		sigkill: 2 * rounds, apiRestart: rounds, ignoreContext: 2 * rounds}
	runMigration(t, small, budget/4)
	runCredentials(t, small, budget/4)
}
