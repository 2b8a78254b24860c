package legacytokencleaner

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// The tests' time: a pass at t0 with a 30-day period has its cut-off at
// 2025-12-03T03:04:05Z.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	period    = 30 * 24 * time.Hour
	today     = "2026-01-02"
	cutoffDay = "2025-12-03"
	saUID     = "sa-uid"
)

func tracking(since string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system",
		Name: TrackingConfigMap}, Data: map[string]string{}}
	if since != "-" {
		cm.Data[TrackingConfigMapKey] = since
	}
	return cm
}

// token is a generated token of ServiceAccount "sa" in ns, created age
// before t0, with labels (key=value pairs).
func token(name string, age time.Duration, labels ...string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			ResourceVersion: "9", CreationTimestamp: metav1.NewTime(t0.Add(-age)),
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "sa",
				corev1.ServiceAccountUIDKey: saUID}},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	for i := 0; i+1 < len(labels); i += 2 {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[labels[i]] = labels[i+1]
	}
	return s
}

func serviceAccount(secrets ...string) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sa",
		UID: saUID}}
	for _, s := range secrets {
		sa.Secrets = append(sa.Secrets, corev1.ObjectReference{Name: s})
	}
	return sa
}

func podMounting(secret string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-" + secret},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}}}
}

type fixture struct {
	c      *controller
	client *fake.Clientset
	clock  *testingclock.FakeClock
	store  cache.Indexer // the secrets' cache
}

// newFixture caches the objects as the descriptor's informers would
// (pruned) and puts them, with the tracking ConfigMap cm (if any), in the
// fake API.
func newFixture(t *testing.T, cm *corev1.ConfigMap, secrets []*corev1.Secret,
	sas []*corev1.ServiceAccount, pods []*corev1.Pod) *fixture {
	t.Helper()
	d := Descriptor(NewOptions())
	api := controllertest.DeepCopies(secrets...)
	if cm != nil {
		api = append(api, cm)
	}
	f := &fixture{client: fake.NewClientset(api...), clock: testingclock.NewFakeClock(t0)}
	f.store = controllertest.NamespacedIndexer(t, controllertest.Pruned(t, d, secrets...)...)
	f.c = &controller{
		client:  f.client,
		secrets: corelisters.NewSecretLister(f.store),
		serviceAccounts: corelisters.NewServiceAccountLister(
			controllertest.NamespacedIndexer(t, controllertest.Pruned(t, d, sas...)...)),
		pods: corelisters.NewPodLister(
			controllertest.NamespacedIndexer(t, controllertest.Pruned(t, d, pods...)...)),
		period:   period,
		interval: defaultSyncInterval,
		clock:    f.clock,
	}
	return f
}

// writes returns "patch <name> <invalid-since>" and "delete <name>" for
// each write, checking the patch's UID and the delete's precondition.
func (f *fixture) writes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, a := range f.client.Actions() {
		switch a := a.(type) {
		case k8stesting.PatchActionImpl:
			var p corev1.Secret
			if err := json.Unmarshal(a.Patch, &p); err != nil {
				t.Fatal(err)
			}
			if a.PatchType != types.MergePatchType || p.UID != types.UID("uid-"+a.Name) ||
				p.Name != a.Name || p.Namespace != "ns" || len(p.Labels) != 1 {
				t.Errorf("patch of %s: %s %s, want a merge patch of its name, namespace, "+
					"UID and the label", a.Name, a.PatchType, a.Patch)
			}
			out = append(out, "patch "+a.Name+" "+p.Labels[InvalidSinceLabel])
		case k8stesting.DeleteActionImpl:
			pre := a.DeleteOptions.Preconditions
			if pre == nil || pre.ResourceVersion == nil || *pre.ResourceVersion != "9" {
				t.Errorf("delete of %s: preconditions %+v, want resourceVersion 9", a.Name, pre)
			}
			out = append(out, "delete "+a.Name)
		}
	}
	return out
}

func TestPass(t *testing.T) {
	old := 40 * 24 * time.Hour
	deleting := token("t", old)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	opaque := token("t", old)
	opaque.Type = corev1.SecretTypeOpaque
	noSA := token("t", old)
	delete(noSA.Annotations, corev1.ServiceAccountNameKey)
	noUID := token("t", old)
	delete(noUID.Annotations, corev1.ServiceAccountUIDKey)
	otherUID := token("t", old)
	otherUID.Annotations[corev1.ServiceAccountUIDKey] = "another"
	tests := []struct {
		name   string
		secret *corev1.Secret
		sa     *corev1.ServiceAccount // default: one listing "t"
		pod    *corev1.Pod
		want   []string
	}{
		{name: "unused since tracking began: marked", secret: token("t", old),
			want: []string{"patch t " + today}},
		{name: "last used before the cut-off day: marked",
			secret: token("t", old, LastUsedLabel, "2025-12-02"),
			want:   []string{"patch t " + today}},
		{name: "last used on the cut-off day: kept",
			secret: token("t", old, LastUsedLabel, cutoffDay)},
		{name: "last used yesterday: kept", secret: token("t", old, LastUsedLabel, "2026-01-01")},
		{name: "unparsable last use: kept", secret: token("t", old, LastUsedLabel, "lately")},
		{name: "created after the cut-off: kept", secret: token("t", period-time.Second)},
		{name: "created at the cut-off: kept", secret: token("t", period)},
		{name: "created just before the cut-off: marked", secret: token("t", period+time.Second),
			want: []string{"patch t " + today}},
		{name: "being deleted: kept", secret: deleting},
		{name: "not a token: kept", secret: opaque},
		{name: "no ServiceAccount annotation: kept", secret: noSA},
		{name: "no UID annotation: marked", secret: noUID, want: []string{"patch t " + today}},
		{name: "another ServiceAccount's UID: kept", secret: otherUID},
		{name: "ServiceAccount gone: kept", secret: token("t", old),
			sa: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
				Name: "other"}}},
		{name: "not listed by its ServiceAccount: kept", secret: token("t", old),
			sa: serviceAccount("u")},
		{name: "mounted by a pod: kept", secret: token("t", old), pod: podMounting("t")},
		{name: "another secret mounted: marked", secret: token("t", old), pod: podMounting("u"),
			want: []string{"patch t " + today}},
		{name: "invalid since before the cut-off day: deleted",
			secret: token("t", old, InvalidSinceLabel, "2025-12-02"), want: []string{"delete t"}},
		{name: "invalid since the cut-off day: kept",
			secret: token("t", old, InvalidSinceLabel, cutoffDay)},
		{name: "unparsable invalid-since: marked again",
			secret: token("t", old, InvalidSinceLabel, "long ago"),
			want:   []string{"patch t " + today}},
		{name: "invalid long since, used since: kept", secret: token("t", old,
			InvalidSinceLabel, "2025-01-01", LastUsedLabel, "2026-01-01")},
		{name: "invalid long since, mounted: kept",
			secret: token("t", old, InvalidSinceLabel, "2025-01-01"), pod: podMounting("t")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sa := tt.sa
			if sa == nil {
				sa = serviceAccount("t")
			}
			var pods []*corev1.Pod
			if tt.pod != nil {
				pods = append(pods, tt.pod)
			}
			f := newFixture(t, tracking("2020-01-01"), []*corev1.Secret{tt.secret},
				[]*corev1.ServiceAccount{sa}, pods)
			if err := f.c.pass(controllertest.LogContext(t)); err != nil {
				t.Fatal(err)
			}
			if got := f.writes(t); !slices.Equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTrackingGate: nothing is touched until the API server has tracked
// token use for a whole clean-up period, or when its record is missing.
func TestTrackingGate(t *testing.T) {
	// Tracked from midnight after "since"; the pass at t0 acts once that
	// is at least period before t0.
	acts := t0.Add(-period).AddDate(0, 0, -1).Format(dateLayout)
	tooRecent := t0.Add(-period).Format(dateLayout)
	tests := []struct {
		name    string
		cm      *corev1.ConfigMap
		wantErr bool
		want    []string
	}{
		{"tracked long enough", tracking(acts), false, []string{"patch t " + today}},
		{"tracked not long enough", tracking(tooRecent), false, nil},
		{"no ConfigMap", nil, true, nil},
		{"no since", tracking("-"), true, nil},
		{"unparsable since", tracking("yesterday"), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.cm, []*corev1.Secret{token("t", 400*24*time.Hour)},
				[]*corev1.ServiceAccount{serviceAccount("t")}, nil)
			err := f.c.pass(controllertest.LogContext(t))
			if (err != nil) != tt.wantErr {
				t.Errorf("pass error %v, want error %v", err, tt.wantErr)
			}
			if got := f.writes(t); !slices.Equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
		})
	}
	// The boundary: exactly the period after the first tracked midnight.
	f := newFixture(t, tracking("2025-12-01"), []*corev1.Secret{token("t", 400*24*time.Hour)},
		[]*corev1.ServiceAccount{serviceAccount("t")}, nil)
	f.clock.SetTime(time.Date(2025, 12, 2, 0, 0, 0, 0, time.UTC).Add(period - time.Nanosecond))
	if err := f.c.pass(controllertest.LogContext(t)); err != nil || len(f.writes(t)) != 0 {
		t.Fatalf("a nanosecond early: error %v, writes %q", err, f.writes(t))
	}
	f.clock.Step(time.Nanosecond)
	if err := f.c.pass(controllertest.LogContext(t)); err != nil || len(f.writes(t)) != 1 {
		t.Fatalf("on time: error %v, writes %q, want one", err, f.writes(t))
	}
}

// TestWriteErrorsDoNotStopThePass: a failed write is logged, and the
// other tokens are still handled.
func TestWriteErrorsDoNotStopThePass(t *testing.T) {
	old := 400 * 24 * time.Hour
	for _, err := range []error{
		errors.New("boom"),
		apierrors.NewConflict(corev1.Resource("secrets"), "a", errors.New("rv")),
		apierrors.NewNotFound(corev1.Resource("secrets"), "a"),
	} {
		f := newFixture(t, tracking("2020-01-01"), []*corev1.Secret{
			token("a", old, InvalidSinceLabel, "2020-01-01"), token("b", old),
			token("c", old, InvalidSinceLabel, "2020-01-01"), token("d", old)},
			[]*corev1.ServiceAccount{serviceAccount("a", "b", "c", "d")}, nil)
		fail := func(a k8stesting.Action) (bool, runtime.Object, error) {
			name := ""
			switch a := a.(type) {
			case k8stesting.DeleteActionImpl:
				name = a.Name
			case k8stesting.PatchActionImpl:
				name = a.Name
			}
			return name == "a" || name == "b", nil, err
		}
		f.client.PrependReactor("delete", "secrets", fail)
		f.client.PrependReactor("patch", "secrets", fail)
		if err := f.c.pass(controllertest.LogContext(t)); err != nil {
			t.Fatal(err)
		}
		// The cache lists the tokens in no order.
		want := []string{"delete a", "delete c", "patch b " + today, "patch d " + today}
		if got := f.writes(t); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Errorf("%v: writes %q, want %q", err, got, want)
		}
	}
}

// TestRunWithFakeClock: the first pass marks the unused token; the pass a
// period later deletes it; nothing happens between passes.
func TestRunWithFakeClock(t *testing.T) {
	old := 400 * 24 * time.Hour
	f := newFixture(t, tracking("2020-01-01"), []*corev1.Secret{token("t", old)},
		[]*corev1.ServiceAccount{serviceAccount("t")}, nil)
	f.c.synced = []cache.InformerSynced{func() bool { return true }}
	ctx, cancel := context.WithCancel(controllertest.LogContext(t))
	done := make(chan error, 1)
	go func() { done <- f.c.Run(ctx) }()
	passes := func() int { return controllertest.CountActions(f.client, "get", "configmaps") }
	controllertest.WaitFor(t, "the first pass", func() bool {
		return passes() == 1 && f.clock.HasWaiters()
	})
	if got := f.writes(t); !slices.Equal(got, []string{"patch t " + today}) {
		t.Fatalf("first pass wrote %q, want the mark", got)
	}
	// The informer brings the label.
	controllertest.Mirror(t, f.client, f.store, corev1.SchemeGroupVersion.WithResource("secrets"))
	f.clock.Step(defaultSyncInterval - time.Second)
	if passes() != 1 {
		t.Fatal("a pass ran before the interval")
	}
	f.clock.Step(period)
	controllertest.WaitFor(t, "the token deleted", func() bool {
		return slices.Contains(f.writes(t), "delete t")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
