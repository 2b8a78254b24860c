package csrcleaner

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/csr/csrtest"
)

var now = controllertest.Epoch

// request returns a CSR created at created, with conditions of the types
// given, each updated at its time, and cert as its certificate.
func request(name string, created time.Time, cert []byte,
	conds ...cond) *certv1.CertificateSigningRequest {
	r := csrtest.CSR(name, certv1.KubeAPIServerClientSignerName, "u", nil)
	r.CreationTimestamp = metav1.NewTime(created)
	for _, c := range conds {
		csrtest.With(r, c.t, c.at)
	}
	r.Status.Certificate = cert
	return r
}

type cond struct {
	t  certv1.RequestConditionType
	at time.Time
}

func approvedAt(d time.Duration) cond { return cond{certv1.CertificateApproved, now.Add(-d)} }
func deniedAt(d time.Duration) cond   { return cond{certv1.CertificateDenied, now.Add(-d)} }
func failedAt(d time.Duration) cond   { return cond{certv1.CertificateFailed, now.Add(-d)} }

func TestExpired(t *testing.T) {
	ca := csrtest.NewCA(t, "ca", now.Add(-48*time.Hour), now.Add(48*time.Hour))
	valid := ca.Issue(t, "valid", now.Add(-time.Hour), now.Add(time.Hour))
	ended := ca.Issue(t, "ended", now.Add(-2*time.Hour), now.Add(-time.Second))
	created := now.Add(-time.Minute)
	h, m := time.Hour, time.Minute
	zero := cond{certv1.CertificateDenied, time.Time{}}
	tests := []struct {
		name string
		csr  *certv1.CertificateSigningRequest
		want string // "" kept
	}{
		{"pending, fresh", request("r", created, nil), ""},
		{"pending a day and a minute", request("r", now.Add(-24*h-m), nil),
			"pending, created more than a day ago"},
		{"pending exactly a day", request("r", now.Add(-24*h), nil), ""},
		{"issued, approved 61m ago", request("r", created, valid, approvedAt(61*m)),
			"issued, approved more than an hour ago"},
		{"issued, approved 59m ago", request("r", created, valid, approvedAt(59*m)), ""},
		{"issued, expired, approved now", request("r", created, ended, approvedAt(0)),
			"its certificate has expired"},
		{"issued, certificate not parsable", request("r", created, []byte("junk"),
			approvedAt(0)), ""},
		{"denied 61m ago", request("r", created, nil, deniedAt(61*m)),
			"denied more than an hour ago"},
		{"denied now", request("r", created, nil, deniedAt(0)), ""},
		{"denied without a time", request("r", now.Add(-48*h), nil, zero), ""},
		{"failed 61m ago", request("r", created, nil, approvedAt(0), failedAt(61*m)),
			"failed more than an hour ago"},
		{"approved 25h ago, unissued", request("r", created, nil, approvedAt(25*h)),
			"approved more than a day ago and not issued"},
		{"approved 23h ago, unissued", request("r", created, nil, approvedAt(23*h)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expired(tt.csr, now); got != tt.want {
				t.Errorf("expired = %q, want %q", got, tt.want)
			}
		})
	}
}

type fixture struct {
	c      *controller
	client *fake.Clientset
	clock  *testingclock.FakeClock
}

func newFixture(t *testing.T, csrs ...*certv1.CertificateSigningRequest) *fixture {
	t.Helper()
	var objs []runtime.Object
	for _, r := range csrs {
		objs = append(objs, r.DeepCopy())
	}
	f := &fixture{client: fake.NewClientset(objs...), clock: testingclock.NewFakeClock(now)}
	f.c = &controller{client: f.client, clock: f.clock, synced: func() bool { return true },
		csrs: certlisters.NewCertificateSigningRequestLister(
			controllertest.ClusterIndexer(t, csrs...))}
	f.client.ClearActions()
	return f
}

// deleted returns the names deleted, checking their UID preconditions.
func (f *fixture) deleted(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, a := range f.client.Actions() {
		d, ok := a.(k8stesting.DeleteActionImpl)
		if !ok {
			t.Errorf("unexpected %s", a.GetVerb())
			continue
		}
		p := d.DeleteOptions.Preconditions
		if p == nil || p.UID == nil || *p.UID != types.UID("uid-"+d.Name) {
			t.Errorf("delete of %s: preconditions %+v, want its UID", d.Name, p)
		}
		out = append(out, d.Name)
	}
	slices.Sort(out)
	return out
}

// TestPassGoesOnAfterAFailure: a deletion that fails is logged, and the
// others are made.
func TestPassGoesOnAfterAFailure(t *testing.T) {
	created := now.Add(-time.Minute)
	f := newFixture(t,
		request("a", created, nil, deniedAt(2*time.Hour)),
		request("b", created, nil, deniedAt(2*time.Hour)),
		request("c", created, nil, deniedAt(0)),
		request("gone", created, nil, deniedAt(2*time.Hour)))
	f.client.PrependReactor("delete", "certificatesigningrequests",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.(k8stesting.DeleteAction).GetName() == "a" {
				return true, nil, errors.New("boom")
			}
			return false, nil, nil
		})
	if err := f.client.Tracker().Delete(certv1.SchemeGroupVersion.WithResource(
		"certificatesigningrequests"), "", "gone"); err != nil {
		t.Fatal(err)
	}
	f.c.pass(controllertest.LogContext(t))
	if got, want := f.deleted(t), []string{"a", "b", "gone"}; !slices.Equal(got, want) {
		t.Errorf("deleted %q, want %q", got, want)
	}
}

// TestRunPassesAfterSyncThenHourly: nothing is done before the cache has
// synced; a pass follows at once, and the next an hour later.
func TestRunPassesAfterSyncThenHourly(t *testing.T) {
	created := now.Add(-time.Minute)
	f := newFixture(t,
		request("old", created, nil, deniedAt(2*time.Hour)),
		request("soon", created, nil, deniedAt(30*time.Minute)))
	synced := make(chan struct{})
	f.c.synced = func() bool {
		select {
		case <-synced:
			return true
		default:
			return false
		}
	}
	ctx := controllertest.LogContext(t)
	done := make(chan error, 1)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { done <- f.c.Run(runCtx) }()
	if got := f.deleted(t); len(got) != 0 {
		t.Fatalf("deleted %q before the cache synced", got)
	}
	close(synced)
	controllertest.WaitFor(t, "the first pass", func() bool { return len(f.deleted(t)) == 1 })
	controllertest.WaitFor(t, "the wait for the next pass", f.clock.HasWaiters)
	if got := f.deleted(t); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("first pass deleted %q, want old", got)
	}
	f.clock.Step(time.Hour)
	controllertest.WaitFor(t, "the second pass", func() bool {
		return slices.Contains(f.deleted(t), "soon")
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
