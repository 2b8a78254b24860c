//go:build integration

package differential_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/controllers/servicecidr"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// The scenario's ranges, apart from the API server's default ServiceCIDR
// (testenv.ServiceClusterIPRange): "extra" holds the Service's address,
// "child" lies inside "extra", "kept" stays. Both sides use the same
// ranges, one after the other: Cleanup waits for a side's ServiceCIDRs to
// be gone.
const (
	scExtraRange = "10.100.0.0/24"
	scChildRange = "10.100.0.0/25"
	scKeptRange  = "10.101.0.0/24"
	scHeldIP     = "10.100.0.10"
	scSeen       = "seen" // the ConfigMap where Act writes what it saw
)

// TestServiceCIDR: new ServiceCIDRs get the finalizer and Ready=True; one
// deleted inside a larger one goes (after the 10s grace) although an
// address in it is allocated; the larger one, deleted while that address
// is allocated and only it holds it, stays with Ready=False (Terminating)
// until the Service goes, then goes.
func TestServiceCIDR(t *testing.T) {
	if testenv.ServiceClusterIPRange != "10.0.0.0/24" {
		t.Fatalf("testenv's service range is %s: move the scenario's ranges apart from it",
			testenv.ServiceClusterIPRange)
	}
	byNS := func(ns string) metav1.ListOptions {
		return metav1.ListOptions{LabelSelector: "differential=" + ns}
	}
	serviceCIDR := func(ns, name, cidr string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name,
				Labels: map[string]string{"differential": ns}},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{cidr}},
		}
	}
	ready := func(sc *networkingv1.ServiceCIDR) *metav1.Condition {
		return apimeta.FindStatusCondition(sc.Status.Conditions,
			networkingv1.ServiceCIDRConditionReady)
	}
	kept := func(sc *networkingv1.ServiceCIDR) bool {
		c := ready(sc)
		return slices.Contains(sc.Finalizers, servicecidr.Finalizer) && c != nil &&
			c.Status == metav1.ConditionTrue
	}
	res := compare(t, differential.Scenario{
		Name:       "service-cidr keeps, blocks and releases",
		Controller: servicecidr.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for name, cidr := range map[string]string{"extra": scExtraRange,
				"child": scChildRange, "kept": scKeptRange} {
				if _, err := cs.NetworkingV1().ServiceCIDRs().Create(ctx,
					serviceCIDR(ns, name, cidr), metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: scSeen}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			// The API server's allocators take up a new ServiceCIDR (one
			// without a Ready condition counts as ready) once their
			// informer has it: until then the address is out of range.
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "held"},
				Spec: corev1.ServiceSpec{ClusterIP: scHeldIP,
					Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
			var lastErr error
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true,
				func(ctx context.Context) (bool, error) {
					_, lastErr = cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
					return lastErr == nil, nil
				})
			if err != nil {
				return fmt.Errorf("creating a Service at %s: %w (last: %v)", scHeldIP, err, lastErr)
			}
			return nil
		},
		// Step by step, each once, as what it waits for is seen (and
		// written down in the ConfigMap): delete the child once both are
		// kept; the extra one once the child is gone; the Service once the
		// extra one is seen blocked.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			cidrs := cs.NetworkingV1().ServiceCIDRs()
			cms := cs.CoreV1().ConfigMaps(ns)
			seen, err := cms.Get(ctx, scSeen, metav1.GetOptions{})
			if err != nil {
				return err
			}
			note := func(key, value string) error {
				if seen.Data == nil {
					seen.Data = map[string]string{}
				}
				seen.Data[key] = value
				_, err := cms.Update(ctx, seen, metav1.UpdateOptions{})
				return err
			}
			extra, err := cidrs.Get(ctx, ns+"-extra", metav1.GetOptions{})
			if err != nil {
				return err
			}
			child, err := cidrs.Get(ctx, ns+"-child", metav1.GetOptions{})
			childGone := apierrors.IsNotFound(err)
			if err != nil && !childGone {
				return err
			}
			switch {
			case seen.Data["child"] == "":
				if childGone || !kept(child) || !kept(extra) {
					return nil
				}
				if err := cidrs.Delete(ctx, child.Name, metav1.DeleteOptions{}); err != nil {
					return err
				}
				return note("child", "deleted while both were kept and Ready")
			case seen.Data["extra"] == "":
				if !childGone {
					return nil
				}
				if err := cidrs.Delete(ctx, extra.Name, metav1.DeleteOptions{}); err != nil {
					return err
				}
				return note("extra", "deleted once the child had gone")
			case seen.Data["blocked"] == "":
				c := ready(extra)
				if c == nil || c.Status != metav1.ConditionFalse ||
					!slices.Contains(extra.Finalizers, servicecidr.Finalizer) {
					return nil
				}
				if err := cs.CoreV1().Services(ns).Delete(ctx, "held",
					metav1.DeleteOptions{}); err != nil {
					return err
				}
				return note("blocked", fmt.Sprintf("Ready=%s reason=%s message=%s",
					c.Status, c.Reason, c.Message))
			}
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			l, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, byNS(ns))
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "ServiceCIDR"
			}
			seen, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, scSeen, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			seen.Kind = "ConfigMap"
			return append(objects(l.Items,
				func(s *networkingv1.ServiceCIDR) runtime.Object { return s }), seen), nil
		},
		// The kept ServiceCIDR alone, after the extra one was seen blocked.
		Settled: func(state []map[string]any) bool {
			if count(state, "ServiceCIDR") != 1 {
				return false
			}
			for _, o := range state {
				if data, _ := o["data"].(map[string]any); o["kind"] == "ConfigMap" &&
					data["blocked"] != nil {
					return true
				}
			}
			return false
		},
		// No controller is left to take the finalizers off; the next side
		// uses the same ranges, so this one's must be gone.
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			err := cs.CoreV1().Services(ns).Delete(ctx, "held", metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			cidrs := cs.NetworkingV1().ServiceCIDRs()
			return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true,
				func(ctx context.Context) (bool, error) {
					l, err := cidrs.List(ctx, byNS(ns))
					if err != nil {
						return false, err
					}
					for i := range l.Items {
						sc := &l.Items[i]
						if len(sc.Finalizers) > 0 {
							sc.Finalizers = nil
							_, err := cidrs.Update(ctx, sc, metav1.UpdateOptions{})
							if err != nil && !apierrors.IsNotFound(err) &&
								!apierrors.IsConflict(err) {
								return false, err
							}
						}
						err := cidrs.Delete(ctx, sc.Name, metav1.DeleteOptions{})
						if err != nil && !apierrors.IsNotFound(err) {
							return false, err
						}
					}
					return len(l.Items) == 0, nil
				})
		},
	})
	// Both agree; say what they agree on.
	want := map[string][]string{
		"<ns>-kept": {`"finalizers":["networking.k8s.io/service-cidr-finalizer"]`,
			`"message":"Kubernetes Service CIDR is ready"`, `"status":"True"`},
		"seen": {"Ready=False reason=Terminating message=There are still IPAddresses " +
			"referencing the ServiceCIDR"},
	}
	for _, o := range res.Native {
		md, _ := o["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		b, _ := json.Marshal(o)
		if len(want[name]) == 0 || slices.ContainsFunc(want[name],
			func(w string) bool { return !strings.Contains(string(b), w) }) {
			t.Errorf("native side ended with %s", b)
		}
		delete(want, name)
	}
	if len(want) > 0 {
		t.Errorf("native side lacks %v", want)
	}
}
