package ctbpublisher

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func bundle(name, signer, content string) *certv1.ClusterTrustBundle {
	return &certv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: content}}
}

func TestBundleNameIsKCMs(t *testing.T) {
	sum := sha256.Sum256([]byte(testCA))
	want := fmt.Sprintf("kubernetes.io:kube-apiserver-serving:%x", sum[:12])
	if got := BundleName([]byte(testCA)); got != want {
		t.Errorf("BundleName = %q, want %q", got, want)
	}
}

func TestSync(t *testing.T) {
	ours := BundleName([]byte(testCA))
	old := "kubernetes.io:kube-apiserver-serving:0123456789ab0123456789ab"
	other := bundle("example.com:signer:abc", "example.com/signer", "x")
	unsigned := bundle("plain", "", "x")
	fail := func(verb string) func(k8stesting.Action) (bool, runtime.Object, error) {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			if d, ok := a.(k8stesting.DeleteAction); ok && d.GetName() == "gone" {
				return true, nil, apierrors.NewNotFound(bundles.GroupResource(), "gone")
			}
			if d, ok := a.(k8stesting.DeleteAction); ok && d.GetName() != "stuck" {
				return false, nil, nil
			}
			return true, nil, apierrors.NewInternalError(errors.New(verb + " failed"))
		}
	}
	tests := []struct {
		name    string
		objs    []*certv1.ClusterTrustBundle
		fail    string // the verb that fails
		want    []string
		wantErr string
	}{
		{name: "none: created", objs: []*certv1.ClusterTrustBundle{other, unsigned},
			want: []string{"create " + ours}},
		{name: "there: nothing",
			objs: []*certv1.ClusterTrustBundle{bundle(ours, SignerName, testCA), other}},
		{name: "wrong content: corrected",
			objs: []*certv1.ClusterTrustBundle{bundle(ours, SignerName, "stale")},
			want: []string{"update " + ours}},
		{name: "the signer's others: deleted, other signers' kept",
			objs: []*certv1.ClusterTrustBundle{bundle(old, SignerName, "old"), other, unsigned},
			want: []string{"create " + ours, "delete " + old}},
		{name: "a failed create: retried, nothing deleted",
			objs: []*certv1.ClusterTrustBundle{bundle(old, SignerName, "old")}, fail: "create",
			want: []string{"create " + ours}, wantErr: "creating ClusterTrustBundle " + ours},
		{name: "a failed update: retried",
			objs: []*certv1.ClusterTrustBundle{bundle(ours, SignerName, "stale")}, fail: "update",
			want: []string{"update " + ours}, wantErr: "updating ClusterTrustBundle " + ours},
		{name: "a failed deletion: the others go on, retried",
			objs: []*certv1.ClusterTrustBundle{bundle(ours, SignerName, testCA),
				bundle("stuck", SignerName, "a"), bundle("gone", SignerName, "b"),
				bundle(old, SignerName, "c")}, fail: "delete",
			want:    []string{"delete gone", "delete " + old, "delete stuck"},
			wantErr: "deleting ClusterTrustBundle stuck"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seed []runtime.Object
			for _, o := range tt.objs {
				seed = append(seed, o.DeepCopy())
			}
			client := fake.NewClientset(seed...)
			client.ClearActions()
			if tt.fail != "" {
				client.PrependReactor(tt.fail, "clustertrustbundles", fail(tt.fail))
			}
			reg := prometheus.NewPedanticRegistry()
			m, err := metricsOn(reg)
			if err != nil {
				t.Fatal(err)
			}
			c := &controller{client: client, ca: testCA, metrics: m,
				bundles: certlisters.NewClusterTrustBundleLister(
					controllertest.ClusterIndexer(t, tt.objs...))}
			err = c.sync(controllertest.LogContext(t), key)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" &&
				(err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("sync = %v, want error %q", err, tt.wantErr)
			}
			var got []string
			for _, a := range client.Actions() {
				switch a := a.(type) {
				case k8stesting.CreateActionImpl:
					b := a.GetObject().(*certv1.ClusterTrustBundle)
					if b.Spec.SignerName != SignerName || b.Spec.TrustBundle != testCA {
						t.Errorf("created %+v", b.Spec)
					}
					got = append(got, "create "+b.Name)
				case k8stesting.UpdateActionImpl:
					b := a.GetObject().(*certv1.ClusterTrustBundle)
					if b.Spec.TrustBundle != testCA {
						t.Errorf("updated to %q", b.Spec.TrustBundle)
					}
					got = append(got, "update "+b.Name)
				case k8stesting.DeleteActionImpl:
					got = append(got, "delete "+a.GetName())
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
			code := "200"
			if tt.wantErr != "" {
				code = "500"
			}
			if n := count(t, m.syncs.WithLabelValues(code)); n != 1 {
				t.Errorf("clustertrustbundle_publisher_sync_total{code=%q} = %v, want 1", code, n)
			}
		})
	}
}

func TestMetricsCodes(t *testing.T) {
	m, err := metricsOn(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.observe(time.Now(), apierrors.NewConflict(bundles.GroupResource(), "x", errors.New("rv")))
	m.observe(time.Now(), fmt.Errorf("wrapped: %w", apierrors.NewForbidden(bundles.GroupResource(),
		"x", errors.New("no"))))
	m.observe(time.Now(), errors.New("plain"))
	for code, want := range map[string]float64{"409": 1, "403": 1, "500": 1, "200": 0} {
		if got := count(t, m.syncs.WithLabelValues(code)); got != want {
			t.Errorf("sync_total{code=%q} = %v, want %v", code, got, want)
		}
	}
	// A second term registers on the same registry: it shares the first's.
	reg := prometheus.NewPedanticRegistry()
	first, err := metricsOn(reg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := metricsOn(reg)
	if err != nil {
		t.Fatal(err)
	}
	second.observe(time.Now(), nil)
	if got := count(t, first.syncs.WithLabelValues("200")); got != 1 {
		t.Errorf("the second term counted apart: %v", got)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, fmt.Sprintf("%s(%d)", f.GetName(), len(f.GetMetric())))
	}
	want := []string{"clustertrustbundle_publisher_sync_duration_seconds(1)",
		"clustertrustbundle_publisher_sync_total(1)"}
	if !slices.Equal(names, want) {
		t.Errorf("gathered %q, want KCM's two metrics, one series each: %q", names, want)
	}
}

func TestFilter(t *testing.T) {
	for _, tt := range []struct {
		obj  any
		want bool
	}{
		{bundle("a", SignerName, ""), true},
		{bundle("a", "example.com/other", ""), false},
		{bundle("a", "", ""), false},
		{"garbage", false},
	} {
		if got := ofSigner(nil, tt.obj); got != tt.want {
			t.Errorf("ofSigner(%v) = %v, want %v", tt.obj, got, tt.want)
		}
	}
}

func TestBundlesServed(t *testing.T) {
	v1 := func(resources ...string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: "certificates.k8s.io/v1"}
		for _, r := range resources {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: r})
		}
		return l
	}
	for _, tt := range []struct {
		name    string
		lists   []*metav1.APIResourceList
		err     error
		want    bool
		wantErr bool
	}{
		{name: "served", lists: []*metav1.APIResourceList{
			v1("certificatesigningrequests", "clustertrustbundles")}, want: true},
		{name: "the group version without them", lists: []*metav1.APIResourceList{
			v1("certificatesigningrequests")}},
		{name: "no such group version"},
		{name: "discovery failing", err: apierrors.NewServiceUnavailable("later"), wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.Resources = tt.lists
			if tt.err != nil {
				client.PrependReactor("get", "resource",
					func(k8stesting.Action) (bool, runtime.Object, error) {
						return true, nil, tt.err
					})
			}
			got, err := bundlesServed(client)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("bundlesServed = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// count is a counter's value.
func count(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
