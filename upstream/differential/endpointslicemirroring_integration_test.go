//go:build integration

package differential_test

//lint:file-ignore SA1019 Endpoints are deprecated, and what the controller mirrors (as KCM's)

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/endpointslicemirroring"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// The mirroring scenarios write Endpoints by hand, as an operator or a
// controller of selectorless Services would; only the mirroring
// controller runs (no Endpoints or EndpointSlice controller).

// esmService is a Service named name with the selector sel (nil: none).
func esmService(name string, sel map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

// esmAddr is an address of a pod named after the IP's last part, on a node
// (no such pod or node exists: an Endpoints may say anything).
func esmAddr(ns, ip string) corev1.EndpointAddress {
	last := strings.NewReplacer(".", "-", ":", "-").Replace(ip)
	return corev1.EndpointAddress{IP: ip, NodeName: ptr.To("node-a"),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-" + last,
			UID: types.UID("uid-" + last)}}
}

func esmAddrs(ns string, ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, esmAddr(ns, ip))
	}
	return out
}

func esmPort(name string, n int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

// esmDualStack is the Endpoints "ext": a subset of IPv4 and IPv6
// addresses, ready and not, one with a hostname, on two ports (one with an
// appProtocol); a subset of one address on a third port; labels, an
// annotation, and the two annotations a slice does not get.
func esmDualStack(ns string) *corev1.Endpoints {
	ready := esmAddrs(ns, "10.6.0.1", "2001:db8::1")
	ready[0].Hostname = "first"
	metrics := esmPort("metrics", 9090)
	metrics.AppProtocol = ptr.To("http")
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "ext",
			Labels: map[string]string{"team": "x"},
			Annotations: map[string]string{"note": "y",
				corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z",
				corev1.LastAppliedConfigAnnotation:    "{}"}},
		Subsets: []corev1.EndpointSubset{
			{Addresses: ready, NotReadyAddresses: esmAddrs(ns, "10.6.0.2", "2001:db8::2"),
				Ports: []corev1.EndpointPort{esmPort("http", 8080), metrics}},
			{Addresses: esmAddrs(ns, "10.6.0.3"),
				Ports: []corev1.EndpointPort{esmPort("grpc", 443)}},
		},
	}
}

// esmSimple is an Endpoints of one ready IPv4 address on one port.
func esmSimple(ns, name, ip string) *corev1.Endpoints {
	return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name},
		Subsets: []corev1.EndpointSubset{{Addresses: esmAddrs(ns, ip),
			Ports: []corev1.EndpointPort{esmPort("http", 8080)}}}}
}

// esmPair is a Service (nil: none) and its Endpoints.
type esmPair struct {
	svc *corev1.Service
	ep  *corev1.Endpoints
}

// esmCreate creates the Services and Endpoints.
func esmCreate(ctx context.Context, cs kubernetes.Interface, ns string, pairs ...esmPair) error {
	for _, p := range pairs {
		if p.svc != nil {
			if _, err := cs.CoreV1().Services(ns).Create(ctx, p.svc,
				metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("service %s: %w", p.svc.Name, err)
			}
		}
		if _, err := cs.CoreV1().Endpoints(ns).Create(ctx, p.ep,
			metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("endpoints %s: %w", p.ep.Name, err)
		}
	}
	return nil
}

// esmSlices observes the namespace's EndpointSlices and event reasons. A
// mirrored slice is renamed <service>.<address type>.<port names> (after
// an in-place update KCM's slices keep their generated name without their
// generateName, so Normalise cannot renumber them; there is one slice per
// such name once settled); endpoints are compared in address order (KCM
// writes them in map order); a slice of more than 20 endpoints has them
// summed up as their count and sorted addresses in an annotation.
func esmSlices(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for i := range l.Items {
		s := &l.Items[i]
		s.Kind = "EndpointSlice"
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, ptr.Deref(p.Name, "?"))
		}
		slices.Sort(ports)
		s.Name = fmt.Sprintf("%s.%s.%s", s.Labels[discoveryv1.LabelServiceName],
			strings.ToLower(string(s.AddressType)), strings.Join(ports, "-"))
		slices.SortFunc(s.Endpoints, func(a, b discoveryv1.Endpoint) int {
			return strings.Compare(strings.Join(a.Addresses, ","), strings.Join(b.Addresses, ","))
		})
		if len(s.Endpoints) > 20 {
			var all []string
			for _, e := range s.Endpoints {
				all = append(all, fmt.Sprintf("%s/%v", strings.Join(e.Addresses, ","),
					ptr.Deref(e.Conditions.Ready, false)))
			}
			slices.Sort(all)
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations["test.ctrlhost.io/endpoints"] = fmt.Sprintf("%d: %s", len(all),
				strings.Join(all, " "))
			s.Endpoints = nil
		}
		out = append(out, s)
	}
	ev, err := differential.EventSummary(ctx, cs, ns, nil)
	if err != nil {
		return nil, err
	}
	return append(out, ev), nil
}

// TestEndpointSliceMirroring: what is mirrored and how. A selectorless
// Service's dual-stack Endpoints (ready and not-ready addresses, two
// subsets, several ports, labels and annotations) gives three slices; an
// ExternalName Service's Endpoints and one without ports are mirrored too;
// an Endpoints of 1001 addresses has 1000 mirrored (TooManyAddressesToMirror);
// Endpoints with the skip-mirror label or a leader-election annotation,
// of a Service with a selector, or without a Service are not. Compares
// every EndpointSlice (labels, annotations, owner, address type, ports,
// endpoints) and the event reasons.
func TestEndpointSliceMirroring(t *testing.T) {
	res := compare(t, differential.Scenario{
		Name: "endpointslice mirroring", Controller: endpointslicemirroring.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			skip := esmSimple(ns, "skip", "10.6.1.1")
			skip.Labels = map[string]string{discoveryv1.LabelSkipMirror: "true"}
			election := esmSimple(ns, "election", "10.6.1.2")
			election.Annotations = map[string]string{
				resourcelock.LeaderElectionRecordAnnotationKey: "{}"}
			external := esmService("external", nil)
			external.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName,
				ExternalName: "example.com"}
			noPorts := esmSimple(ns, "noports", "10.6.1.5")
			noPorts.Subsets[0].Ports = nil
			big := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "big"},
				Subsets: []corev1.EndpointSubset{{
					Ports: []corev1.EndpointPort{esmPort("http", 80)}}}}
			for i := range 1001 {
				big.Subsets[0].Addresses = append(big.Subsets[0].Addresses,
					corev1.EndpointAddress{IP: fmt.Sprintf("10.7.%d.%d", i/250, i%250+1)})
			}
			return esmCreate(ctx, cs, ns,
				esmPair{esmService("ext", nil), esmDualStack(ns)},
				esmPair{external, esmSimple(ns, "external", "10.6.1.3")},
				esmPair{esmService("noports", nil), noPorts},
				esmPair{esmService("big", nil), big},
				esmPair{esmService("skip", nil), skip},
				esmPair{esmService("election", nil), election},
				esmPair{esmService("selected", map[string]string{"app": "none"}),
					esmSimple(ns, "selected", "10.6.1.4")},
				esmPair{nil, esmSimple(ns, "orphan", "10.6.1.6")},
			)
		},
		Observe: esmSlices,
		Settled: func(state []map[string]any) bool {
			return count(state, "EndpointSlice") == 6 &&
				stateHas(state, "EventSummary", "TooManyAddressesToMirror")
		},
	})
	if n := count(res.Native, "EndpointSlice"); n != 6 {
		t.Errorf("native side has %d EndpointSlices, want 6", n)
	}
	all := stateJSON(res.Native, "EndpointSlice")
	for _, want := range []string{`"name":"ext.ipv4.http-metrics"`,
		`"name":"ext.ipv6.http-metrics"`, `"name":"ext.ipv4.grpc"`,
		`"name":"external.ipv4.http"`, `"name":"noports.ipv4."`,
		`"name":"big.ipv4.http"`, `"test.ctrlhost.io/endpoints":"1000: `, `"hostname":"first"`,
		`"endpointslice.kubernetes.io/managed-by":"endpointslicemirroring-controller.k8s.io"`,
		`"kind":"Endpoints"`, `"appProtocol":"http"`} {
		if !strings.Contains(all, want) {
			t.Errorf("native EndpointSlices lack %s", want)
		}
	}
	for _, absent := range []string{"skip", "election", "selected", "orphan",
		corev1.EndpointsLastChangeTriggerTime, corev1.LastAppliedConfigAnnotation} {
		if strings.Contains(all, absent) {
			t.Errorf("native EndpointSlices have %s", absent)
		}
	}
}

// esmChanges plays, while the controller runs, changes made once the
// slices they change exist: the dual-stack Endpoints "ext" gains an
// address, a not-ready address becomes ready, a port changes number
// (both of its address types' slices get new ports) and it gains a label;
// the Endpoints "gone" is deleted; Service "sel" gains a selector;
// Endpoints "skipped" gains the skip-mirror label; the slice of "repair"
// is deleted by someone else once. Every step is idempotent, as Act runs
// at every poll.
type esmChanges struct {
	mu       sync.Mutex
	repaired bool
}

func (c *esmChanges) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.repaired = false
}

func (c *esmChanges) deletedRepair() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.repaired
}

// mirrored lists the slices mirrored for the Endpoints name.
func esmMirrored(ctx context.Context, cs kubernetes.Interface, ns, name string) (
	[]discoveryv1.EndpointSlice, error) {
	l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name + "," +
			discoveryv1.LabelManagedBy + "=" + endpointslicemirroring.ManagedBy})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (c *esmChanges) act(ctx context.Context, cs kubernetes.Interface, ns string) error {
	have := func(name string, n int) (bool, error) {
		l, err := esmMirrored(ctx, cs, ns, name)
		return len(l) >= n, err
	}
	eps := cs.CoreV1().Endpoints(ns)
	if ok, err := have("ext", 3); err != nil || !ok {
		return err // the rest waits for the first mirror
	}
	ext, err := eps.Get(ctx, "ext", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if ext.Labels["stage"] == "" {
		ext.Labels["stage"] = "2"
		a := &ext.Subsets[0]
		a.Ports[1].Port = 9091
		a.Addresses = append(a.Addresses, a.NotReadyAddresses[0])
		a.NotReadyAddresses = a.NotReadyAddresses[1:]
		ext.Subsets[1].Addresses = append(ext.Subsets[1].Addresses, esmAddr(ns, "10.6.0.9"))
		if _, err := eps.Update(ctx, ext, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if err := eps.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil &&
		!apierrors.IsNotFound(err) {
		return err
	}
	sel, err := cs.CoreV1().Services(ns).Get(ctx, "sel", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if sel.Spec.Selector == nil {
		sel.Spec.Selector = map[string]string{"app": "sel"}
		if _, err := cs.CoreV1().Services(ns).Update(ctx, sel, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	skipped, err := eps.Get(ctx, "skipped", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if skipped.Labels[discoveryv1.LabelSkipMirror] == "" {
		skipped.Labels = map[string]string{discoveryv1.LabelSkipMirror: "true"}
		if _, err := eps.Update(ctx, skipped, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if c.deletedRepair() {
		return nil
	}
	l, err := esmMirrored(ctx, cs, ns, "repair")
	if err != nil || len(l) == 0 {
		return err
	}
	if err := cs.DiscoveryV1().EndpointSlices(ns).Delete(ctx, l[0].Name,
		metav1.DeleteOptions{}); err != nil {
		return err
	}
	c.mu.Lock()
	c.repaired = true
	c.mu.Unlock()
	return nil
}

// TestEndpointSliceMirroringChanges: the mirror follows an update of the
// Endpoints (an address added, one made ready, a port renumbered on
// dual-stack slices, a label added), the deletion of an Endpoints, a
// Service gaining a selector and an Endpoints gaining the skip-mirror
// label (their slices go), and repairs a slice deleted by someone else.
// Compares every EndpointSlice and the event reasons.
func TestEndpointSliceMirroringChanges(t *testing.T) {
	ch := &esmChanges{}
	res := compare(t, differential.Scenario{
		Name: "endpointslice mirroring follows changes", Controller: endpointslicemirroring.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			ch.reset()
			return esmCreate(ctx, cs, ns,
				esmPair{esmService("ext", nil), esmDualStack(ns)},
				esmPair{esmService("gone", nil), esmSimple(ns, "gone", "10.6.2.1")},
				esmPair{esmService("sel", nil), esmSimple(ns, "sel", "10.6.2.2")},
				esmPair{esmService("skipped", nil), esmSimple(ns, "skipped", "10.6.2.3")},
				esmPair{esmService("repair", nil), esmSimple(ns, "repair", "10.6.2.4")},
			)
		},
		Act:     ch.act,
		Observe: esmSlices,
		Settled: func(state []map[string]any) bool {
			return ch.deletedRepair() && count(state, "EndpointSlice") == 4 &&
				stateHas(state, "EndpointSlice", `"name":"repair.ipv4.http"`, `"10.6.0.9"`,
					`"stage":"2"`) &&
				strings.Count(stateJSON(state, "EndpointSlice"), `"port":9091`) == 2
		},
	})
	all := stateJSON(res.Native, "EndpointSlice")
	if strings.Count(all, `"port":9091`) != 2 || strings.Contains(all, `"port":9090`) ||
		!strings.Contains(all, `"10.6.0.9"`) {
		t.Errorf("native slices did not follow the update:\n%s", all)
	}
	for _, absent := range []string{`"gone.`, `"sel.`, `"skipped.`} {
		if strings.Contains(all, absent) {
			t.Errorf("native slices still have %s", absent)
		}
	}
}
