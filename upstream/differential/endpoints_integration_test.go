//go:build integration

package differential_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/controllers/endpoints"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

func endpointsIn(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	l, err := cs.CoreV1().Endpoints(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for i := range l.Items {
		l.Items[i].Kind = "Endpoints"
		// Both controllers order subsets by a hash of their content, which
		// includes the pods' UIDs, different on each side: the order is
		// compared canonically (by ports, then addresses) instead.
		slices.SortFunc(l.Items[i].Subsets, func(a, b corev1.EndpointSubset) int {
			return strings.Compare(subsetKey(a), subsetKey(b))
		})
		// An over-capacity object is rewritten at every sync, by KCM too,
		// and each rewrite sets the trigger-time annotation only if the
		// sync saw a change since the one before (the tracker answers zero
		// otherwise): whether it is there at the end depends on how the
		// pod events were batched into syncs on each side, not on what
		// either controller does. Its presence is compared elsewhere.
		if _, over := l.Items[i].Annotations[corev1.EndpointsOverCapacity]; over {
			delete(l.Items[i].Annotations, corev1.EndpointsLastChangeTriggerTime)
		}
		out = append(out, &l.Items[i])
	}
	ev, err := epEvents(ctx, cs, ns)
	if err != nil {
		return nil, err
	}
	return append(out, ev), nil
}

func subsetKey(s corev1.EndpointSubset) string {
	var b strings.Builder
	for _, p := range s.Ports {
		fmt.Fprintf(&b, "%s/%d/%s;", p.Name, p.Port, p.Protocol)
	}
	for _, a := range s.Addresses {
		b.WriteString(a.IP + ",")
	}
	b.WriteString("|")
	for _, a := range s.NotReadyAddresses {
		b.WriteString(a.IP + ",")
	}
	return b.String()
}

func objectJSON(state []map[string]any, kind, name string) string {
	for _, o := range state {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == kind && md["name"] == name {
			b, _ := json.Marshal(o)
			return string(b)
		}
	}
	return ""
}

func hasObject(state []map[string]any, kind, name string) bool {
	for _, o := range state {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == kind && md["name"] == name {
			return true
		}
	}
	return false
}

// TestEndpointsServices: the Endpoints of ClusterIP, headless (addresses
// without ports, hostname), publishNotReadyAddresses and appProtocol
// Services over ready, not-ready, terminating, unstarted and finished pods,
// one resolving the named target port to another number (its own subset);
// a hand-written Endpoints of a selectorless Service is left alone; an
// ExternalName Service gets none; the Endpoints of a Service deleted while
// the controller runs, and a stray Endpoints without a Service, are
// deleted. Compares every Endpoints object (labels incl. managed-by and
// headless, annotations, subsets) and the event reasons.
func TestEndpointsServices(t *testing.T) {
	res := compare(t, differential.Scenario{
		Name: "endpoints of services", Controller: endpoints.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := epSetup(ctx, cs, ns, epPods()); err != nil {
				return err
			}
			if _, err := cs.CoreV1().Services(ns).Create(ctx, epService("doomed", map[string]string{"app": "web"}, nil,
				epPort("", 80, intstr.FromInt32(8080))), metav1.CreateOptions{}); err != nil {
				return err
			}
			manual := func(name string) *corev1.Endpoints {
				return &corev1.Endpoints{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"by": "hand"}},
					Subsets: []corev1.EndpointSubset{{
						Addresses: []corev1.EndpointAddress{{IP: "192.0.2.50"}},
						Ports:     []corev1.EndpointPort{{Port: 8080, Protocol: corev1.ProtocolTCP}},
					}},
				}
			}
			for _, name := range []string{"nosel", "stray"} {
				if _, err := cs.CoreV1().Endpoints(ns).Create(ctx, manual(name), metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		}),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := epReadyOnce(ctx, cs, ns, "web-1", "10.1.0.11"); err != nil {
				return err
			}
			if err := epDeleteOnce(ctx, cs, ns, "web-2"); err != nil {
				return err
			}
			// The Service goes once its Endpoints exist.
			if _, err := cs.CoreV1().Endpoints(ns).Get(ctx, "doomed", metav1.GetOptions{}); err == nil {
				if err := cs.CoreV1().Services(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		},
		Observe: endpointsIn,
		Settled: func(state []map[string]any) bool {
			return hasObject(state, "Endpoints", "web") && hasObject(state, "Endpoints", "headless") &&
				hasObject(state, "Endpoints", "publish") && hasObject(state, "Endpoints", "appproto") &&
				hasObject(state, "Endpoints", "nosel") &&
				!hasObject(state, "Endpoints", "doomed") && !hasObject(state, "Endpoints", "stray") &&
				!stateHas(state, "Endpoints", `"notReadyAddresses"`)
		},
		Cleanup: epCleanup,
	})
	if !hasObject(res.Native, "Endpoints", "nosel") || hasObject(res.Native, "Endpoints", "external") {
		t.Errorf("native side: the selectorless Service's Endpoints must stay and the ExternalName Service must get none")
	}
	// What the scenario is about, on the native side (the upstream side
	// equals it): web lists web-0, web-1 and web-5 (two port numbers for
	// "http", so two subsets) but not the terminating web-2; publish lists
	// web-2 too; headless has web-0's hostname.
	for _, c := range []struct {
		name       string
		has, hasNo []string
	}{
		{"web", []string{`"web-0"`, `"web-1"`, `"web-5"`, `"port":8081`, `"port":8080`, `"port":9090`}, []string{`"web-2"`, `"web-3"`, `"web-4"`, `"other"`}},
		{"publish", []string{`"web-0"`, `"web-1"`, `"web-2"`, `"web-5"`}, []string{`"web-3"`, `"web-4"`}},
		{"headless", []string{`"hostname":"web-0"`, `"service.kubernetes.io/headless":""`}, []string{`"ports"`}},
		{"appproto", []string{`"appProtocol":"kubernetes.io/h2c"`}, nil},
	} {
		j := objectJSON(res.Native, "Endpoints", c.name)
		for _, h := range c.has {
			if !strings.Contains(j, h) {
				t.Errorf("native Endpoints %s lacks %s: %s", c.name, h, j)
			}
		}
		for _, h := range c.hasNo {
			if strings.Contains(j, h) {
				t.Errorf("native Endpoints %s has %s: %s", c.name, h, j)
			}
		}
	}
}

// TestEndpointsChanges: the Endpoints follow changes made while the
// controller runs (a Service port added, a pod relabelled out, a selector
// switched, a pod added) and an Endpoints object deleted by someone else is
// recreated. Compares every Endpoints object and the event reasons.
func TestEndpointsChanges(t *testing.T) {
	ch := &epChanges{del: func(ctx context.Context, cs kubernetes.Interface, ns string) (bool, error) {
		err := cs.CoreV1().Endpoints(ns).Delete(ctx, "publish", metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}}
	res := compare(t, differential.Scenario{
		Name: "endpoints follow changes", Controller: endpoints.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			ch.reset()
			return epSetup(ctx, cs, ns, epPods())
		}),
		Act:     ch.act,
		Observe: endpointsIn,
		Settled: func(state []map[string]any) bool {
			return ch.done() && hasObject(state, "Endpoints", "publish") &&
				strings.Contains(objectJSON(state, "Endpoints", "web"), `"port":8443`) &&
				strings.Contains(objectJSON(state, "Endpoints", "web"), `"web-6"`) &&
				strings.Contains(objectJSON(state, "Endpoints", "headless"), `"other"`) &&
				!stateHas(state, "Endpoints", `"web-1"`)
		},
		Cleanup: epCleanup,
	})
	if j := objectJSON(res.Native, "Endpoints", "headless"); !strings.Contains(j, `"other"`) || strings.Contains(j, `"web-0"`) {
		t.Errorf("native headless Endpoints did not follow its new selector: %s", j)
	}
}

// epAddressCount counts the ready and not-ready addresses of the named
// Endpoints in a normalised state.
func epAddressCount(state []map[string]any, name string) int {
	n := 0
	for _, o := range state {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] != "Endpoints" || md["name"] != name {
			continue
		}
		subsets, _ := o["subsets"].([]any)
		for _, s := range subsets {
			sm, _ := s.(map[string]any)
			a, _ := sm["addresses"].([]any)
			b, _ := sm["notReadyAddresses"].([]any)
			n += len(a) + len(b)
		}
	}
	return n
}

// TestEndpointsOverCapacity: a Service over 1010 pods (1005 ready, 5 not
// ready) gets an Endpoints object truncated to 1000 addresses (the
// not-ready ones go first, then the ready ones beyond the capacity, in
// address order) and annotated endpoints.kubernetes.io/over-capacity:
// truncated. Compares the Endpoints object in full and the event reasons.
func TestEndpointsOverCapacity(t *testing.T) {
	const ready, notReady = 1005, 5
	sel := map[string]string{"app": "crowd"}
	res := compare(t, differential.Scenario{
		Name: "endpoints over capacity", Controller: endpoints.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := epCreateNode(ctx, cs, ns); err != nil {
				return err
			}
			if _, err := cs.CoreV1().Services(ns).Create(ctx, epService("crowd", sel, nil,
				epPort("", 80, intstr.FromInt32(8080))), metav1.CreateOptions{}); err != nil {
				return err
			}
			// Created by a few workers at once: a thousand pods one by one
			// take long under -race.
			const workers = 8
			errs := make(chan error, workers)
			for w := range workers {
				go func() {
					var batch []epPod
					for i := w; i < ready+notReady; i += workers {
						batch = append(batch, epPod{name: fmt.Sprintf("crowd-%04d", i), labels: sel,
							ip: fmt.Sprintf("10.4.%d.%d", i/250, 1+i%250), ready: i < ready})
					}
					errs <- epCreatePods(ctx, cs, ns, batch...)
				}()
			}
			var err error
			for range workers {
				if e := <-errs; e != nil && err == nil {
					err = e
				}
			}
			return err
		}),
		Observe: endpointsIn,
		Settled: func(state []map[string]any) bool {
			return epAddressCount(state, "crowd") == 1000 &&
				strings.Contains(objectJSON(state, "Endpoints", "crowd"), `"endpoints.kubernetes.io/over-capacity":"truncated"`)
		},
		Cleanup: epCleanup,
	})
	if j := objectJSON(res.Native, "Endpoints", "crowd"); strings.Contains(j, "notReadyAddresses") {
		t.Errorf("native side kept not-ready addresses although the ready ones fill the capacity")
	}
}
