//go:build integration

package differential_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/endpointslice"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// The endpoints scenarios (this file's and endpoints_integration_test.go's)
// bind their pods to a Node of their own, named after the namespace (so
// that Normalise turns the name into "<ns>-node"), labelled
// differential=<ns> for Cleanup and placed in a zone (EndpointSlices report
// it). There is no kubelet: Setup writes each pod's status (IP, phase,
// readiness) as a kubelet would have before the controllers start; Act then
// plays later changes.

const (
	epZone      = "zone-a"
	epFinalizer = "differential.ctrlhost.io/hold"
)

// epPod describes one pod of a scenario.
type epPod struct {
	name   string
	labels map[string]string
	// ip is the pod IP; "" leaves the pod without one (not started).
	ip string
	// ready marks the pod Ready; phase defaults to Running when ip is set.
	ready bool
	phase corev1.PodPhase
	// httpPort is the container port named "http" (default 8080).
	httpPort int32
	// hostname and subdomain go into the pod spec.
	hostname, subdomain string
	// hold gives the pod a finalizer, so that it stays terminating once
	// deleted (Cleanup removes it).
	hold bool
}

func epNodeName(ns string) string { return ns + "-node" }

// epCreateNode creates the scenario's ready Node.
func epCreateNode(ctx context.Context, cs kubernetes.Interface, ns string) error {
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   epNodeName(ns),
		Labels: map[string]string{"differential": ns, corev1.LabelTopologyZone: epZone},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

// epCreatePods creates the pods on the scenario's node and writes their
// statuses.
func epCreatePods(ctx context.Context, cs kubernetes.Interface, ns string, pods ...epPod) error {
	for _, d := range pods {
		port := d.httpPort
		if port == 0 {
			port = 8080
		}
		p := pod(d.name, d.labels)
		p.Spec.NodeName = epNodeName(ns)
		p.Spec.Hostname, p.Spec.Subdomain = d.hostname, d.subdomain
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{
			{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
		}
		if d.hold {
			p.Finalizers = []string{epFinalizer}
		}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if err := epSetStatus(ctx, cs, created, d); err != nil {
			return err
		}
	}
	return nil
}

// epSetStatus writes what a kubelet reports for d: its IP, phase and
// readiness.
func epSetStatus(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, d epPod) error {
	if d.ip == "" && d.phase == "" {
		return nil
	}
	now := metav1.Now()
	p = p.DeepCopy()
	p.Status.Phase = d.phase
	if p.Status.Phase == "" {
		p.Status.Phase = corev1.PodRunning
	}
	if d.ip != "" {
		p.Status.PodIP = d.ip
		p.Status.PodIPs = []corev1.PodIP{{IP: d.ip}}
	}
	p.Status.HostIP = "192.0.2.1"
	p.Status.HostIPs = []corev1.HostIP{{IP: "192.0.2.1"}}
	p.Status.StartTime = &now
	ready := corev1.ConditionFalse
	if d.ready {
		ready = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: now},
	}
	_, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// epCleanup removes the scenario's node and pods (finalizers first).
func epCleanup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range l.Items {
		p := &l.Items[i]
		if len(p.Finalizers) == 0 {
			continue
		}
		p.Finalizers = nil
		if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "differential=" + ns}); err != nil {
		return err
	}
	return deletePods(ctx, cs, ns)
}

// epEvents is the namespace's event summary (EventReasons leaves out the
// API server's repair loops).
func epEvents(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error) {
	return differential.EventSummary(ctx, cs, ns, nil)
}

// epService is a Service of the given type selecting sel (nil: no
// selector) with ports.
func epService(name string, sel map[string]string, mod func(*corev1.Service), ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "front", "svc": name}},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: ports},
	}
	if mod != nil {
		mod(s)
	}
	return s
}

func epPort(name string, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}
}

func headless(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }

// epServices are the Services both endpoints scenarios make over app=web:
// "web" (ClusterIP, a named and a numbered target port), "headless"
// (clusterIP None, no ports), "publish" (publishNotReadyAddresses), "nosel"
// (no selector), "external" (ExternalName) and "appproto" (an appProtocol,
// two ports named alike in the pod).
func epServices() []*corev1.Service {
	web := map[string]string{"app": "web"}
	return []*corev1.Service{
		epService("web", web, nil,
			epPort("http", 80, intstr.FromString("http")), epPort("metrics", 9090, intstr.FromInt32(9090))),
		epService("headless", web, headless),
		epService("publish", web, func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true },
			epPort("", 80, intstr.FromInt32(8080))),
		epService("nosel", nil, nil, epPort("", 80, intstr.FromInt32(8080))),
		epService("external", web, func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
		}),
		epService("appproto", web, nil, func() corev1.ServicePort {
			p := epPort("grpc", 443, intstr.FromString("http"))
			p.AppProtocol = ptr.To("kubernetes.io/h2c")
			return p
		}()),
	}
}

// epPods are the pods both endpoints scenarios make: ready, not ready,
// ready but terminating (deleted by Act), not started (no IP), finished
// (Succeeded), ready with another number for its "http" port, and one that
// matches no Service.
func epPods() []epPod {
	web := map[string]string{"app": "web"}
	return []epPod{
		{name: "web-0", labels: web, ip: "10.1.0.10", ready: true, hostname: "web-0", subdomain: "headless"},
		{name: "web-1", labels: web, ip: "10.1.0.11"},
		{name: "web-2", labels: web, ip: "10.1.0.12", ready: true, hold: true},
		{name: "web-3", labels: web},
		{name: "web-4", labels: web, ip: "10.1.0.14", phase: corev1.PodSucceeded},
		{name: "web-5", labels: web, ip: "10.1.0.15", ready: true, httpPort: 8081},
		{name: "other", labels: map[string]string{"app": "other"}, ip: "10.1.0.16", ready: true},
	}
}

func epSetup(ctx context.Context, cs kubernetes.Interface, ns string, pods []epPod) error {
	if err := epCreateNode(ctx, cs, ns); err != nil {
		return err
	}
	for _, s := range epServices() {
		if _, err := cs.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("service %s: %w", s.Name, err)
		}
	}
	return epCreatePods(ctx, cs, ns, pods...)
}

// epDeleteOnce deletes the named pod gracefully unless it is already
// terminating (it has a finalizer and is bound, so it stays).
func epDeleteOnce(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil {
		return err
	}
	return cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// epReadyOnce marks the named pod Ready unless it is.
func epReadyOnce(ctx context.Context, cs kubernetes.Interface, ns, name, ip string) error {
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return epSetStatus(ctx, cs, p, epPod{ip: ip, ready: true})
}

func slicesIn(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for i := range l.Items {
		l.Items[i].Kind = "EndpointSlice"
		// The library orders a slice's endpoints by set iteration, which
		// differs from run to run: they are compared in address order.
		slices.SortFunc(l.Items[i].Endpoints, func(a, b discoveryv1.Endpoint) int {
			return strings.Compare(strings.Join(a.Addresses, ","), strings.Join(b.Addresses, ","))
		})
		out = append(out, &l.Items[i])
	}
	ev, err := epEvents(ctx, cs, ns)
	if err != nil {
		return nil, err
	}
	return append(out, ev), nil
}

// packedSlices observes the slices with their endpoints replaced by their
// count (which pod lands in which slice follows the library's set
// iteration, different from run to run) and, beside them, every endpoint
// of every slice in address order.
func packedSlices(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	objs, err := slicesIn(ctx, cs, ns)
	if err != nil {
		return nil, err
	}
	var all []string
	for _, o := range objs {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			c := e.Conditions
			all = append(all, fmt.Sprintf("%v %s ready=%v serving=%v terminating=%v zone=%s",
				e.Addresses, e.TargetRef.Name, ptr.Deref(c.Ready, false), ptr.Deref(c.Serving, false),
				ptr.Deref(c.Terminating, false), ptr.Deref(e.Zone, "")))
		}
		s.Annotations = maps.Clone(s.Annotations)
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations["test.ctrlhost.io/endpoints"] = fmt.Sprint(len(s.Endpoints))
		s.Endpoints = nil
	}
	slices.Sort(all)
	return append(objs, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "EndpointList"},
		ObjectMeta: metav1.ObjectMeta{Name: "endpoints"},
		Data:       map[string]string{"endpoints": strings.Join(all, "\n")},
	}), nil
}

// stateJSON is the JSON of the state's objects of kind.
func stateJSON(state []map[string]any, kind string) string {
	var objs []map[string]any
	for _, o := range state {
		if o["kind"] == kind {
			objs = append(objs, o)
		}
	}
	b, _ := json.Marshal(objs)
	return string(b)
}

// stateHas reports whether the JSON of the state's objects of kind contains
// every one of the fragments.
func stateHas(state []map[string]any, kind string, fragments ...string) bool {
	j := stateJSON(state, kind)
	for _, f := range fragments {
		if !strings.Contains(j, f) {
			return false
		}
	}
	return true
}

// TestEndpointSliceServices: the slices of ClusterIP, headless,
// publishNotReadyAddresses and appProtocol Services over ready, not-ready,
// terminating, unstarted and finished pods, one of which resolves the named
// target port to another number (its own slice); selectorless and
// ExternalName Services get none. Compares every EndpointSlice (labels,
// annotations, owner, address type, ports, endpoints with conditions,
// hostname, node and zone) and the event reasons.
func TestEndpointSliceServices(t *testing.T) {
	res := compare(t, differential.Scenario{
		Name: "endpointslices of services", Controller: endpointslice.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			return epSetup(ctx, cs, ns, epPods())
		}),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			// The kubelet reports web-1 ready; web-2 is being deleted.
			if err := epReadyOnce(ctx, cs, ns, "web-1", "10.1.0.11"); err != nil {
				return err
			}
			return epDeleteOnce(ctx, cs, ns, "web-2")
		},
		Observe: slicesIn,
		// web: 2 (two port mappings), headless 1, publish 1, appproto 2.
		Settled: func(state []map[string]any) bool {
			return count(state, "EndpointSlice") == 6 &&
				stateHas(state, "EndpointSlice", `"terminating":true`) &&
				!stateHas(state, "EndpointSlice", `"ready":false,"serving":false`)
		},
		Cleanup: epCleanup,
	})
	if n := count(res.Native, "EndpointSlice"); n != 6 {
		t.Errorf("native side has %d EndpointSlices, want 6", n)
	}
	all := stateJSON(res.Native, "EndpointSlice")
	for _, want := range []string{`"terminating":true`, `"hostname":"web-0"`, `"zone":"zone-a"`, `"port":8081`,
		`"appProtocol":"kubernetes.io/h2c"`, `"endpointslice.kubernetes.io/managed-by":"endpointslice-controller.k8s.io"`,
		`"service.kubernetes.io/headless":""`} {
		if !strings.Contains(all, want) {
			t.Errorf("native EndpointSlices lack %s", want)
		}
	}
	for _, absent := range []string{`"web-3"`, `"web-4"`, `"other"`, `"kubernetes.io/service-name":"nosel"`, `"kubernetes.io/service-name":"external"`} {
		if strings.Contains(all, absent) {
			t.Errorf("native EndpointSlices have %s", absent)
		}
	}
}

// TestEndpointSlicePacking: 105 ready pods of one Service fill a slice of
// the default 100 endpoints and a second one; a later pod change updates
// them in place. Compares the slices (endpoint counts per slice) and the
// event reasons.
func TestEndpointSlicePacking(t *testing.T) {
	const n = 105
	res := compare(t, differential.Scenario{
		Name: "endpointslice packing", Controller: endpointslice.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := epCreateNode(ctx, cs, ns); err != nil {
				return err
			}
			web := map[string]string{"app": "many"}
			if _, err := cs.CoreV1().Services(ns).Create(ctx, epService("many", web, nil,
				epPort("http", 80, intstr.FromString("http"))), metav1.CreateOptions{}); err != nil {
				return err
			}
			var pods []epPod
			for i := range n {
				pods = append(pods, epPod{name: fmt.Sprintf("many-%03d", i), labels: web,
					ip: fmt.Sprintf("10.2.%d.%d", i/200, 10+i%200), ready: true})
			}
			return epCreatePods(ctx, cs, ns, pods...)
		}),
		Observe: packedSlices,
		Settled: func(state []map[string]any) bool {
			return count(state, "EndpointSlice") == 2 && stateHas(state, "EndpointList", "many-104")
		},
		Cleanup: epCleanup,
	})
	if c := count(res.Native, "EndpointSlice"); c != 2 {
		t.Errorf("native side has %d EndpointSlices, want 2", c)
	}
}

// epChanges plays, while the controller runs, changes to the objects
// epSetup made: Service "web" gains a port, pod web-1 leaves app=web,
// Service "headless" switches its selector to app=other, a ready pod web-6
// appears, and, once, the managed object of Service "publish" is deleted
// by someone else (del deletes it and reports whether it existed). Every
// step is idempotent, as Act is called at every poll. deleted reports
// whether the deletion happened on the current side (Setup resets it).
type epChanges struct {
	mu      sync.Mutex
	deleted bool
	del     func(ctx context.Context, cs kubernetes.Interface, ns string) (bool, error)
}

func (c *epChanges) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleted = false
}

func (c *epChanges) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleted
}

func (c *epChanges) act(ctx context.Context, cs kubernetes.Interface, ns string) error {
	svcs := cs.CoreV1().Services(ns)
	web, err := svcs.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(web.Spec.Ports) == 2 {
		web.Spec.Ports = append(web.Spec.Ports, epPort("admin", 8443, intstr.FromInt32(8443)))
		if _, err := svcs.Update(ctx, web, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if p.Labels["app"] == "web" {
		p.Labels["app"] = "gone"
		if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	hl, err := svcs.Get(ctx, "headless", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if hl.Spec.Selector["app"] == "web" {
		hl.Spec.Selector = map[string]string{"app": "other"}
		if _, err := svcs.Update(ctx, hl, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "web-6", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if err := epCreatePods(ctx, cs, ns, epPod{name: "web-6", labels: map[string]string{"app": "web"}, ip: "10.1.0.17", ready: true}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if c.done() {
		return nil
	}
	ok, err := c.del(ctx, cs, ns)
	if ok {
		c.mu.Lock()
		c.deleted = true
		c.mu.Unlock()
	}
	return err
}

// epSliceFollowed reports whether a slice lists pod web-6 and not web-1.
func epSliceFollowed(s discoveryv1.EndpointSlice) bool {
	names := map[string]bool{}
	for _, e := range s.Endpoints {
		if e.TargetRef != nil {
			names[e.TargetRef.Name] = true
		}
	}
	return names["web-6"] && !names["web-1"]
}

// TestEndpointSliceChanges: the slices follow changes made while the
// controller runs (a Service port added, a pod relabelled out, a selector
// switched, a pod added) and a managed slice deleted by someone else is
// recreated. Compares every EndpointSlice and the event reasons.
func TestEndpointSliceChanges(t *testing.T) {
	// The slice of "publish" is deleted only once it shows web-6 and no
	// longer web-1: a deletion racing those pod changes is synced together
	// with them or after them, as the queue happens to run, and only the
	// former stamps endpoints.kubernetes.io/last-change-trigger-time on the
	// recreated slice — on either side, so the two sides differed by luck.
	ch := &epChanges{del: func(ctx context.Context, cs kubernetes.Interface, ns string) (bool, error) {
		l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=publish"})
		if err != nil || len(l.Items) == 0 || !epSliceFollowed(l.Items[0]) {
			return false, err
		}
		return true, cs.DiscoveryV1().EndpointSlices(ns).Delete(ctx, l.Items[0].Name, metav1.DeleteOptions{})
	}}
	pods := epPods()
	res := compare(t, differential.Scenario{
		Name: "endpointslices follow changes", Controller: endpointslice.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			ch.reset()
			return epSetup(ctx, cs, ns, pods)
		}),
		Act:     ch.act,
		Observe: slicesIn,
		Settled: func(state []map[string]any) bool {
			return ch.done() && stateHas(state, "EndpointSlice", `"port":8443`, `"web-6"`, `"other"`, `"kubernetes.io/service-name":"publish"`) &&
				!stateHas(state, "EndpointSlice", `"web-1"`)
		},
		Cleanup: epCleanup,
	})
	if !stateHas(res.Native, "EndpointSlice", `"port":8443`, `"web-6"`, `"other"`, `"kubernetes.io/service-name":"publish"`) {
		t.Errorf("native slices did not follow the changes")
	}
}

// TestEndpointSliceTopology: hints. A Service with
// service.kubernetes.io/topology-mode: Auto over nodes of a single zone
// gets none (and a TopologyAwareHintsDisabled event); trafficDistribution
// PreferClose gives zone hints and PreferSameNode (PreferSameTrafficDistribution,
// on in 1.37) node hints. Compares every EndpointSlice (with its hints)
// and the event reasons.
func TestEndpointSliceTopology(t *testing.T) {
	web := map[string]string{"app": "web"}
	res := compare(t, differential.Scenario{
		Name: "endpointslice topology hints", Controller: endpointslice.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := epCreateNode(ctx, cs, ns); err != nil {
				return err
			}
			port := epPort("http", 80, intstr.FromString("http"))
			for _, s := range []*corev1.Service{
				epService("auto", web, func(s *corev1.Service) {
					s.Annotations = map[string]string{corev1.AnnotationTopologyMode: "Auto"}
				}, port),
				epService("close", web, func(s *corev1.Service) {
					s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
				}, port),
				epService("samenode", web, func(s *corev1.Service) {
					s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferSameNode)
				}, port),
			} {
				if _, err := cs.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("service %s: %w", s.Name, err)
				}
			}
			return epCreatePods(ctx, cs, ns,
				epPod{name: "web-0", labels: web, ip: "10.3.0.10", ready: true},
				epPod{name: "web-1", labels: web, ip: "10.3.0.11", ready: true})
		}),
		Observe: slicesIn,
		Settled: func(state []map[string]any) bool {
			return count(state, "EndpointSlice") == 3 && stateHas(state, "EndpointSlice", `"forZones"`, `"forNodes"`) &&
				stateHas(state, "EventSummary", "TopologyAwareHintsDisabled")
		},
		Cleanup: epCleanup,
	})
	if !stateHas(res.Native, "EndpointSlice", `"forZones":[{"name":"zone-a"}]`, `"forNodes"`) {
		t.Errorf("native slices lack the traffic-distribution hints")
	}
}
