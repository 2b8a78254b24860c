package pvcprotection

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/featuregate"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const ns = "ns"

var other = "example.com/other"

type claimOpt func(*corev1.PersistentVolumeClaim)

func claim(name string, opts ...claimOpt) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	for _, o := range opts {
		o(c)
	}
	return c
}

func finalizers(f ...string) claimOpt {
	return func(c *corev1.PersistentVolumeClaim) { c.Finalizers = f }
}

func protected(c *corev1.PersistentVolumeClaim) { c.Finalizers = []string{Finalizer} }

func deleting(c *corev1.PersistentVolumeClaim) {
	t := metav1.NewTime(controllertest.Epoch)
	c.DeletionTimestamp = &t
}

func bound(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimBound }

func unusedIs(s corev1.ConditionStatus) claimOpt {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{
			{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue},
			{Type: corev1.PersistentVolumeClaimUnused, Status: s, Reason: "Before"}}
	}
}

func ownedBy(p *corev1.Pod) claimOpt {
	return func(c *corev1.PersistentVolumeClaim) {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod",
			Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
	}
}

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "node-a",
			Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func mounts(claim string) podOpt {
	return func(p *corev1.Pod) {
		src := &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v" + claim,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: src}})
	}
}

func ephemeral(volume string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume,
			VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}})
	}
}

func unscheduled(p *corev1.Pod) { p.Spec.NodeName = "" }

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

// podDeleting marks the pod deleted with grace left, its container
// stopped unless running.
func podDeleting(grace int64, running bool) podOpt {
	return func(p *corev1.Pod) {
		t := metav1.NewTime(controllertest.Epoch)
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &t, &grace
		if !running {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{}}
		}
	}
}

// fixture is a controller over listers filled directly (the pods as the
// host would cache them: pruned to the declared reads) and a fake
// clientset holding the claims and the API's pods.
type fixture struct {
	c      *controller
	client *fake.Clientset
	clock  *testingclock.FakeClock
}

func newFixture(t *testing.T, unused bool, claims []*corev1.PersistentVolumeClaim,
	cached, apiPods []*corev1.Pod) *fixture {
	t.Helper()
	indexers := index.PodsByClaimIndexers()
	indexers[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	for _, p := range controllertest.Pruned(t, Descriptor(Options{}), cached...) {
		if err := podIdx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	objs := slices.Concat(controllertest.DeepCopies(claims...),
		controllertest.DeepCopies(apiPods...))
	client := fake.NewClientset(objs...)
	clk := testingclock.NewFakeClock(controllertest.Epoch)
	c := &controller{
		client: client,
		claims: corelisters.NewPersistentVolumeClaimLister(
			controllertest.NamespacedIndexer(t, claims...)),
		pods:    podIdx,
		clock:   clk,
		unused:  unused,
		batches: newBatches(),
		retries: workqueue.DefaultTypedControllerRateLimiter[string](),
	}
	c.loop = workloop.New("test", c.sync, workloop.Options{Clock: clk})
	t.Cleanup(c.loop.ShutDown)
	return &fixture{c: c, client: client, clock: clk}
}

// writes renders the fixture's writes: "finalizers <name> [..]" for an
// update, "unused <name> <status> <reason>" for a status update, and
// "list pods" for a live list.
func (f *fixture) writes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, a := range f.client.Actions() {
		switch a := a.(type) {
		case k8stesting.ListAction:
			out = append(out, "list "+a.GetResource().Resource)
		case k8stesting.UpdateAction:
			c := a.GetObject().(*corev1.PersistentVolumeClaim)
			if a.GetSubresource() == "status" {
				u := unusedCondition(c)
				if u == nil {
					t.Errorf("status update of %s without the Unused condition", c.Name)
					continue
				}
				if !u.LastTransitionTime.Time.Equal(controllertest.Epoch) || u.Message == "" {
					t.Errorf("Unused condition %+v: want the time now and a message", u)
				}
				out = append(out, "unused "+c.Name+" "+string(u.Status)+" "+u.Reason)
				continue
			}
			out = append(out, "finalizers "+c.Name+" "+strings.Join(c.Finalizers, ","))
		default:
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func TestSyncClaim(t *testing.T) {
	web := pod("web", ephemeral("data"))
	tests := []struct {
		name   string
		unused bool // the gate
		claim  *corev1.PersistentVolumeClaim
		cached []*corev1.Pod // in the informer and the API
		live   []*corev1.Pod // in the API only
		want   []string
	}{
		{name: "a claim without the finalizer gets it",
			claim: claim("c", finalizers(other)),
			want:  []string{"finalizers c " + other + "," + Finalizer}},
		{name: "a claim with it: nothing", claim: claim("c", protected)},
		{name: "deleted without it: not added back",
			claim: claim("c", deleting, finalizers(other))},
		{name: "deleted, used by a cached scheduled pod: kept, no live list",
			claim: claim("c", protected, deleting), cached: []*corev1.Pod{pod("p", mounts("c"))}},
		{name: "deleted, unused: the live list finds no pod, removed",
			claim:  claim("c", finalizers(other, Finalizer), deleting),
			cached: []*corev1.Pod{pod("p", mounts("other"))},
			want:   []string{"list pods", "finalizers c " + other}},
		{name: "deleted, a pod only the API has uses it: kept",
			claim: claim("c", protected, deleting), live: []*corev1.Pod{pod("p", mounts("c"))},
			want: []string{"list pods"}},
		{name: "deleted, its only user unscheduled: removed",
			claim:  claim("c", protected, deleting),
			cached: []*corev1.Pod{pod("p", mounts("c"), unscheduled)},
			want:   []string{"list pods", "finalizers c "}},
		{name: "deleted, its user succeeded: kept (a terminated pod still counts)",
			claim:  claim("c", protected, deleting),
			cached: []*corev1.Pod{pod("p", mounts("c"), phase(corev1.PodSucceeded))}},
		{name: "deleted, its user force-deleted: kept (a direct reference counts)",
			claim:  claim("c", protected, deleting),
			cached: []*corev1.Pod{pod("p", mounts("c"), podDeleting(0, false))}},
		{name: "deleted ephemeral claim of a scheduled pod: kept",
			claim:  claim("web-data", protected, deleting, ownedBy(web)),
			cached: []*corev1.Pod{web}},
		{name: "deleted ephemeral claim of a pod shut down: removed",
			claim:  claim("web-data", protected, deleting, ownedBy(web)),
			cached: []*corev1.Pod{pod("web", ephemeral("data"), podDeleting(0, true))},
			want:   []string{"list pods", "finalizers web-data "}},
		{name: "deleted ephemeral claim of a pod deleted with grace: kept",
			claim:  claim("web-data", protected, deleting, ownedBy(web)),
			cached: []*corev1.Pod{pod("web", ephemeral("data"), podDeleting(30, false))}},
		{name: "deleted claim of that name not the pod's: removed",
			claim:  claim("web-data", protected, deleting),
			cached: []*corev1.Pod{web},
			want:   []string{"list pods", "finalizers web-data "}},
		{name: "bound, used, no condition: Unused False",
			unused: true, claim: claim("c", protected, bound),
			cached: []*corev1.Pod{pod("p", mounts("c"))},
			want:   []string{"unused c False PodUsingPVC"}},
		{name: "bound, used by an unscheduled pod: Unused False",
			unused: true, claim: claim("c", protected, bound, unusedIs(corev1.ConditionTrue)),
			cached: []*corev1.Pod{pod("p", mounts("c"), unscheduled)},
			want:   []string{"unused c False PodUsingPVC"}},
		{name: "bound, used, Unused False: nothing",
			unused: true, claim: claim("c", protected, bound, unusedIs(corev1.ConditionFalse)),
			cached: []*corev1.Pod{pod("p", mounts("c"))}},
		{name: "bound, used, Unused Unknown: nothing",
			unused: true, claim: claim("c", protected, bound, unusedIs(corev1.ConditionUnknown)),
			cached: []*corev1.Pod{pod("p", mounts("c"))}},
		{name: "bound, its user succeeded: Unused True",
			unused: true, claim: claim("c", protected, bound, unusedIs(corev1.ConditionFalse)),
			cached: []*corev1.Pod{pod("p", mounts("c"), phase(corev1.PodSucceeded))},
			want:   []string{"list pods", "unused c True NoPodsUsingPVC"}},
		{name: "bound, its user deleting with no container running: Unused True",
			unused: true, claim: claim("c", protected, bound),
			cached: []*corev1.Pod{pod("p", mounts("c"), podDeleting(30, false))},
			want:   []string{"list pods", "unused c True NoPodsUsingPVC"}},
		{name: "bound, its user deleting, still running: Unused False",
			unused: true, claim: claim("c", protected, bound),
			cached: []*corev1.Pod{pod("p", mounts("c"), podDeleting(30, true))},
			want:   []string{"unused c False PodUsingPVC"}},
		{name: "bound, unused, Unused True: nothing written",
			unused: true, claim: claim("c", protected, bound, unusedIs(corev1.ConditionTrue)),
			want: []string{"list pods"}},
		{name: "bound, unused, Unused Unknown: True",
			unused: true, claim: claim("c", protected, bound, unusedIs(corev1.ConditionUnknown)),
			want: []string{"list pods", "unused c True NoPodsUsingPVC"}},
		{name: "bound, unused, without the finalizer: both written",
			unused: true, claim: claim("c", bound),
			want: []string{"list pods", "unused c True NoPodsUsingPVC",
				"finalizers c " + Finalizer}},
		{name: "bound, unused, gate off: nothing",
			claim: claim("c", protected, bound)},
		{name: "pending: no condition", unused: true, claim: claim("c", protected)},
		{name: "bound and deleted: no condition, finalizer removed",
			unused: true, claim: claim("c", protected, bound, deleting),
			want: []string{"list pods", "finalizers c "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.unused, []*corev1.PersistentVolumeClaim{tt.claim}, tt.cached,
				append(slices.Clone(tt.cached), tt.live...))
			if err := f.c.syncClaim(controllertest.LogContext(t), ns, tt.claim.Name,
				&livePods{}); err != nil {
				t.Fatal(err)
			}
			if got := f.writes(t); !slices.Equal(got, tt.want) {
				t.Errorf("actions %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSyncClaimErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		verb    string
		sub     string
		wantErr string
	}{
		{"the live list fails", claim("c", protected, deleting), "list", "",
			"listing the pods of namespace ns: boom"},
		{"the finalizer update fails", claim("c"), "update", "",
			"writing the finalizers of PersistentVolumeClaim ns/c: boom"},
		{"the status update fails", claim("c", protected, bound), "update", "status",
			"writing the Unused condition of PersistentVolumeClaim ns/c: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, true, []*corev1.PersistentVolumeClaim{tt.claim}, nil, nil)
			f.client.PrependReactor(tt.verb, "*",
				func(a k8stesting.Action) (bool, runtime.Object, error) {
					return a.GetSubresource() == tt.sub, nil, boom
				})
			err := f.c.syncClaim(t.Context(), ns, "c", &livePods{})
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
	f := newFixture(t, true, nil, nil, nil)
	if err := f.c.syncClaim(t.Context(), ns, "gone", &livePods{}); err != nil {
		t.Errorf("sync of a gone claim = %v, want nil", err)
	}
}

// TestBatchSharesOneLiveList: the claims of a namespace synced together
// list its pods once, as KCM's lazy live list does.
func TestBatchSharesOneLiveList(t *testing.T) {
	f := newFixture(t, false, []*corev1.PersistentVolumeClaim{
		claim("a", protected, deleting), claim("b", protected, deleting), claim("c")}, nil, nil)
	for _, n := range []string{"a", "b", "c"} {
		f.c.enqueue(ns, n)
	}
	if err := f.c.sync(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	want := []string{"list pods", "finalizers a ", "finalizers b ", "finalizers c " + Finalizer}
	if got := f.writes(t); !slices.Equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	if w := f.c.batches.waiting(); len(w) != 0 {
		t.Errorf("still waiting: %v", w)
	}
}

// TestFailedClaimWaitsForItsBackOff: a claim whose write fails is synced
// again after its own back-off, not with the next claim of its namespace,
// unless an event of its own comes first.
func TestFailedClaimWaitsForItsBackOff(t *testing.T) {
	f := newFixture(t, false, []*corev1.PersistentVolumeClaim{claim("bad"), claim("good")},
		nil, nil)
	failing := true
	f.client.PrependReactor("update", "persistentvolumeclaims",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			u := a.(k8stesting.UpdateAction).GetObject().(*corev1.PersistentVolumeClaim)
			return failing && u.Name == "bad", nil, errors.New("refused")
		})
	f.c.enqueue(ns, "bad")
	if err := f.c.sync(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	if got := f.c.batches.take(ns, f.clock.Now()); len(got) != 0 {
		t.Fatalf("due at once after a failure: %v", got)
	}
	f.c.enqueue(ns, "good")
	f.client.ClearActions()
	if err := f.c.sync(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(t); !slices.Equal(got, []string{"finalizers good " + Finalizer}) {
		t.Errorf("the namespace's next sync wrote %q; the failed claim is not due", got)
	}
	f.clock.Step(time.Second)
	if got := f.c.batches.take(ns, f.clock.Now()); !slices.Equal(got, []string{"bad"}) {
		t.Errorf("due after its back-off: %v, want [bad]", got)
	}
	// It failed again: an event of its own makes it due at once.
	f.c.batches.retry(ns, "bad", f.clock.Now().Add(time.Hour))
	f.c.enqueue(ns, "bad")
	if got := f.c.batches.take(ns, f.clock.Now()); !slices.Equal(got, []string{"bad"}) {
		t.Errorf("due after an event: %v, want [bad]", got)
	}
	// A success forgets its failures.
	failing = false
	f.c.enqueue(ns, "bad")
	if err := f.c.sync(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	if n := f.c.retries.When(ns + "/bad"); n != 5*time.Millisecond {
		t.Errorf("back-off after a success %v, want the first step", n)
	}
}

// TestRetryKeepsAnEventThatCameMeanwhile: a claim whose sync failed while
// an event of it came is due at once.
func TestRetryKeepsAnEventThatCameMeanwhile(t *testing.T) {
	b := newBatches()
	now := controllertest.Epoch
	b.add(ns, "c", time.Time{})
	b.retry(ns, "c", now.Add(time.Hour))
	if got := b.take(ns, now); !slices.Equal(got, []string{"c"}) {
		t.Errorf("take = %v, want [c]", got)
	}
	b.retry(ns, "c", now.Add(time.Hour))
	b.add(ns, "c", now.Add(2*time.Hour)) // a later due time does not delay it
	if got := b.take(ns, now.Add(time.Hour)); !slices.Equal(got, []string{"c"}) {
		t.Errorf("take = %v, want [c]", got)
	}
	if w := b.waiting(); len(w) != 0 {
		t.Errorf("waiting %v", w)
	}
}

// TestPanicKeepsTheRest: claims not synced when a sync panicked wait for
// the namespace's retry.
func TestPanicKeepsTheRest(t *testing.T) {
	f := newFixture(t, false, []*corev1.PersistentVolumeClaim{claim("a"), claim("b")}, nil, nil)
	f.client.PrependReactor("update", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		panic("boom")
	})
	f.c.enqueue(ns, "a")
	f.c.enqueue(ns, "b")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("no panic")
			}
		}()
		_ = f.c.sync(t.Context(), ns)
	}()
	if got := f.c.batches.take(ns, f.clock.Now()); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("waiting after a panic: %v, want [a b]", got)
	}
}

func TestHandlers(t *testing.T) {
	web := pod("web", ephemeral("data"), mounts("shared"))
	tests := []struct {
		name   string
		unused bool
		do     func(c *controller)
		want   []string // the claims queued, sorted
	}{
		{"a claim without the finalizer", false,
			func(c *controller) { c.claimChanged(claim("c")) }, []string{"c"}},
		{"a deleted claim with it", false,
			func(c *controller) { c.claimChanged(claim("c", protected, deleting)) }, []string{"c"}},
		{"a protected claim", false,
			func(c *controller) { c.claimChanged(claim("c", protected, bound)) }, nil},
		{"a protected claim without the Unused condition, gate on", true,
			func(c *controller) { c.claimChanged(claim("c", protected)) }, []string{"c"}},
		{"a protected claim with it, gate on", true,
			func(c *controller) { c.claimChanged(claim("c", protected, unusedIs("True"))) }, nil},
		{"a running scheduled pod, gate off", false,
			func(c *controller) { c.podChanged(web, false) }, nil},
		{"a running scheduled pod, gate on", true,
			func(c *controller) { c.podChanged(web, false) }, []string{"shared", "web-data"}},
		{"a deleted pod", false,
			func(c *controller) { c.podChanged(web, true) }, []string{"shared", "web-data"}},
		{"a deleted pod's tombstone", false,
			func(c *controller) {
				c.podChanged(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: web}, true)
			}, []string{"shared", "web-data"}},
		{"a terminated pod", false,
			func(c *controller) { c.podChanged(pod("p", mounts("c"), phase("Failed")), false) },
			[]string{"c"}},
		{"an unscheduled pod", false,
			func(c *controller) { c.podChanged(pod("p", mounts("c"), unscheduled), false) },
			[]string{"c"}},
		{"something else", true, func(c *controller) { c.podChanged("x", true); c.claimChanged(1) },
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.unused, nil, nil, nil)
			tt.do(f.c)
			got := f.c.batches.take(ns, f.clock.Now())
			if !slices.Equal(got, tt.want) {
				t.Errorf("queued %v, want %v", got, tt.want)
			}
			if wantLen := min(len(tt.want), 1); f.c.loop.Len() != wantLen {
				t.Errorf("loop holds %d keys, want %d", f.c.loop.Len(), wantLen)
			}
		})
	}
}

// TestPodReplacedUnderItsName: an update that replaced a pod (a new UID)
// queues the old pod's claims as if it was deleted; an update of the same
// pod does not.
func TestPodReplacedUnderItsName(t *testing.T) {
	f := newFixture(t, false, nil, nil, nil)
	old := pod("p", mounts("old"))
	same := pod("p", mounts("old"), mounts("more"))
	f.c.podUpdated(old, same)
	if got := f.c.batches.take(ns, f.clock.Now()); len(got) != 0 {
		t.Errorf("an update of a running scheduled pod queued %v", got)
	}
	replacement := pod("p", mounts("new"))
	replacement.UID = "another"
	f.c.podUpdated(old, replacement)
	if got := f.c.batches.take(ns, f.clock.Now()); !slices.Equal(got, []string{"old"}) {
		t.Errorf("queued %v, want [old] (the running scheduled replacement is skipped)", got)
	}
}

// waiting returns the namespaces with claims waiting.
func (b *batches) waiting() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.claims))
}

// TestGateFromTheHost: the host's gate decides, its default when it does
// not know the gate.
func TestGateFromTheHost(t *testing.T) {
	known := featuregate.NewFeatureGate()
	if err := known.Add(FeatureSpecs()); err != nil {
		t.Fatal(err)
	}
	off := string(FeaturePersistentVolumeClaimUnusedSinceTime) + "=false"
	if err := known.Set(off); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		fg   featuregate.FeatureGate
		want bool
	}{
		{"set off", known, false},
		{"unknown to the host", featuregate.NewFeatureGate(), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset()
			c, err := newController(descriptor.Context{Name: Name,
				ClientBuilder:   controllertest.ClientBuilder(cs, nil),
				InformerFactory: informers.NewSharedInformerFactory(cs, 0),
				FeatureGate:     tt.fg})
			if err != nil {
				t.Fatal(err)
			}
			c.loop.ShutDown()
			if c.unused != tt.want {
				t.Errorf("Unused condition kept: %v, want %v", c.unused, tt.want)
			}
		})
	}
}
