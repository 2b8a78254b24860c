package bootstrapsigner

import (
	"errors"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/cluster-bootstrap/token/jws"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	kubeconfig  = "apiVersion: v1\nkind: Config\nclusters: []\n"
	kubeconfig2 = "apiVersion: v1\nkind: Config\nclusters: [{name: b}]\n"
	key         = "kube-public/cluster-info"
)

// token is a bootstrap token Secret of id; usage "" leaves out
// usage-bootstrap-signing; expiration "" leaves out the expiration.
func token(ns, id, usage, expiration string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bootstrap-token-" + id},
		Type:       corev1.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			"token-id":     []byte(id),
			"token-secret": []byte(id + "0123456789"),
		},
	}
	if usage != "" {
		s.Data["usage-bootstrap-signing"] = []byte(usage)
	}
	if expiration != "" {
		s.Data["expiration"] = []byte(expiration)
	}
	return s
}

func signing(id string) *corev1.Secret { return token("kube-system", id, "true", "") }

func at(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }

func clusterInfo(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info",
			ResourceVersion: "7"},
		Data: data,
	}
}

// sig is the signature of content with the token signing(id) holds.
func sig(t *testing.T, content, id string) string {
	t.Helper()
	s, err := jws.ComputeDetachedSignature(content, id, id+"0123456789")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type fixture struct {
	c      *controller
	client *fake.Clientset
	clock  *testingclock.FakeClock
	cms    []*corev1.ConfigMap
}

func newFixture(t *testing.T, cm *corev1.ConfigMap, secrets ...*corev1.Secret) *fixture {
	t.Helper()
	f := &fixture{clock: testingclock.NewFakeClock(t0)}
	if cm != nil {
		f.cms = []*corev1.ConfigMap{cm}
	}
	f.client = fake.NewClientset(controllertest.DeepCopies(f.cms...)...)
	f.c = &controller{
		client:     f.client,
		secrets:    corelisters.NewSecretLister(controllertest.NamespacedIndexer(t, secrets...)),
		configMaps: corelisters.NewConfigMapLister(controllertest.NamespacedIndexer(t, f.cms...)),
		o:          Options{Clock: f.clock}.withDefaults(),
		key:        key,
	}
	f.c.loop = workloop.New("test", f.c.sync, workloop.Options{})
	t.Cleanup(f.c.loop.ShutDown)
	return f
}

// written returns the data of each ConfigMap update.
func (f *fixture) written(t *testing.T) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, a := range f.client.Actions() {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetVerb() != "update" {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		out = append(out, u.GetObject().(*corev1.ConfigMap).Data)
	}
	return out
}

func TestSync(t *testing.T) {
	expiredSigning := token("kube-system", "exprd0", "true", at(-time.Minute))
	unparsable := token("kube-system", "unprs0", "true", "tomorrow")
	opaque := signing("opaqu0")
	opaque.Type = corev1.SecretTypeOpaque
	misnamed := signing("abcdef")
	misnamed.Name = "my-token"
	tests := []struct {
		name    string
		cm      *corev1.ConfigMap
		secrets []*corev1.Secret
		// want is the data written; nil: no write.
		want func(t *testing.T) map[string]string
		// requeue is the delay asked for (the first expiry); 0: none.
		requeue time.Duration
	}{
		{name: "no ConfigMap: nothing", secrets: []*corev1.Secret{signing("abcdef")}},
		{name: "no kubeconfig: nothing, even stale signatures stay",
			cm: clusterInfo(map[string]string{"jws-kubeconfig-gone00": "x"})},
		{name: "a signing token signs", cm: clusterInfo(map[string]string{
			"kubeconfig": kubeconfig, "other": "kept"}),
			secrets: []*corev1.Secret{signing("abcdef")},
			want: func(t *testing.T) map[string]string {
				return map[string]string{"kubeconfig": kubeconfig, "other": "kept",
					"jws-kubeconfig-abcdef": sig(t, kubeconfig, "abcdef")}
			}},
		{name: "signed already: nothing", cm: clusterInfo(map[string]string{
			"kubeconfig": kubeconfig, "jws-kubeconfig-abcdef": sig(t, kubeconfig, "abcdef")}),
			secrets: []*corev1.Secret{signing("abcdef")}},
		{name: "only valid signing tokens of the token namespace sign",
			cm: clusterInfo(map[string]string{"kubeconfig": kubeconfig}),
			secrets: []*corev1.Secret{signing("abcdef"), signing("ghijkl"),
				token("kube-system", "nosign", "false", ""),
				token("kube-system", "nouse0", "", ""),
				expiredSigning, unparsable, opaque, misnamed,
				token("default", "elsewh", "true", ""),
				token("kube-system", "later0", "true", at(time.Hour))},
			want: func(t *testing.T) map[string]string {
				return map[string]string{"kubeconfig": kubeconfig,
					"jws-kubeconfig-abcdef": sig(t, kubeconfig, "abcdef"),
					"jws-kubeconfig-ghijkl": sig(t, kubeconfig, "ghijkl"),
					"jws-kubeconfig-later0": sig(t, kubeconfig, "later0")}
			}, requeue: time.Hour},
		{name: "a gone token's signature is removed",
			cm: clusterInfo(map[string]string{"kubeconfig": kubeconfig,
				"jws-kubeconfig-abcdef": sig(t, kubeconfig, "abcdef"),
				"jws-kubeconfig-gone00": sig(t, kubeconfig, "gone00")}),
			secrets: []*corev1.Secret{signing("abcdef")},
			want: func(t *testing.T) map[string]string {
				return map[string]string{"kubeconfig": kubeconfig,
					"jws-kubeconfig-abcdef": sig(t, kubeconfig, "abcdef")}
			}},
		{name: "an expired token's signature is removed",
			cm: clusterInfo(map[string]string{"kubeconfig": kubeconfig,
				"jws-kubeconfig-exprd0": sig(t, kubeconfig, "exprd0")}),
			secrets: []*corev1.Secret{expiredSigning},
			want: func(*testing.T) map[string]string {
				return map[string]string{"kubeconfig": kubeconfig}
			}},
		{name: "a changed kubeconfig is signed again",
			cm: clusterInfo(map[string]string{"kubeconfig": kubeconfig2,
				"jws-kubeconfig-abcdef": sig(t, kubeconfig, "abcdef")}),
			secrets: []*corev1.Secret{signing("abcdef")},
			want: func(t *testing.T) map[string]string {
				return map[string]string{"kubeconfig": kubeconfig2,
					"jws-kubeconfig-abcdef": sig(t, kubeconfig2, "abcdef")}
			}},
		{name: "an empty kubeconfig is signed",
			cm:      clusterInfo(map[string]string{"kubeconfig": ""}),
			secrets: []*corev1.Secret{signing("abcdef")},
			want: func(t *testing.T) map[string]string {
				return map[string]string{"kubeconfig": "",
					"jws-kubeconfig-abcdef": sig(t, "", "abcdef")}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.cm, tt.secrets...)
			err := f.c.sync(controllertest.LogContext(t), key)
			switch {
			case tt.requeue == 0 && err != nil:
				t.Fatalf("sync error %v", err)
			case tt.requeue != 0 && !errors.Is(err, workloop.RequeueAfter(tt.requeue)):
				t.Errorf("sync error %v, want a requeue after %v", err, tt.requeue)
			}
			got := f.written(t)
			switch {
			case tt.want == nil && len(got) != 0:
				t.Errorf("wrote %v, want nothing", got)
			case tt.want != nil && (len(got) != 1 || !maps.Equal(got[0], tt.want(t))):
				t.Errorf("wrote %v, want one write of %v", got, tt.want(t))
			}
		})
	}
	t.Run("another key is dropped", func(t *testing.T) {
		f := newFixture(t, nil)
		if err := f.c.sync(controllertest.LogContext(t), "default/x"); !workloop.IsPermanent(err) {
			t.Errorf("sync error %v, want a permanent error", err)
		}
	})
}

// TestSignaturesVerify: what is written verifies with cluster-bootstrap's
// check, for the token's own ID and secret only.
func TestSignaturesVerify(t *testing.T) {
	f := newFixture(t, clusterInfo(map[string]string{"kubeconfig": kubeconfig}), signing("abcdef"))
	if err := f.c.sync(controllertest.LogContext(t), key); err != nil {
		t.Fatal(err)
	}
	got := f.written(t)
	if len(got) != 1 {
		t.Fatalf("writes %v, want one", got)
	}
	s := got[0]["jws-kubeconfig-abcdef"]
	if !jws.DetachedTokenIsValid(s, kubeconfig, "abcdef", "abcdef0123456789") {
		t.Errorf("signature %q does not verify", s)
	}
	if jws.DetachedTokenIsValid(s, kubeconfig2, "abcdef", "abcdef0123456789") ||
		jws.DetachedTokenIsValid(s, kubeconfig, "abcdef", "wrong-secret0000") {
		t.Errorf("signature %q verifies another content or secret", s)
	}
}

// TestExpiryWithFakeClock: a signing token that expires later is requeued
// for its expiry, and its signature goes when the clock gets there.
func TestExpiryWithFakeClock(t *testing.T) {
	cm := clusterInfo(map[string]string{"kubeconfig": kubeconfig,
		"jws-kubeconfig-later0": sig(t, kubeconfig, "later0")})
	f := newFixture(t, cm, token("kube-system", "later0", "true", at(time.Hour)))
	ctx := controllertest.LogContext(t)
	if err := f.c.sync(ctx, key); !errors.Is(err, workloop.RequeueAfter(time.Hour)) {
		t.Fatalf("sync error %v, want a requeue after 1h", err)
	}
	if got := f.written(t); len(got) != 0 {
		t.Fatalf("wrote %v before the expiry", got)
	}
	f.clock.Step(time.Hour)
	if err := f.c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	got := f.written(t)
	if len(got) != 1 || !maps.Equal(got[0], map[string]string{"kubeconfig": kubeconfig}) {
		t.Fatalf("wrote %v at the expiry, want the signature removed", got)
	}
}

func TestUpdateErrors(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"conflict: retried", apierrors.NewConflict(corev1.Resource("configmaps"), "cluster-info",
			errors.New("rv")), true},
		{"deleted meanwhile: done", apierrors.NewNotFound(corev1.Resource("configmaps"),
			"cluster-info"), false},
		{"other: retried", errors.New("boom"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, clusterInfo(map[string]string{"kubeconfig": kubeconfig}),
				signing("abcdef"))
			f.client.PrependReactor("update", "configmaps",
				func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tt.err })
			err := f.c.sync(controllertest.LogContext(t), key)
			if (err != nil) != tt.wantErr {
				t.Errorf("sync error %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestFilters(t *testing.T) {
	f := newFixture(t, nil)
	other := clusterInfo(nil)
	other.Namespace = "default"
	opaque := signing("abcdef")
	opaque.Type = corev1.SecretTypeOpaque
	for _, tt := range []struct {
		name       string
		obj        any
		cm, secret bool
	}{
		{"cluster-info", clusterInfo(nil), true, false},
		{"another ConfigMap", other, false, false},
		{"a token", signing("abcdef"), false, true},
		{"a non-signing token", token("kube-system", "abcdef", "", ""), false, true},
		{"a token elsewhere", token("default", "abcdef", "true", ""), false, false},
		{"an opaque Secret", opaque, false, false},
		{"a tombstone of a token", cache.DeletedFinalStateUnknown{Obj: signing("abcdef")},
			false, true},
	} {
		if got := f.c.isSigned(tt.obj); got != tt.cm {
			t.Errorf("%s: isSigned = %v, want %v", tt.name, got, tt.cm)
		}
		if got := f.c.isToken(tt.obj); got != tt.secret {
			t.Errorf("%s: isToken = %v, want %v", tt.name, got, tt.secret)
		}
	}
}
