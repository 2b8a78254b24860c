package leader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Leader migration moves controllers between components (typically from
// kube-controller-manager to cloud-controller-manager) without two replicas
// ever running one controller at once. Every participating component holds
// its own main lock, and, for the controllers listed in the configuration, a
// second lock shared by all of them: the migration lock, a Lease named
// LeaderName in the main lock's namespace. As in KCM, the migration lock
// should only be sought once the main lock is held and the StartFirst
// controllers run, so that one replica never holds only the migration lock
// while another holds the main one.

// MigrationGroup and MigrationKind identify KCM's LeaderMigrationConfiguration.
const (
	MigrationGroup = "controllermanager.config.k8s.io"
	MigrationKind  = "LeaderMigrationConfiguration"
)

// MigrationAPIVersions lists the accepted apiVersions, oldest first.
var MigrationAPIVersions = []string{
	MigrationGroup + "/v1alpha1",
	MigrationGroup + "/v1beta1",
	MigrationGroup + "/v1",
}

// ComponentWildcard as a ControllerLeader's Component means any component
// taking part in the migration may run the controller.
const ComponentWildcard = "*"

const flagMigrationConfig = "--leader-migration-config"

// MigrationConfig is KCM's LeaderMigrationConfiguration, independent of its
// apiVersion.
type MigrationConfig struct {
	// LeaderName is the name of the migration Lease.
	LeaderName string
	// ResourceLock is the lock type of the migration lock; must be "leases".
	// The v1 API has no such field and always means "leases".
	ResourceLock string
	// ControllerLeaders lists the migrated controllers.
	ControllerLeaders []ControllerLeader
}

// ControllerLeader says in which component a migrated controller runs.
type ControllerLeader struct {
	// Name of the controller, as the configuration spells it.
	Name string
	// Component that runs it under the migration lock, or "*" for any.
	Component string
}

// Assignment says under which lock a component runs a controller.
type Assignment int

const (
	// NonMigrated controllers are not in the migration and run under the
	// main lock.
	NonMigrated Assignment = iota
	// Migrated controllers run under the migration lock in this component.
	Migrated
	// Unowned controllers are migrated and run by another component; this
	// one must not start them.
	Unowned
)

func (a Assignment) String() string {
	switch a {
	case NonMigrated:
		return "NonMigrated"
	case Migrated:
		return "Migrated"
	case Unowned:
		return "Unowned"
	}
	return fmt.Sprintf("Assignment(%d)", int(a))
}

// DefaultMigrationConfig is the configuration used when
// --enable-leader-migration is set without --leader-migration-config: Lease
// "cloud-provider-extraction-migration", and the three cloud controllers
// that move from kube-controller-manager to cloud-controller-manager
// (node-route-controller, service-lb-controller,
// cloud-node-lifecycle-controller), runnable by any component ("*"). The
// value is the same for every component; component is accepted for symmetry
// with Config.WithDefaults.
//
// Upstream's default (k8s.io/controller-manager v0.37) has the same Lease
// but still names "route-controller" and "service-controller", names no
// v1.37 controller has (CCM calls them node-route-controller and
// service-lb-controller, and matches entries by canonical name only): with
// it upstream migrates only cloud-node-lifecycle-controller and runs the
// other two under each component's main lock, where two components can run
// them at once. ctrlhost names them as v1.37 does, so the default does what
// it is for. Only the Lease name has to agree between components, and it
// does.
func DefaultMigrationConfig(component string) *MigrationConfig {
	return &MigrationConfig{
		LeaderName:   "cloud-provider-extraction-migration",
		ResourceLock: ResourceLockLeases,
		ControllerLeaders: []ControllerLeader{
			{Name: "node-route-controller", Component: ComponentWildcard},
			{Name: "service-lb-controller", Component: ComponentWildcard},
			{Name: "cloud-node-lifecycle-controller", Component: ComponentWildcard},
		},
	}
}

// ReadMigrationConfig reads and parses the file at path; errors name the
// path and the flag. It does not validate.
func ReadMigrationConfig(path string) (*MigrationConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf(
			"leader: reading leader migration configuration %q (%s): %w",
			path,
			flagMigrationConfig,
			err,
		)
	}
	c, err := parseMigrationConfig(data)
	if err != nil {
		return nil, fmt.Errorf(
			"leader: leader migration configuration %q (%s): %w",
			path,
			flagMigrationConfig,
			err,
		)
	}
	return c, nil
}

// migrationFile is the wire form shared by all versions; which fields a
// version allows is checked separately, since encoding/json matches field
// names case-insensitively.
type migrationFile struct {
	APIVersion        string                 `json:"apiVersion"`
	Kind              string                 `json:"kind"`
	LeaderName        string                 `json:"leaderName"`
	ResourceLock      string                 `json:"resourceLock"`
	ControllerLeaders []controllerLeaderFile `json:"controllerLeaders"`
}

type controllerLeaderFile struct {
	Name      string `json:"name"`
	Component string `json:"component"`
}

// ParseMigrationConfig parses a LeaderMigrationConfiguration in YAML or JSON,
// strictly, as KCM does: an unknown apiVersion, kind or field is an error
// that names it and the accepted values. It does not validate.
func ParseMigrationConfig(data []byte) (*MigrationConfig, error) {
	c, err := parseMigrationConfig(data)
	if err != nil {
		return nil, fmt.Errorf("leader: leader migration configuration: %w", err)
	}
	return c, nil
}

func parseMigrationConfig(data []byte) (*MigrationConfig, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty")
	}
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("neither YAML nor JSON: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, errors.New("must be an object with apiVersion and kind")
	}

	var errs []error
	var apiVersion, kind string
	if err := stringField(top, "apiVersion", &apiVersion); err != nil {
		errs = append(errs, err)
	}
	if err := stringField(top, "kind", &kind); err != nil {
		errs = append(errs, err)
	}
	if !slices.Contains(MigrationAPIVersions, apiVersion) {
		errs = append(
			errs,
			fmt.Errorf(
				"apiVersion %q is not accepted; use one of %s",
				apiVersion,
				strings.Join(MigrationAPIVersions, ", "),
			),
		)
	}
	if kind != MigrationKind {
		errs = append(errs, fmt.Errorf("kind %q is not accepted; use %s", kind, MigrationKind))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	v1 := apiVersion == MigrationGroup+"/v1"
	if err := unknownFields(top, v1, apiVersion); err != nil {
		return nil, err
	}
	var f migrationFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", apiVersion, err)
	}
	c := &MigrationConfig{LeaderName: f.LeaderName, ResourceLock: f.ResourceLock}
	if v1 {
		c.ResourceLock = ResourceLockLeases
	}
	for _, l := range f.ControllerLeaders {
		c.ControllerLeaders = append(c.ControllerLeaders, ControllerLeader(l))
	}
	return c, nil
}

func stringField(obj map[string]json.RawMessage, name string, out *string) error {
	v, ok := obj[name]
	if !ok {
		return fmt.Errorf("%s is missing", name)
	}
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("%s must be a string", name)
	}
	return nil
}

// unknownFields lists every field the version does not define.
func unknownFields(top map[string]json.RawMessage, v1 bool, apiVersion string) error {
	fields := []string{"apiVersion", "kind", "leaderName", "resourceLock", "controllerLeaders"}
	if v1 {
		fields = slices.DeleteFunc(fields, func(f string) bool { return f == "resourceLock" })
	}
	leaderFields := []string{"name", "component"}

	var unknown []string
	for k := range top {
		if !slices.Contains(fields, k) {
			unknown = append(unknown, k)
		}
	}
	if v, ok := top["controllerLeaders"]; ok {
		var leaders []map[string]json.RawMessage
		if err := json.Unmarshal(v, &leaders); err == nil {
			for i, l := range leaders {
				for k := range l {
					if !slices.Contains(leaderFields, k) {
						unknown = append(unknown, fmt.Sprintf("controllerLeaders[%d].%s", i, k))
					}
				}
			}
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	note := ""
	if v1 && slices.Contains(unknown, "resourceLock") {
		note = " (v1 has no resourceLock: the lock is always leases)"
	}
	return fmt.Errorf(
		"unknown field(s) %s in %s%s; accepted fields: %s, and controllerLeaders[].{%s}",
		strings.Join(
			unknown,
			", ",
		),
		apiVersion,
		note,
		strings.Join(fields, ", "),
		strings.Join(leaderFields, ","),
	)
}

// Validate reports, all at once, what kube-controller-manager rejects or
// what cannot work: a missing leaderName, or one that is not a valid Lease
// name even in lower case; a resourceLock other than "leases" (KCM also
// accepts "endpoints", but client-go no longer has that lock); entries
// without name or component. What KCM accepts and is likely a mistake is
// reported by Warnings instead.
func (c *MigrationConfig) Validate() error {
	if c == nil {
		return errors.New("leader: leader migration configuration is nil")
	}
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("leader migration configuration: "+format, args...))
	}
	if c.LeaderName == "" {
		add("leaderName is required")
	} else if msgs := validation.IsDNS1123Subdomain(c.LeaseName()); len(msgs) > 0 {
		add("leaderName %q is not a valid Lease name: %s; use a lower-case DNS subdomain such as %q",
			c.LeaderName, strings.Join(msgs, "; "), "cloud-provider-extraction-migration")
	}
	if c.ResourceLock != ResourceLockLeases {
		hint := ""
		if c.ResourceLock == "endpoints" {
			hint = " (client-go removed the endpoints lock)"
		}
		add("resourceLock must be %q, got %q%s", ResourceLockLeases, c.ResourceLock, hint)
	}
	for i, l := range c.ControllerLeaders {
		if l.Name == "" {
			add("controllerLeaders[%d].name is required", i)
		}
		if l.Component == "" {
			add(
				"controllerLeaders[%d].component is required (a component name, or %q for any)",
				i,
				ComponentWildcard,
			)
		}
	}
	return errors.Join(errs...)
}

// LeaseName is the name of the migration Lease: LeaderName, in lower case
// when only its case keeps it from being a valid Lease name (upstream's own
// example is "1-20-KCM-to-1-21-CCM", which the API server refuses as a
// Lease name, so upstream never acquires that lock). Every ctrlhost
// component lower-cases it alike, so they still share one lock.
func (c *MigrationConfig) LeaseName() string {
	if len(validation.IsDNS1123Subdomain(c.LeaderName)) == 0 {
		return c.LeaderName
	}
	if lower := strings.ToLower(c.LeaderName); len(validation.IsDNS1123Subdomain(lower)) == 0 {
		return lower
	}
	return c.LeaderName
}

// Warnings lists what kube-controller-manager accepts but is likely a
// mistake, one sentence each: a leaderName used in lower case (LeaseName),
// entries naming the same controller (the last wins, as in KCM), and
// entries naming no controller known accepts (known should accept every
// canonical name and alias of this component's controllers; a nil known
// skips that check). Entries for controllers of another component are the
// point of the file, so they are reported without blame: a typo reads the
// same. A nil configuration has no warnings.
func (c *MigrationConfig) Warnings(known func(name string) bool) []string {
	if c == nil {
		return nil
	}
	var out []string
	if lease := c.LeaseName(); lease != c.LeaderName {
		out = append(
			out,
			fmt.Sprintf(
				"leaderName %q is not a valid Lease name (the API server refuses upper case); the "+
					"migration lock is the Lease %q",
				c.LeaderName,
				lease,
			),
		)
	}
	first := map[string]int{}
	var unknown []string
	for i, l := range c.ControllerLeaders {
		if j, dup := first[l.Name]; dup {
			out = append(
				out,
				fmt.Sprintf(
					"controllerLeaders[%d] names %q again (first at controllerLeaders[%d]); the last entry wins",
					i,
					l.Name,
					j,
				),
			)
		} else {
			first[l.Name] = i
		}
		if known != nil && l.Name != "" && !known(l.Name) {
			unknown = append(unknown, fmt.Sprintf("%q (controllerLeaders[%d])", l.Name, i))
		}
	}
	if len(unknown) > 0 {
		out = append(
			out,
			fmt.Sprintf(
				"no controller of this component is named %s; those entries only matter to the other "+
					"components taking part (check the spelling if one should be this component's)",
				strings.Join(unknown, ", "),
			),
		)
	}
	return out
}

// Assign says under which lock component runs the controller with canonical
// name name and the given aliases. An entry matches if it names the
// controller or one of its aliases (KCM matches canonical names only); the
// canonical name wins, then aliases in order; among duplicate entries the
// last wins, as in KCM. A matched entry whose component is this one or "*"
// gives Migrated, any other Unowned; no match gives NonMigrated. A nil
// configuration (no migration) gives NonMigrated.
func (c *MigrationConfig) Assign(component, name string, aliases ...string) Assignment {
	if c == nil {
		return NonMigrated
	}
	l, ok := c.find(name)
	for _, a := range aliases {
		if ok {
			break
		}
		l, ok = c.find(a)
	}
	switch {
	case !ok:
		return NonMigrated
	case l.Component == component || l.Component == ComponentWildcard:
		return Migrated
	default:
		return Unowned
	}
}

func (c *MigrationConfig) find(name string) (ControllerLeader, bool) {
	for i := len(c.ControllerLeaders) - 1; i >= 0; i-- {
		if c.ControllerLeaders[i].Name == name {
			return c.ControllerLeaders[i], true
		}
	}
	return ControllerLeader{}, false
}

// ElectorConfig is the configuration of the migration lock: main's, with the
// Lease named LeaseName. Namespace, durations and identity stay the main
// lock's, as in KCM.
func (c *MigrationConfig) ElectorConfig(main Config) Config {
	main.Name = c.LeaseName()
	main.ResourceLock = c.ResourceLock
	return main
}
