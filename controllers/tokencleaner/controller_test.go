package tokencleaner

import (
	"errors"
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
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func token(ns, name, expiration string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ns,
			Name:            name,
			UID:             types.UID("uid-" + name),
			ResourceVersion: "5",
		},
		Type: corev1.SecretTypeBootstrapToken,
		Data: map[string][]byte{"token-id": []byte("abcdef")},
	}
	if expiration != "" {
		s.Data[ExpirationKey] = []byte(expiration)
	}
	return s
}

func at(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }

type fixture struct {
	c        *controller
	client   *fake.Clientset
	clock    *testingclock.FakeClock
	requeues controllertest.Requeues
}

// newFixture puts cached in the lister and api (or cached, when api is nil)
// in the fake clientset.
func newFixture(t *testing.T, cached []*corev1.Secret, api []*corev1.Secret) *fixture {
	t.Helper()
	idx := controllertest.NamespacedIndexer(t, cached...)
	if api == nil {
		api = cached
	}
	f := &fixture{
		client: fake.NewClientset(controllertest.DeepCopies(api...)...),
		clock:  testingclock.NewFakeClock(t0),
	}
	f.c = &controller{
		client:    f.client,
		secrets:   corelisters.NewSecretLister(idx),
		namespace: metav1.NamespaceSystem,
		clock:     f.clock,
		after:     f.requeues.AddAfter,
	}
	f.c.loop = workloop.New("test", f.c.sync, workloop.Options{})
	t.Cleanup(f.c.loop.ShutDown)
	return f
}

// deletes returns the deleted names and checks the preconditions against
// the API's copy (UID and resourceVersion).
func (f *fixture) deletes(t *testing.T, wantRV string) []string {
	t.Helper()
	var out []string
	for _, a := range f.client.Actions() {
		d, ok := a.(k8stesting.DeleteActionImpl)
		if !ok {
			continue
		}
		out = append(out, d.Name)
		p := d.DeleteOptions.Preconditions
		if p == nil || p.UID == nil || *p.UID != types.UID("uid-"+d.Name) ||
			p.ResourceVersion == nil ||
			*p.ResourceVersion != wantRV {
			t.Errorf(
				"delete of %s: preconditions %+v, want UID uid-%s and resourceVersion %s",
				d.Name,
				p,
				d.Name,
				wantRV,
			)
		}
	}
	return out
}

func (f *fixture) gets() int { return controllertest.CountActions(f.client, "get", "") }

func TestSync(t *testing.T) {
	renewed := token("kube-system", "bootstrap-token-abcdef", at(time.Hour))
	renewed.ResourceVersion = "6"
	opaque := token("kube-system", "bootstrap-token-abcdef", at(-time.Hour))
	opaque.Type = corev1.SecretTypeOpaque
	tests := []struct {
		name        string
		cached      []*corev1.Secret
		api         []*corev1.Secret
		deleteErr   error
		wantGets    int
		wantDeleted bool
		wantRequeue time.Duration // 0: none
		wantErr     bool
	}{
		{
			name: "expired: read again and deleted",
			cached: []*corev1.Secret{
				token("kube-system", "bootstrap-token-abcdef", at(-time.Second)),
			},
			wantGets:    1,
			wantDeleted: true,
		},
		{
			name:        "expires exactly now",
			cached:      []*corev1.Secret{token("kube-system", "bootstrap-token-abcdef", at(0))},
			wantGets:    1,
			wantDeleted: true,
		},
		{
			name: "not expired: requeued for its expiry",
			cached: []*corev1.Secret{
				token("kube-system", "bootstrap-token-abcdef", at(90*time.Minute)),
			},
			wantRequeue: 90 * time.Minute,
		},
		{
			name:   "no expiration: kept",
			cached: []*corev1.Secret{token("kube-system", "bootstrap-token-abcdef", "")},
		},
		{
			name: "unparsable expiration: deleted as in KCM",
			cached: []*corev1.Secret{
				token("kube-system", "bootstrap-token-abcdef", "next tuesday"),
			},
			wantGets:    1,
			wantDeleted: true,
		},
		{
			name:   "other namespace: kept",
			cached: []*corev1.Secret{token("default", "bootstrap-token-abcdef", at(-time.Hour))},
		},
		{name: "other type: kept", cached: []*corev1.Secret{opaque}},
		{
			name: "renewed since cached: kept and requeued",
			cached: []*corev1.Secret{
				token("kube-system", "bootstrap-token-abcdef", at(-time.Hour)),
			},
			api:         []*corev1.Secret{renewed},
			wantGets:    1,
			wantRequeue: time.Hour,
		},
		{
			name: "gone from the API",
			cached: []*corev1.Secret{
				token("kube-system", "bootstrap-token-abcdef", at(-time.Hour)),
			},
			api:      []*corev1.Secret{},
			wantGets: 1,
		},
		{name: "gone from the cache"},
		{
			name: "changed between read and delete: retried",
			cached: []*corev1.Secret{
				token("kube-system", "bootstrap-token-abcdef", at(-time.Hour)),
			},
			deleteErr: apierrors.NewConflict(
				corev1.Resource("secrets"),
				"bootstrap-token-abcdef",
				errors.New("rv"),
			),
			wantGets:    1,
			wantDeleted: true,
			wantErr:     true,
		},
		{
			name: "deleted meanwhile",
			cached: []*corev1.Secret{
				token("kube-system", "bootstrap-token-abcdef", at(-time.Hour)),
			},
			deleteErr: apierrors.NewNotFound(
				corev1.Resource("secrets"),
				"bootstrap-token-abcdef",
			),
			wantGets:    1,
			wantDeleted: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.cached, tt.api)
			if tt.deleteErr != nil {
				f.client.PrependReactor(
					"delete",
					"secrets",
					func(k8stesting.Action) (bool, runtime.Object, error) {
						return true, nil, tt.deleteErr
					},
				)
			}
			ns := "kube-system"
			if len(tt.cached) > 0 {
				ns = tt.cached[0].Namespace
			}
			err := f.c.sync(controllertest.LogContext(t), ns+"/bootstrap-token-abcdef")
			if (err != nil) != tt.wantErr {
				t.Errorf("sync error %v, want error %v", err, tt.wantErr)
			}
			if got := f.gets(); got != tt.wantGets {
				t.Errorf("GETs %d, want %d", got, tt.wantGets)
			}
			if got := f.deletes(t, "5"); (len(got) == 1) != tt.wantDeleted {
				t.Errorf("deletes %v, want deleted %v", got, tt.wantDeleted)
			}
			switch {
			case tt.wantRequeue == 0 && len(f.requeues) != 0:
				t.Errorf("requeued %v, want none", f.requeues)
			case tt.wantRequeue != 0 && (len(f.requeues) != 1 || f.requeues[0].After != tt.wantRequeue || f.requeues[0].Key != ns+"/bootstrap-token-abcdef"):
				t.Errorf("requeued %v, want one after %v", f.requeues, tt.wantRequeue)
			}
		})
	}
	t.Run("malformed key is dropped", func(t *testing.T) {
		f := newFixture(t, nil, nil)
		if err := f.c.sync(controllertest.LogContext(t), "a/b/c"); !workloop.IsPermanent(err) {
			t.Errorf("sync error %v, want a permanent error", err)
		}
	})
}

// TestExpiryWithFakeClock: a token is requeued for its expiry and deleted
// when the clock gets there.
func TestExpiryWithFakeClock(t *testing.T) {
	f := newFixture(
		t,
		[]*corev1.Secret{token("kube-system", "bootstrap-token-abcdef", at(time.Hour))},
		nil,
	)
	ctx := controllertest.LogContext(t)
	key := "kube-system/bootstrap-token-abcdef"
	if err := f.c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	if len(f.requeues) != 1 || f.requeues[0].After != time.Hour {
		t.Fatalf("requeues %v, want one after 1h", f.requeues)
	}
	f.clock.Step(time.Hour - time.Second)
	if err := f.c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	if len(f.deletes(t, "5")) != 0 || len(f.requeues) != 2 || f.requeues[1].After != time.Second {
		t.Fatalf("one second early: deletes %v requeues %v", f.deletes(t, "5"), f.requeues)
	}
	f.clock.Step(time.Second)
	if err := f.c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := f.deletes(t, "5"); len(got) != 1 {
		t.Fatalf("at expiry: deletes %v, want one", got)
	}
}

func TestFilter(t *testing.T) {
	opaque := token("kube-system", "x", "")
	opaque.Type = corev1.SecretTypeOpaque
	tests := []struct {
		name string
		obj  any
		want bool
	}{
		{"token in kube-system", token("kube-system", "x", ""), true},
		{"token elsewhere", token("default", "x", ""), false},
		{"opaque secret", opaque, false},
		{"not a secret", &corev1.ConfigMap{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, nil)
			if got := f.c.isToken(tt.obj); got != tt.want {
				t.Errorf("isToken = %v, want %v", got, tt.want)
			}
		})
	}
}
