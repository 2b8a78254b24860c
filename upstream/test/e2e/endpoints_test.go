//go:build integration

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestEndpointsAndSlices: a Service selecting two ready pods with IPs gets
// an Endpoints object and an EndpointSlice listing both addresses on the
// target port. The pods are bound to a Node, as the EndpointSlice
// controller skips pods whose Node it cannot find.
func TestEndpointsAndSlices(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	node := ns + "-node"
	readyNode(t, cs, node, nil)
	sel := map[string]string{"app": "backend"}
	ips := []string{"10.244.7.10", "10.244.7.11"}
	for i := range ips {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("backend-%d", i), Labels: sel},
			Spec:       podTemplate(nil, corev1.RestartPolicyAlways).Spec,
		}
		p.Spec.NodeName = node
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ipOf := map[string]string{"backend-0": ips[0], "backend-1": ips[1]}
	withIP := func(p *corev1.Pod) bool {
		if p.Status.PodIP != "" && podReady(p) {
			return false
		}
		ready(p)
		ip := ipOf[p.Name]
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		return true
	}
	eventually(t, waitTimeout, "the pods to be ready with their IPs", func(ctx context.Context) error {
		if err := markPods(ctx, cs, ns, sel, withIP); err != nil {
			return err
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.PodIP == "" || !podReady(&p) {
				return fmt.Errorf("pod %s: IP %q, ready %v", p.Name, p.Status.PodIP, podReady(&p))
			}
		}
		return nil
	})

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "backend"},
		Spec: corev1.ServiceSpec{
			Selector: sel,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "Endpoints backend to list both pods", func(ctx context.Context) error {
		//nolint:staticcheck // Endpoints is deprecated, and still what the endpoints controller writes.
		ep, err := cs.CoreV1().Endpoints(ns).Get(ctx, "backend", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(ep.Subsets) != 1 {
			return fmt.Errorf("subsets %v, want one", ep.Subsets)
		}
		s := ep.Subsets[0]
		var got []string
		for _, a := range s.Addresses {
			got = append(got, a.IP)
		}
		slices.Sort(got)
		if !slices.Equal(got, ips) || len(s.NotReadyAddresses) != 0 {
			return fmt.Errorf("ready addresses %q, not ready %v; want %q", got, s.NotReadyAddresses, ips)
		}
		if len(s.Ports) != 1 || s.Ports[0].Port != 8080 || s.Ports[0].Name != "http" {
			return fmt.Errorf("ports %v, want http 8080", s.Ports)
		}
		return nil
	})
	eventually(t, waitTimeout, "an EndpointSlice for backend to list both pods", func(ctx context.Context) error {
		l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=backend"})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 {
			return fmt.Errorf("%d EndpointSlices, want 1", len(l.Items))
		}
		es := l.Items[0]
		var got []string
		for _, e := range es.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				return fmt.Errorf("endpoint %v is not ready", e.Addresses)
			}
			if e.NodeName == nil || *e.NodeName != node {
				return fmt.Errorf("endpoint %v: node %v, want %s", e.Addresses, e.NodeName, node)
			}
			got = append(got, e.Addresses...)
		}
		slices.Sort(got)
		if es.AddressType != discoveryv1.AddressTypeIPv4 || !slices.Equal(got, ips) {
			return fmt.Errorf("%s addresses %q, want IPv4 %q", es.AddressType, got, ips)
		}
		if len(es.Ports) != 1 || es.Ports[0].Port == nil || *es.Ports[0].Port != 8080 {
			return fmt.Errorf("ports %v, want 8080", es.Ports)
		}
		return nil
	})
}
