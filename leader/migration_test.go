package leader

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseMigrationConfig(t *testing.T) {
	twoLeaders := []ControllerLeader{
		{Name: "route-controller", Component: "*"},
		{Name: "service-controller", Component: "cloud-controller-manager"},
	}
	const yamlBody = `
leaderName: cloud-provider-extraction-migration
controllerLeaders:
  - name: route-controller
    component: "*"
  - name: service-controller
    component: cloud-controller-manager
`
	for _, tc := range []struct {
		name    string
		data    string
		want    *MigrationConfig
		wantErr []string
	}{
		{
			name: "v1alpha1 yaml",
			data: "apiVersion: controllermanager.config.k8s.io/v1alpha1\nkind: LeaderMigrationConfiguration\nresourceLock: leases\n" + yamlBody,
			want: &MigrationConfig{LeaderName: "cloud-provider-extraction-migration", ResourceLock: "leases", ControllerLeaders: twoLeaders},
		},
		{
			name: "v1beta1 yaml, resourceLock kept as written",
			data: "apiVersion: controllermanager.config.k8s.io/v1beta1\nkind: LeaderMigrationConfiguration\nresourceLock: endpoints\n" + yamlBody,
			want: &MigrationConfig{LeaderName: "cloud-provider-extraction-migration", ResourceLock: "endpoints", ControllerLeaders: twoLeaders},
		},
		{
			name: "v1beta1 without resourceLock is not defaulted",
			data: "apiVersion: controllermanager.config.k8s.io/v1beta1\nkind: LeaderMigrationConfiguration\n" + yamlBody,
			want: &MigrationConfig{LeaderName: "cloud-provider-extraction-migration", ControllerLeaders: twoLeaders},
		},
		{
			name: "v1 yaml means leases",
			data: "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\n" + yamlBody,
			want: &MigrationConfig{LeaderName: "cloud-provider-extraction-migration", ResourceLock: "leases", ControllerLeaders: twoLeaders},
		},
		{
			name: "v1 json",
			data: `{"apiVersion": "controllermanager.config.k8s.io/v1", "kind": "LeaderMigrationConfiguration",
			        "leaderName": "m", "controllerLeaders": [{"name": "route-controller", "component": "*"}]}`,
			want: &MigrationConfig{LeaderName: "m", ResourceLock: "leases", ControllerLeaders: []ControllerLeader{{Name: "route-controller", Component: "*"}}},
		},
		{
			name: "v1beta1 json",
			data: `{"apiVersion": "controllermanager.config.k8s.io/v1beta1", "kind": "LeaderMigrationConfiguration",
			        "leaderName": "m", "resourceLock": "leases", "controllerLeaders": []}`,
			want: &MigrationConfig{LeaderName: "m", ResourceLock: "leases"},
		},
		{
			name:    "unknown apiVersion",
			data:    "apiVersion: controllermanager.config.k8s.io/v2\nkind: LeaderMigrationConfiguration\nleaderName: m\n",
			wantErr: []string{`apiVersion "controllermanager.config.k8s.io/v2"`, "controllermanager.config.k8s.io/v1alpha1", "controllermanager.config.k8s.io/v1beta1", "controllermanager.config.k8s.io/v1"},
		},
		{
			name:    "unknown kind",
			data:    "apiVersion: controllermanager.config.k8s.io/v1\nkind: KubeControllerManagerConfiguration\n",
			wantErr: []string{`kind "KubeControllerManagerConfiguration"`, "use LeaderMigrationConfiguration"},
		},
		{
			name:    "missing apiVersion and kind",
			data:    "leaderName: m\n",
			wantErr: []string{"apiVersion is missing", "kind is missing"},
		},
		{
			name: "unknown fields, all of them",
			data: "apiVersion: controllermanager.config.k8s.io/v1beta1\nkind: LeaderMigrationConfiguration\nleaderName: m\nleaderNames: x\n" +
				"controllerLeaders:\n- name: a\n  component: b\n  compnent: c\n",
			wantErr: []string{"controllerLeaders[0].compnent", "leaderNames", "accepted fields: apiVersion, kind, leaderName, resourceLock, controllerLeaders"},
		},
		{
			name:    "resourceLock is not a v1 field",
			data:    "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: m\nresourceLock: leases\n",
			wantErr: []string{"unknown field(s) resourceLock", "v1 has no resourceLock"},
		},
		{
			name:    "field names are case sensitive",
			data:    "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nLeaderName: m\n",
			wantErr: []string{"unknown field(s) LeaderName"},
		},
		{
			name:    "duplicate field",
			data:    "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: m\nleaderName: n\n",
			wantErr: []string{"leaderName"},
		},
		{
			name:    "wrong type",
			data:    "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\ncontrollerLeaders: route\n",
			wantErr: []string{"decoding controllermanager.config.k8s.io/v1"},
		},
		{name: "empty", data: " \n", wantErr: []string{"empty"}},
		{name: "not an object", data: "- a\n- b\n", wantErr: []string{"must be an object"}},
		{name: "not yaml", data: "a: [b\n", wantErr: []string{"neither YAML nor JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMigrationConfig([]byte(tc.data))
			checkErr(t, err, tc.wantErr)
			if tc.wantErr == nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseMigrationConfig = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadMigrationConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\nleaderName: m\ncontrollerLeaders: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ReadMigrationConfig(good)
	if err != nil || c.LeaderName != "m" || c.ResourceLock != "leases" {
		t.Errorf("ReadMigrationConfig(good) = %+v, %v", c, err)
	}
	_, err = ReadMigrationConfig(bad)
	checkErr(t, err, []string{bad, "--leader-migration-config", `apiVersion "v1"`})
	missing := filepath.Join(dir, "missing.yaml")
	_, err = ReadMigrationConfig(missing)
	checkErr(t, err, []string{missing, "--leader-migration-config", "no such file"})
}

func TestDefaultMigrationConfig(t *testing.T) {
	want := &MigrationConfig{
		LeaderName:   "cloud-provider-extraction-migration",
		ResourceLock: "leases",
		ControllerLeaders: []ControllerLeader{
			{Name: "node-route-controller", Component: "*"},
			{Name: "service-lb-controller", Component: "*"},
			{Name: "cloud-node-lifecycle-controller", Component: "*"},
		},
	}
	for _, component := range []string{"kube-controller-manager", "cloud-controller-manager"} {
		got := DefaultMigrationConfig(component)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DefaultMigrationConfig(%q) = %+v, want %+v", component, got, want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("default does not validate: %v", err)
		}
	}
	// Each call returns its own copy.
	a := DefaultMigrationConfig("x")
	a.ControllerLeaders[0].Name = "changed"
	if DefaultMigrationConfig("x").ControllerLeaders[0].Name != "node-route-controller" {
		t.Error("DefaultMigrationConfig returns shared state")
	}
}

func TestMigrationValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *MigrationConfig
		want []string
	}{
		{name: "valid", cfg: &MigrationConfig{LeaderName: "m", ResourceLock: "leases", ControllerLeaders: []ControllerLeader{{Name: "a", Component: "*"}}}},
		{name: "no controllers is valid", cfg: &MigrationConfig{LeaderName: "m", ResourceLock: "leases"}},
		{name: "nil", cfg: nil, want: []string{"nil"}},
		{name: "no leaderName", cfg: &MigrationConfig{ResourceLock: "leases"}, want: []string{"leaderName is required"}},
		{name: "bad leaderName", cfg: &MigrationConfig{LeaderName: "A B", ResourceLock: "leases"}, want: []string{`leaderName "A B" is not a valid Lease name`, "lower-case DNS subdomain"}},
		{name: "upper-case leaderName is accepted (upstream's example)", cfg: &MigrationConfig{LeaderName: "1-20-KCM-to-1-21-CCM", ResourceLock: "leases"}},
		{name: "duplicates are accepted (upstream: last wins)", cfg: &MigrationConfig{LeaderName: "m", ResourceLock: "leases", ControllerLeaders: []ControllerLeader{{Name: "a", Component: "x"}, {Name: "a", Component: "y"}}}},
		{name: "endpoints", cfg: &MigrationConfig{LeaderName: "m", ResourceLock: "endpoints"}, want: []string{`resourceLock must be "leases", got "endpoints"`, "removed"}},
		{name: "empty lock", cfg: &MigrationConfig{LeaderName: "m"}, want: []string{`resourceLock must be "leases", got ""`}},
		{name: "all at once", cfg: &MigrationConfig{ControllerLeaders: []ControllerLeader{
			{Name: "a", Component: "*"}, {Component: "kcm"}, {Name: "b"}, {Name: "a", Component: "ccm"},
		}}, want: []string{
			"leaderName is required", "resourceLock",
			"controllerLeaders[1].name is required", "controllerLeaders[2].component is required",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, tc.cfg.Validate(), tc.want)
		})
	}
}

func TestAssign(t *testing.T) {
	cfg := &MigrationConfig{
		LeaderName:   "m",
		ResourceLock: "leases",
		ControllerLeaders: []ControllerLeader{
			{Name: "service-lb-controller", Component: "cloud-controller-manager"},
			{Name: "route", Component: "kube-controller-manager"},
			{Name: "cloud-node-lifecycle-controller", Component: "*"},
			{Name: "dup", Component: "kube-controller-manager"},
			{Name: "dup", Component: "cloud-controller-manager"},
			{Name: "both", Component: "cloud-controller-manager"},
			{Name: "both-alias", Component: "kube-controller-manager"},
		},
	}
	const kcm, ccm = "kube-controller-manager", "cloud-controller-manager"
	for _, tc := range []struct {
		component, name string
		aliases         []string
		want            Assignment
	}{
		{ccm, "service-lb-controller", []string{"service"}, Migrated},
		{kcm, "service-lb-controller", []string{"service"}, Unowned},
		{kcm, "node-route-controller", []string{"route"}, Migrated}, // matched by alias
		{ccm, "node-route-controller", []string{"route"}, Unowned},  // matched by alias, other component
		{kcm, "node-route-controller", nil, NonMigrated},            // KCM's canonical-only matching
		{kcm, "cloud-node-lifecycle-controller", nil, Migrated},     // wildcard
		{ccm, "cloud-node-lifecycle-controller", []string{"cloud-node-lifecycle"}, Migrated},
		{"anything", "cloud-node-lifecycle-controller", nil, Migrated},
		{kcm, "garbage-collector-controller", []string{"garbagecollector"}, NonMigrated},
		{kcm, "dup", nil, Unowned},                     // last duplicate wins, as in KCM
		{ccm, "dup", nil, Migrated},                    // last duplicate wins, as in KCM
		{kcm, "both", []string{"both-alias"}, Unowned}, // canonical name before alias
		{kcm, "other", []string{"nope", "both-alias"}, Migrated},
		{"", "service-lb-controller", nil, Unowned},
	} {
		if got := cfg.Assign(tc.component, tc.name, tc.aliases...); got != tc.want {
			t.Errorf(
				"Assign(%q, %q, %q) = %v, want %v",
				tc.component,
				tc.name,
				tc.aliases,
				got,
				tc.want,
			)
		}
	}
	var none *MigrationConfig
	if got := none.Assign(kcm, "x"); got != NonMigrated {
		t.Errorf("nil config Assign = %v, want NonMigrated", got)
	}
}

func TestMigrationWarnings(t *testing.T) {
	known := map[string]bool{
		"service-lb-controller": true,
		"service":               true,
		"node-route-controller": true,
		"route":                 true,
	}
	isKnown := func(n string) bool { return known[n] }
	for _, tc := range []struct {
		name  string
		cfg   *MigrationConfig
		known func(string) bool
		want  []string // one substring per warning, in order
	}{
		{name: "all known by name or alias", cfg: &MigrationConfig{LeaderName: "m", ControllerLeaders: []ControllerLeader{{Name: "service"}, {Name: "node-route-controller"}}}, known: isKnown},
		{name: "none", cfg: &MigrationConfig{LeaderName: "m"}, known: isKnown},
		{name: "nil", cfg: nil, known: isKnown},
		{name: "upstream's default names, seen from a KCM without cloud controllers",
			cfg: &MigrationConfig{LeaderName: "cloud-provider-extraction-migration", ControllerLeaders: []ControllerLeader{
				{Name: "route-controller", Component: "*"}, {Name: "service-controller", Component: "*"}, {Name: "cloud-node-lifecycle-controller", Component: "*"}}},
			known: func(string) bool { return false },
			want:  []string{`no controller of this component is named "route-controller" (controllerLeaders[0]), "service-controller" (controllerLeaders[1]), "cloud-node-lifecycle-controller" (controllerLeaders[2]); those entries only matter to the other components`}},
		{name: "duplicate", cfg: &MigrationConfig{LeaderName: "m", ControllerLeaders: []ControllerLeader{{Name: "route", Component: "a"}, {Name: "service"}, {Name: "route", Component: "b"}}}, known: isKnown,
			want: []string{`controllerLeaders[2] names "route" again (first at controllerLeaders[0]); the last entry wins`}},
		{name: "upper case", cfg: &MigrationConfig{LeaderName: "1-20-KCM-to-1-21-CCM"},
			want: []string{`leaderName "1-20-KCM-to-1-21-CCM" is not a valid Lease name (the API server refuses upper case); the migration lock is the Lease "1-20-kcm-to-1-21-ccm"`}},
		{name: "nil known skips the unknown-name check", cfg: &MigrationConfig{LeaderName: "m", ControllerLeaders: []ControllerLeader{{Name: "x"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cfg.Warnings(tc.known)
			if len(got) != len(tc.want) {
				t.Fatalf(
					"Warnings = %q, want %d warning(s) containing %q",
					got,
					len(tc.want),
					tc.want,
				)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestLeaseName(t *testing.T) {
	for name, want := range map[string]string{
		"cloud-provider-extraction-migration": "cloud-provider-extraction-migration",
		"1-20-KCM-to-1-21-CCM":                "1-20-kcm-to-1-21-ccm",
		"A B":                                 "A B", // not fixable by case: Validate rejects it
	} {
		cfg := &MigrationConfig{LeaderName: name, ResourceLock: "leases"}
		if got := cfg.LeaseName(); got != want {
			t.Errorf("LeaseName(%q) = %q, want %q", name, got, want)
		}
		if got := cfg.ElectorConfig(Config{}).Name; got != want {
			t.Errorf("ElectorConfig(%q).Name = %q, want %q", name, got, want)
		}
	}
}

func TestMigrationElectorConfig(t *testing.T) {
	main := Config{Identity: "me"}.WithDefaults("kube-controller-manager")
	got := DefaultMigrationConfig("kube-controller-manager").ElectorConfig(main)
	want := main
	want.Name = "cloud-provider-extraction-migration"
	if got != want {
		t.Errorf("ElectorConfig = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Error(err)
	}
}
