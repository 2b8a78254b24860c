//go:build integration

package integration

import (
	"fmt"
	"os"
	"testing"

	"github.com/ctrlhost/ctrlhost/testenv"
)

// serverVersion is the version of the kube-apiserver testenv starts: the
// default, or the one make matrix names ($CTRLHOST_KUBERNETES_VERSION).
func serverVersion() string {
	if v := os.Getenv(testenv.EnvKubernetesVersion); v != "" {
		return v
	}
	return testenv.KubernetesVersion
}

// serverMinor is serverVersion's minor.
func serverMinor(t *testing.T) int {
	t.Helper()
	v := serverVersion()
	var major, minor int
	if _, err := fmt.Sscanf(v, "v%d.%d.", &major, &minor); err != nil || major != 1 {
		t.Fatalf("kube-apiserver version %q: %v", v, err)
	}
	return minor
}

// shardedListSetting is one ShardedListAndWatch setting of the server:
// its name, the gates testenv passes, and whether the server applies the
// shard selector.
type shardedListSetting struct {
	Name    string
	Gates   map[string]bool
	Applies bool
}

// shardedListSettings are the ShardedListAndWatch settings a sharding test
// runs with, by whether the server applies the shard selector: on and off
// where kube-apiserver has the gate (alpha since 1.36); on an older server,
// none, and the server ignores the selector as with the gate off. That is
// the degradation docs/sharding.md states, shown on the window's oldest.
func shardedListSettings(t *testing.T) []shardedListSetting {
	type setting = shardedListSetting
	if serverMinor(t) < 36 {
		return []setting{{Name: "no ShardedListAndWatch (before 1.36)"}}
	}
	return []setting{
		{Name: "ShardedListAndWatch=true", Gates: map[string]bool{"ShardedListAndWatch": true},
			Applies: true},
		{Name: "ShardedListAndWatch=false", Gates: map[string]bool{"ShardedListAndWatch": false}},
	}
}
