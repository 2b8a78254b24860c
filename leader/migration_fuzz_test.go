package leader_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/leader"
)

// FuzzMigrationConfig reads fuzzed bytes as a leader migration
// configuration file, then validates it. Invariants: no panic; a read error
// names the file and the flag; a validation error names the configuration;
// a configuration that validates assigns its own entries without panicking.
func FuzzMigrationConfig(f *testing.F) {
	for _, s := range []string{
		"",
		"apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: cloud-provider-extraction-migration\nresourceLock: leases\ncontrollerLeaders:\n- name: route-controller\n  component: '*'\n",
		`{"apiVersion":"controllermanager.config.k8s.io/v1alpha1","kind":"LeaderMigrationConfiguration","leaderName":"x","resourceLock":"endpoints"}`,
		"apiVersion: v1\nkind: Pod\n",
		"apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: X\nresourceLock: leases\ncontrollerLeaders:\n- name: a\n- name: a\n  component: kcm\n",
		"[1,2,3]",
		"null",
		"apiVersion: controllermanager.config.k8s.io/v1beta1\nkind: LeaderMigrationConfiguration\nLeaderName: x\nextra: 1\n",
		"\t: :",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "migration.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := leader.ReadMigrationConfig(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) ||
				!strings.Contains(err.Error(), "--leader-migration-config") {
				t.Fatalf("read error names neither the file nor the flag: %v", err)
			}
			if c != nil {
				t.Fatalf("ReadMigrationConfig returned a configuration with error %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			if !strings.Contains(err.Error(), "leader migration configuration") {
				t.Fatalf("Validate error does not say what it validates: %v", err)
			}
			return
		}
		for _, l := range c.ControllerLeaders {
			_ = c.Assign("kube-controller-manager", l.Name)
		}
		_ = c.ElectorConfig(leader.Config{})
	})
}
