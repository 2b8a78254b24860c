//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	genericfeatures "k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storageversion"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/storageversiongc"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// svgcIdentity labels an API server's identity lease.
const svgcIdentity = "apiserver.kubernetes.io/identity"

// TestStorageVersionGC: on an API server of its own that serves the alpha
// StorageVersion API, with StorageVersionAPI on for both sides (KCM and
// ctrlhost leave the controller off by default), entries of API servers
// without an identity lease go (and a StorageVersion with none left), an
// identity lease of another component does not count, and the entries of
// an API server whose lease is deleted go then.
func TestStorageVersionGC(t *testing.T) {
	ctx := t.Context()
	r, e := gatedRunner(t, genericfeatures.StorageVersionAPI, storageversiongc.FeatureSpecs(),
		"internal.apiserver.k8s.io/v1alpha1")

	byNS := func(ns string) metav1.ListOptions {
		return metav1.ListOptions{LabelSelector: "differential=" + ns}
	}
	lease := func(ns, name, component string) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: ns + "-" + name,
				Labels: map[string]string{svgcIdentity: component, "differential": ns}},
			Spec: coordinationv1.LeaseSpec{RenewTime: &now,
				LeaseDurationSeconds: ptr.To[int32](3600)},
		}
	}
	// The StorageVersions, by resource, and the API servers of their
	// entries: "ghost" has no lease, "scheduler" has the lease of another
	// component, "leaving" loses its lease once the controller has acted.
	entries := map[string][]string{
		"alphas":   {"live", "ghost"},
		"betas":    {"ghost"},
		"gammas":   {"live", "leaving"},
		"deltas":   {"live", "scheduler"},
		"epsilons": {"leaving"},
	}
	svName := func(ns, resource string) string { return ns + ".example.com." + resource }
	get := func(ctx context.Context, cs kubernetes.Interface,
		name string) (*apiserverinternalv1alpha1.StorageVersion, error) {
		return cs.InternalV1alpha1().StorageVersions().Get(ctx, name, metav1.GetOptions{})
	}
	sc := differential.Scenario{
		Name:       "storageversion-gc collects entries of API servers that are gone",
		Controller: storageversiongc.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, l := range []*coordinationv1.Lease{lease(ns, "live", "kube-apiserver"),
				lease(ns, "leaving", "kube-apiserver"), lease(ns, "scheduler", "kube-scheduler")} {
				if _, err := cs.CoordinationV1().Leases(l.Namespace).Create(ctx, l,
					metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			svs := cs.InternalV1alpha1().StorageVersions()
			for resource, ids := range entries {
				sv, err := svs.Create(ctx, &apiserverinternalv1alpha1.StorageVersion{
					ObjectMeta: metav1.ObjectMeta{Name: svName(ns, resource),
						Labels: map[string]string{"differential": ns}},
				}, metav1.CreateOptions{})
				if err != nil {
					return err
				}
				for i, id := range ids {
					v := fmt.Sprintf("example.com/v%d", i+1)
					sv.Status.StorageVersions = append(sv.Status.StorageVersions,
						apiserverinternalv1alpha1.ServerStorageVersion{APIServerID: ns + "-" + id,
							EncodingVersion: v, DecodableVersions: []string{v}})
				}
				storageversion.SetCommonEncodingVersion(sv)
				if _, err := svs.UpdateStatus(ctx, sv, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		// Once the controller has acted on what it found (the ghost's
		// entries gone), the leaving API server's lease goes.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			alphas, err := get(ctx, cs, svName(ns, "alphas"))
			if err != nil || len(alphas.Status.StorageVersions) != 1 {
				return err
			}
			if _, err := get(ctx, cs, svName(ns, "betas")); !apierrors.IsNotFound(err) {
				return nil
			}
			err = cs.CoordinationV1().Leases(metav1.NamespaceSystem).Delete(ctx, ns+"-leaving",
				metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			svs, err := cs.InternalV1alpha1().StorageVersions().List(ctx, byNS(ns))
			if err != nil {
				return nil, err
			}
			leases, err := cs.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctx, byNS(ns))
			if err != nil {
				return nil, err
			}
			out := make([]runtime.Object, 0, len(svs.Items)+len(leases.Items))
			for i := range svs.Items {
				svs.Items[i].Kind = "StorageVersion"
				out = append(out, &svs.Items[i])
			}
			for i := range leases.Items {
				leases.Items[i].Kind = "Lease"
				out = append(out, &leases.Items[i])
			}
			return out, nil
		},
		// alphas, gammas and deltas, each with the live API server's entry
		// alone; the live and the scheduler's leases.
		Settled: func(state []map[string]any) bool {
			if count(state, "StorageVersion") != 3 || count(state, "Lease") != 2 {
				return false
			}
			for _, o := range state {
				status, _ := o["status"].(map[string]any)
				if e, _ := status["storageVersions"].([]any); o["kind"] == "StorageVersion" &&
					len(e) != 1 {
					return false
				}
			}
			return true
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			svs := cs.InternalV1alpha1().StorageVersions()
			if err := svs.DeleteCollection(ctx, metav1.DeleteOptions{}, byNS(ns)); err != nil {
				return err
			}
			return cs.CoordinationV1().Leases(metav1.NamespaceSystem).DeleteCollection(ctx,
				metav1.DeleteOptions{}, byNS(ns))
		},
	}
	// The API server publishes its own StorageVersions before it lets
	// writes of a resource through: wait for the resources the scenario
	// writes.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true,
		func(ctx context.Context) (bool, error) {
			cs, err := kubernetes.NewForConfig(e.Config())
			if err != nil {
				return false, err
			}
			for _, name := range []string{"coordination.k8s.io.leases",
				"internal.apiserver.k8s.io.storageversions", "core.namespaces"} {
				if _, err := get(ctx, cs, name); err != nil {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
		t.Fatalf("the API server's own StorageVersions: %v", err)
	}
	start := time.Now()
	res, err := r.Run(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	// Both agree; say what they agree on.
	var got []string
	for _, o := range res.Native {
		md, _ := o["metadata"].(map[string]any)
		status, _ := o["status"].(map[string]any)
		e, _ := status["storageVersions"].([]any)
		ids := ""
		for _, x := range e {
			ids += fmt.Sprint(x.(map[string]any)["apiServerID"])
		}
		got = append(got, fmt.Sprintf("%s %s %s %v", o["kind"], md["name"], ids,
			status["commonEncodingVersion"]))
	}
	want := []string{
		"Lease <ns>-live  <nil>", "Lease <ns>-scheduler  <nil>",
		"StorageVersion <ns>.example.com.alphas <ns>-live example.com/v1",
		"StorageVersion <ns>.example.com.deltas <ns>-live example.com/v1",
		"StorageVersion <ns>.example.com.gammas <ns>-live example.com/v1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("native side ended with\n%s\nwant\n%s", strings.Join(got, "\n"),
			strings.Join(want, "\n"))
	}
}
