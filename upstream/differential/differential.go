// Package differential runs one scenario against a native ctrlhost built-in
// and again against its upstream kube-controller-manager counterpart, on one
// API server, and compares the end states after normalising away what
// legitimately differs between two runs (uids, resource versions,
// timestamps, generated name suffixes, the namespace).
//
// Each side gets a fresh namespace and its own Manager, built with only the
// scenario's controller selected, without leader election or serving. The
// scenario's objects are created before the Manager starts (so a
// controller's first pass sees them, as after a restart); the harness then
// polls Observe until the normalised state has not changed for Quiet and,
// when given, Settled holds, and stops the Manager.
//
// # Guarantees
//
//   - The two sides run one after the other, never at once, each with its
//     own namespace; Cleanup runs after each side.
//   - Every wait has a deadline (Runner.Timeout); a side that never settles
//     is an error naming the scenario and the side, with its last state.
//   - The comparison is of normalised states only; Normalise documents every
//     field it removes or rewrites.
//
// # Non-guarantees
//
//   - Timing is not compared: how fast each side converges is the
//     benchmarks' business.
//   - Cluster-scoped or shared state a scenario touches (kube-system
//     secrets, terminated pods counted cluster-wide) is the scenario's to
//     scope, usually with a label carrying the namespace.
//   - Quiescence is observed, not proven: a controller that acts again after
//     Quiet of stillness may be compared too early.
package differential

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

// Side is one of the two implementations compared.
type Side string

const (
	Native   Side = "native"
	Upstream Side = "upstream"
)

// Scenario is one behaviour of one controller.
type Scenario struct {
	// Name names the scenario in errors and logs.
	Name string
	// Controller is the canonical name both sides register.
	Controller string
	// With names further controllers the scenario needs running beside
	// Controller, each side its own implementation of them (a Deployment
	// scenario needs the ReplicaSet controller to make pods).
	With []string
	// Setup creates the scenario's objects in ns, before the controller
	// starts. Required.
	Setup func(ctx context.Context, cs kubernetes.Interface, ns string) error
	// Act, when set, is called at every poll while the controller runs:
	// the test's part, such as a kubelet's (marking pods ready).
	Act func(ctx context.Context, cs kubernetes.Interface, ns string) error
	// Observe returns the objects to compare. Required.
	Observe func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error)
	// Settled, when set, must hold of the normalised state for the side to
	// be done (besides Quiet of stillness).
	Settled func(state []map[string]any) bool
	// Cleanup, when set, removes what Setup made outside ns or what would
	// disturb the next side (say, terminated pods counted cluster-wide).
	Cleanup func(ctx context.Context, cs kubernetes.Interface, ns string) error
	// IgnoreFields are extra dotted paths (e.g. "status.conditions")
	// Normalise removes, each for a stated reason in the scenario.
	IgnoreFields []string
}

// Runner runs scenarios on one API server.
type Runner struct {
	// Config reaches the API server. Required.
	Config *rest.Config
	// Descriptors returns the descriptors of a side. Required.
	Descriptors func(Side) []descriptor.Descriptor
	// FeatureGate returns the gate the side's Manager uses (nil: the
	// Manager's default).
	FeatureGate func(Side) featuregate.FeatureGate
	// Options adjusts the side's Manager options (nil: none).
	Options func(Side, *manager.Options)
	// Timeout bounds each side. Default: 2 minutes.
	Timeout time.Duration
	// Poll is the time between observations. Default: 200ms.
	Poll time.Duration
	// Quiet is how long the state must stay unchanged. Default: 2s.
	Quiet time.Duration
	// Log receives progress. Default: discard.
	Log logr.Logger
}

// Result is what each side ended with, normalised.
type Result struct {
	Native, Upstream []map[string]any
}

// Diff is "" when both sides agree, else a line-by-line difference of
// their JSON, native first.
func (r Result) Diff() string {
	a, b := render(r.Native), render(r.Upstream)
	if a == b {
		return ""
	}
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&out, "line %d:\n  native:   %s\n  upstream: %s\n", i+1, x, y)
		}
	}
	return out.String()
}

func render(state []map[string]any) string {
	b, _ := json.MarshalIndent(state, "", "  ")
	return string(b)
}

// Run runs sc on the native side, then on the upstream side.
func (r Runner) Run(ctx context.Context, sc Scenario) (Result, error) {
	if r.Config == nil || r.Descriptors == nil || sc.Setup == nil || sc.Observe == nil ||
		sc.Controller == "" {
		return Result{}, errors.New("differential: Runner.Config, Runner.Descriptors, " +
			"Scenario.Controller, Setup and Observe are required")
	}
	var res Result
	for _, side := range []Side{Native, Upstream} {
		state, err := r.side(ctx, sc, side)
		if err != nil {
			return res, fmt.Errorf("differential: scenario %q, %s side: %w", sc.Name, side, err)
		}
		if side == Native {
			res.Native = state
		} else {
			res.Upstream = state
		}
	}
	return res, nil
}

func (r Runner) withDefaults() Runner {
	if r.Timeout == 0 {
		r.Timeout = 2 * time.Minute
	}
	if r.Poll == 0 {
		r.Poll = 200 * time.Millisecond
	}
	if r.Quiet == 0 {
		r.Quiet = 2 * time.Second
	}
	if r.Log.GetSink() == nil {
		r.Log = logr.Discard()
	}
	return r
}

func (r Runner) side(ctx context.Context, sc Scenario,
	side Side) (state []map[string]any, err error) {
	r = r.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(r.Config)
	if err != nil {
		return nil, err
	}
	nsObj, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "diff-" + string(side) + "-",
		Labels:       map[string]string{"ctrlhost.io/differential": sc.Controller},
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	ns := nsObj.Name
	if sc.Cleanup != nil {
		defer func() {
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer ccancel()
			if cerr := sc.Cleanup(cctx, cs, ns); cerr != nil {
				err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
			}
		}()
	}
	if err := sc.Setup(ctx, cs, ns); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}

	opts := manager.Options{
		Controllers: append([]string{sc.Controller}, sc.With...),
		Serving:     serving.Options{SecurePort: serving.PortDisabled},
	}
	if r.Options != nil {
		r.Options(side, &opts)
	}
	b := manager.NewBuilder("differential-" + string(side)).WithRESTConfig(r.Config).WithOptions(opts).
		WithLogger(r.Log.WithName(string(side))).Register(r.Descriptors(side)...)
	if r.FeatureGate != nil {
		if fg := r.FeatureGate(side); fg != nil {
			b = b.WithFeatureGate(fg)
		}
	}
	m, err := b.Build()
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	defer func() {
		stop()
		if rerr := <-done; rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = errors.Join(err, fmt.Errorf("manager: %w", rerr))
		}
	}()

	tick := time.NewTicker(r.Poll)
	defer tick.Stop()
	var last string
	var lastChange time.Time
	var lastErr error
	for {
		if sc.Act != nil {
			if err := sc.Act(ctx, cs, ns); err != nil {
				lastErr = fmt.Errorf("act: %w", err)
			}
		}
		objs, err := sc.Observe(ctx, cs, ns)
		if err == nil {
			state = Normalise(objs, ns, sc.IgnoreFields)
			now := render(state)
			if now != last {
				last, lastChange = now, time.Now()
			} else if time.Since(lastChange) >= r.Quiet && (sc.Settled == nil || sc.Settled(state)) {
				r.Log.Info("Settled", "scenario", sc.Name, "side", side)
				return state, nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return state, fmt.Errorf("did not settle within %v (last error: %v); last state:\n%s",
				r.Timeout, lastErr, last)
		case <-done:
			done <- nil // for the deferred stop
			return state, errors.New("the manager stopped before the state settled")
		case <-tick.C:
		}
	}
}

// Fields Normalise removes from every object, and why: they differ between
// any two runs (identity, versions, times) or carry the managing client's
// name.
var removed = []string{
	"metadata.uid", "metadata.resourceVersion", "metadata.creationTimestamp", "metadata.generation",
	"metadata.managedFields", "metadata.selfLink", "metadata.deletionTimestamp",
	"status.observedGeneration",
}

// Strings rewritten wherever they appear: RFC 3339 times become "<time>",
// UUIDs (uids in labels such as the Job's controller-uid) become "<uid>",
// and names the API server generates for its own additions (the projected
// service-account token volume) lose their random suffix.
var (
	timestamp = regexp.MustCompile(
		`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`)
	uuid = regexp.MustCompile(
		`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	apiserverName = regexp.MustCompile(`^(kube-api-access-)[a-z0-9]{5}$`)
)

// Normalise turns objects into comparable maps: the removed fields and
// ignore go; the namespace becomes "<ns>" wherever it appears as a whole
// value or a prefix; names made from a generateName get a stable ordinal
// ("<generateName>#0", …, ordered by their content with names, times and
// identities normalised, then by original name, so that objects which
// differ only in status keep their places whatever suffixes the API server
// drew) everywhere they are referred to; owner-reference uids go; RFC 3339 times become "<time>",
// UUIDs "<uid>", and the API server's generated volume names lose their
// suffix; the objects are sorted by kind and name.
func Normalise(objs []runtime.Object, ns string, ignore []string) []map[string]any {
	var out []map[string]any
	renames := map[string]string{}
	type gen struct{ prefix, content, name string }
	var generated []gen
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			continue
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		if kind := kindOf(o); kind != "" {
			m["kind"] = kind
		}
		md, _ := m["metadata"].(map[string]any)
		if gn, _ := md["generateName"].(string); gn != "" {
			if name, _ := md["name"].(string); strings.HasPrefix(name, gn) {
				generated = append(generated, gen{gn, contentKey(m, ns, ignore), name})
			}
		}
		out = append(out, m)
	}
	slices.SortFunc(generated, func(a, b gen) int {
		if c := strings.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		if c := strings.Compare(a.content, b.content); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	counts := map[string]int{}
	for _, g := range generated {
		renames[g.name] = fmt.Sprintf("%s#%d", g.prefix, counts[g.prefix])
		counts[g.prefix]++
	}
	for i, m := range out {
		for _, path := range append(slices.Clone(removed), ignore...) {
			deletePath(m, strings.Split(path, "."))
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			if refs, ok := md["ownerReferences"].([]any); ok {
				for _, r := range refs {
					if rm, ok := r.(map[string]any); ok {
						delete(rm, "uid")
					}
				}
			}
		}
		out[i] = rewrite(m, ns, renames).(map[string]any)
	}
	slices.SortFunc(out, func(a, b map[string]any) int {
		ka, kb := fmt.Sprint(a["kind"]), fmt.Sprint(b["kind"])
		if c := strings.Compare(ka, kb); c != 0 {
			return c
		}
		return strings.Compare(nameOf(a), nameOf(b))
	})
	return out
}

// contentKey renders a copy of m as Normalise would, without its name and
// with generated names left as they are: what orders generated objects.
func contentKey(m map[string]any, ns string, ignore []string) string {
	b, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	var c map[string]any
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	for _, path := range append(slices.Clone(removed), append(ignore, "metadata.name")...) {
		deletePath(c, strings.Split(path, "."))
	}
	return render([]map[string]any{rewrite(c, ns, nil).(map[string]any)})
}

func kindOf(o runtime.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := fmt.Sprintf("%T", o)
	return t[strings.LastIndex(t, ".")+1:]
}

func nameOf(m map[string]any) string {
	md, _ := m["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

func deletePath(m map[string]any, path []string) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	if next, ok := m[path[0]].(map[string]any); ok {
		deletePath(next, path[1:])
	}
}

// rewrite applies the namespace, name and time rewrites to every string.
func rewrite(v any, ns string, renames map[string]string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = rewrite(x, ns, renames)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = rewrite(x, ns, renames)
		}
		return t
	case string:
		if r, ok := renames[t]; ok {
			return r
		}
		switch {
		case timestamp.MatchString(t):
			return "<time>"
		case uuid.MatchString(t):
			return "<uid>"
		case apiserverName.MatchString(t):
			return apiserverName.ReplaceAllString(t, "${1}<generated>")
		}
		return strings.ReplaceAll(t, ns, "<ns>")
	}
	return v
}

// apiServerReporters are the kube-apiserver's own repair loops. They
// report Services they catch between IP or port allocation and creation
// (ClusterIPNotAllocated, PortNotAllocated); whether they do is timing on
// the shared API server, and no controller's doing.
var apiServerReporters = map[string]bool{
	"ipallocator-repair-controller":   true,
	"portallocator-repair-controller": true,
}

// fromAPIServer reports whether e was recorded by one of the API server's
// repair loops (events.k8s.io recorders set reportingController, the core
// ones source.component).
func fromAPIServer(e corev1.Event) bool {
	return apiServerReporters[e.ReportingController] || apiServerReporters[e.Source.Component]
}

// EventReasons lists the sorted, de-duplicated "<involvedObject.kind>
// <reason>" pairs of the events in ns, leaving out the API server's own
// repair-loop events and those skip (when set) selects: events no
// controller caused, say. How many events a run records and when differ
// between two runs; which reasons occur does not.
func EventReasons(ctx context.Context, cs kubernetes.Interface, ns string,
	skip func(corev1.Event) bool) ([]string, error) {
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var reasons []string
	for _, e := range evs.Items {
		if !fromAPIServer(e) && (skip == nil || !skip(e)) {
			reasons = append(reasons, e.InvolvedObject.Kind+" "+e.Reason)
		}
	}
	slices.Sort(reasons)
	return slices.Compact(reasons), nil
}

// EventSummary is EventReasons as an object for Observe to return: kind
// EventSummary, name "events", data.reasons the pairs one per line
// (EventsOf reads them back from a normalised state).
func EventSummary(ctx context.Context, cs kubernetes.Interface, ns string,
	skip func(corev1.Event) bool) (runtime.Object, error) {
	reasons, err := EventReasons(ctx, cs, ns, skip)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "EventSummary"},
		ObjectMeta: metav1.ObjectMeta{Name: "events"},
		Data:       map[string]string{"reasons": strings.Join(reasons, "\n")},
	}, nil
}

// EventsOf returns the reasons of the EventSummary in a normalised state,
// one per line ("" without one).
func EventsOf(state []map[string]any) string {
	for _, o := range state {
		if o["kind"] == "EventSummary" {
			d, _ := o["data"].(map[string]any)
			s, _ := d["reasons"].(string)
			return s
		}
	}
	return ""
}
