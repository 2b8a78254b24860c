//go:build integration

package chaos

import (
	"testing"
	"time"
)

// TestChaosShort is a few rounds of each scenario under each lost-lease
// policy, for make test.
func TestChaosShort(t *testing.T) {
	runPolicies(t, plan{
		partitionHang: 1, partitionCut: 1, partitionLate: 1, sigterm: 2, sigkill: 1,
		apiRestart: 1, ctrlPanic: 1, ignoreContext: 1,
	}, 150*time.Second)
	runSharded(t, plan{partitionHang: 1, sigterm: 1, sigkill: 1}, time.Minute)
	runMigration(t, plan{partitionHang: 1, sigterm: 1}, time.Minute)
	runCredentials(t, plan{partitionCut: 1, sigterm: 1}, time.Minute)
}
