package conformance

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// A Set selects upstream's e2e tests by their full names.
type Set struct {
	Name        string
	Description string
	// Focus and Skip are regular expressions over a test's full name; a
	// test runs when it matches Focus and not Skip.
	Focus, Skip string
}

// The controller-facing areas of upstream's e2e suite: workloads and their
// controllers (sig-apps: Deployment, ReplicaSet, ReplicationController,
// StatefulSet, DaemonSet, Job, CronJob, DisruptionController,
// ControllerRevision, TTLAfterFinished), the garbage collector, namespaces,
// ResourceQuota, ServiceAccounts and the root CA ConfigMap, CSRs, taint
// eviction and node lifecycle, Endpoints and EndpointSlices (the
// controllers, and the mirroring controller).
var controllerAreas = []string{
	`\[sig-apps\] `,
	`\[sig-api-machinery\] Garbage collector `,
	`\[sig-api-machinery\] Namespaces `,
	`\[sig-api-machinery\] ResourceQuota `,
	`\[sig-auth\] ServiceAccounts `,
	`\[sig-auth\] Certificates API `,
	`\[sig-node\] NoExecuteTaintManager `,
	`\[sig-node\] Node Lifecycle `,
	`\[sig-network\] EndpointSlice `,
	`\[sig-network\] EndpointSliceMirroring `,
	`\[sig-network\] Endpoints `,
	`\[sig-network\] EndpointsController `,
}

// notHere are tests that cannot run on this cluster at all, left out
// rather than counted: off-by-default and alpha features (the API server
// runs with its defaults), cloud providers, restarts of daemons over SSH,
// tests marked flaky or slow (a CockroachDB cluster, 1,000 pods), and
// dynamic resource allocation (no DRA driver).
var notHere = []string{
	`\[Feature:OffByDefault\]`,
	`\[Alpha\]`,
	`\[Flaky\]`,
	`\[Slow\]`,
	`\[Provider:`,
	`DaemonRestart`,
	`\[DRA\]`,
	`\[Feature:ComprehensiveNamespaceDraining\]`,
}

// Sets are the sets a run can select by name.
var Sets = []Set{
	{
		Name: "smoke",
		Description: "a handful of conformance tests across the controllers: a Deployment's " +
			"rolling update, a Job, garbage collection of a ReplicationController's pods, " +
			"a ResourceQuota, EndpointSlices for a Service's pods, the root CA ConfigMap",
		Focus: strings.Join([]string{
			`\[sig-apps\] Deployment RollingUpdateDeployment should delete old pods and create ` +
				`new ones \[Conformance\]$`,
			`\[sig-apps\] Job should run a job to completion when tasks succeed$`,
			`\[sig-api-machinery\] Garbage collector should delete pods created by rc when not ` +
				`orphaning \[Conformance\]$`,
			`\[sig-api-machinery\] ResourceQuota should create a ResourceQuota and capture the ` +
				`life of a pod\. \[Conformance\]$`,
			`\[sig-network\] EndpointSlice should create Endpoints and EndpointSlices for Pods ` +
				`matching a Service \[Conformance\]$`,
			`\[sig-auth\] ServiceAccounts should guarantee kube-root-ca\.crt exist in any ` +
				`namespace \[Conformance\]$`,
		}, "|"),
	},
	{
		Name: "conformance",
		Description: "the [Conformance] tests of the controller-facing areas " +
			"(" + strings.Join(areaNames(), ", ") + ")",
		Focus: `(` + strings.Join(controllerAreas, "|") + `).*\[Conformance\]`,
		Skip:  strings.Join(notHere, "|"),
	},
	{
		Name:        "full",
		Description: "every test of the controller-facing areas, [Conformance] or not",
		Focus:       strings.Join(controllerAreas, "|"),
		Skip:        strings.Join(notHere, "|"),
	},
}

// SetByName returns the named set.
func SetByName(name string) (Set, error) {
	for _, s := range Sets {
		if s.Name == name {
			return s, nil
		}
	}
	var names []string
	for _, s := range Sets {
		names = append(names, s.Name)
	}
	return Set{}, fmt.Errorf("conformance: no set %q; the sets are %s", name,
		strings.Join(names, ", "))
}

func areaNames() []string {
	var out []string
	for _, a := range controllerAreas {
		out = append(out, strings.TrimSpace(strings.NewReplacer(`\[`, "[", `\]`, "]").Replace(a)))
	}
	return out
}

// Select returns the names in names that s selects, sorted, the
// [Conformance] tests first.
func (s Set) Select(names []string) ([]string, error) {
	focus, err := regexp.Compile(s.Focus)
	if err != nil {
		return nil, fmt.Errorf("conformance: set %s: focus: %w", s.Name, err)
	}
	var skip *regexp.Regexp
	if s.Skip != "" {
		if skip, err = regexp.Compile(s.Skip); err != nil {
			return nil, fmt.Errorf("conformance: set %s: skip: %w", s.Name, err)
		}
	}
	var out []string
	for _, n := range names {
		if focus.MatchString(n) && (skip == nil || !skip.MatchString(n)) {
			out = append(out, n)
		}
	}
	SortConformanceFirst(out)
	return out, nil
}

// SortConformanceFirst sorts test names by name, the [Conformance] tests
// first.
func SortConformanceFirst(names []string) {
	slices.SortFunc(names, func(a, b string) int {
		ca, cb := strings.Contains(a, "[Conformance]"), strings.Contains(b, "[Conformance]")
		if ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
}

// IsSerial says whether a test must run alone on its cluster.
func IsSerial(name string) bool {
	return strings.Contains(name, "[Serial]") || strings.Contains(name, "[Disruptive]")
}

// ExactFocus is a --ginkgo.focus that selects exactly the named tests.
func ExactFocus(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		// Ginkgo matches "<suite description> <full name>".
		quoted[i] = " " + regexp.QuoteMeta(n) + "$"
	}
	return strings.Join(quoted, "|")
}
