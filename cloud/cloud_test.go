package cloud_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/fake"
	"k8s.io/cloud-provider/names"

	"github.com/ctrlhost/ctrlhost/cloud"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// ccm is a cloud-controller-manager over fakes: the four cloud controllers
// on c, the clientset holding objects.
func ccm(t *testing.T, c cloudprovider.Interface, o cloud.Options, objects ...runtime.Object) *managertest.Harness {
	t.Helper()
	h := managertest.New(t, "cloud-controller-manager", cloud.Descriptors(cloud.Config{Cloud: c, Options: o}), objects...)
	h.Options.CloudProvider = "fake"
	h.Builder.WithInProcessCloudProvider().WithFeatureGate(utilfeature.DefaultMutableFeatureGate)
	return h
}

func node(name, providerID string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func fastOptions() cloud.Options {
	o := cloud.NewOptions()
	o.NodeMonitorPeriod = 50 * time.Millisecond
	o.RouteReconciliationPeriod = 50 * time.Millisecond
	o.ClusterCIDR = "10.244.0.0/16"
	return o
}

// TestNamesMatchUpstream: canonical names and aliases are
// cloud-controller-manager's, and every descriptor is a cloud loop.
func TestNamesMatchUpstream(t *testing.T) {
	ds := cloud.Descriptors(cloud.Config{Cloud: &fake.Cloud{}, Options: cloud.NewOptions()})
	want := map[string]string{} // canonical → alias
	for alias, name := range names.CCMControllerAliases() {
		want[name] = alias
	}
	if len(ds) != len(want) {
		t.Fatalf("%d descriptors, upstream has %d controllers", len(ds), len(want))
	}
	for _, d := range ds {
		alias, ok := want[d.Name()]
		if !ok {
			t.Errorf("%s: not an upstream cloud controller", d.Name())
			continue
		}
		if got := d.Aliases(); len(got) != 1 || got[0] != alias {
			t.Errorf("%s: aliases %v, want [%s]", d.Name(), got, alias)
		}
		if !d.IsCloudProvider() || !d.NeedsLeaderElection() || d.IsDisabledByDefault() || d.IsStartFirst() {
			t.Errorf("%s: flags differ from upstream's (cloud loop, elected, enabled by default)", d.Name())
		}
	}
}

// TestNodeLifecycleDeletesNodeGoneFromCloud: a not-ready node whose
// instance the cloud no longer has is deleted; a ready one is left alone.
func TestNodeLifecycleDeletesNodeGoneFromCloud(t *testing.T) {
	gone := node("gone", "fake://gone", corev1.ConditionFalse)
	ready := node("ready", "fake://ready", corev1.ConditionTrue)
	c := &fake.Cloud{ExistsByProviderID: false}
	h := ccm(t, c, fastOptions())
	for _, n := range []*corev1.Node{gone, ready} {
		if _, err := h.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.Start()
	h.WaitRunning(cloud.CloudNodeLifecycleController)
	managertest.Eventually(t, "node gone deleted", func() bool {
		_, err := h.Client.CoreV1().Nodes().Get(context.Background(), "gone", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := h.Client.CoreV1().Nodes().Get(context.Background(), "ready", metav1.GetOptions{}); err != nil {
		t.Errorf("ready node: %v", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestServiceLBPublishesIngress: a LoadBalancer Service gets the fake
// cloud's load balancer as its ingress; a ClusterIP one is not touched.
func TestServiceLBPublishesIngress(t *testing.T) {
	c := &fake.Cloud{ExternalIP: net.ParseIP("203.0.113.7"), Balancers: map[string]fake.Balancer{}}
	h := ccm(t, c, fastOptions())
	lb := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := h.Client.CoreV1().Services("default").Create(context.Background(), lb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.WaitRunning(cloud.ServiceLBController)
	managertest.Eventually(t, "ingress published", func() bool {
		s, err := h.Client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
		return err == nil && len(s.Status.LoadBalancer.Ingress) == 1 && s.Status.LoadBalancer.Ingress[0].IP == "203.0.113.7"
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestNodeRouteCreatesRoutes: a node with a pod CIDR gets a route in the
// cloud.
func TestNodeRouteCreatesRoutes(t *testing.T) {
	c := &fake.Cloud{RouteMap: map[string]*fake.Route{}}
	h := ccm(t, c, fastOptions())
	n := node("a", "fake://a", corev1.ConditionTrue)
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24"}
	if _, err := h.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.WaitRunning(cloud.NodeRouteController)
	managertest.Eventually(t, "route created", func() bool {
		c.Lock.Lock()
		defer c.Lock.Unlock()
		for _, r := range c.RouteMap {
			if string(r.Route.TargetNode) == "a" && r.Route.DestinationCIDR == "10.244.1.0/24" && r.ClusterName == "kubernetes" {
				return true
			}
		}
		return false
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestCloudNodeInitializesNode: a node registered with the uninitialized
// taint gets its provider ID and loses the taint.
func TestCloudNodeInitializesNode(t *testing.T) {
	c := &fake.Cloud{
		Provider:      "fake",
		ExtID:         map[types.NodeName]string{"a": "i-a"},
		InstanceTypes: map[types.NodeName]string{"a": "m1"},
		Addresses:     []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
		Zone:          cloudprovider.Zone{FailureDomain: "z1", Region: "r1"},
	}
	h := ccm(t, c, fastOptions())
	n := node("a", "", corev1.ConditionTrue)
	n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	if _, err := h.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.WaitRunning(cloud.CloudNodeController)
	managertest.Eventually(t, "node initialized", func() bool {
		got, err := h.Client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
		return err == nil && len(got.Spec.Taints) == 0 && got.Spec.ProviderID == "fake://i-a"
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// initCounting counts Initialize calls and records their stop channels.
type initCounting struct {
	*fake.Cloud
	mu    sync.Mutex
	stops []<-chan struct{}
}

func (c *initCounting) Initialize(_ cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stops = append(c.stops, stop)
}

// TestProviderInitializedOncePerTerm: four controllers, one term, one
// Initialize, whose stop channel closes when the term ends.
func TestProviderInitializedOncePerTerm(t *testing.T) {
	c := &initCounting{Cloud: &fake.Cloud{RouteMap: map[string]*fake.Route{}}}
	h := ccm(t, c, fastOptions())
	h.Start()
	h.WaitRunning(cloud.CloudNodeController, cloud.CloudNodeLifecycleController, cloud.ServiceLBController, cloud.NodeRouteController)
	c.mu.Lock()
	n, stop := len(c.stops), c.stops[0]
	c.mu.Unlock()
	if n != 1 {
		t.Fatalf("Initialize called %d times in one term, want 1", n)
	}
	select {
	case <-stop:
		t.Fatal("stop channel closed while the term runs")
	default:
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stop:
	default:
		t.Fatal("stop channel still open after the term ended")
	}
}

// TestControllersChooseNotToStart: as upstream, a provider without load
// balancers or routes leaves those controllers unstarted, and
// --configure-cloud-routes=false leaves the route controller off.
func TestControllersChooseNotToStart(t *testing.T) {
	c := &fake.Cloud{DisableLoadBalancers: true, DisableRoutes: true}
	h := ccm(t, c, fastOptions())
	h.Start()
	h.WaitRunning(cloud.CloudNodeController, cloud.CloudNodeLifecycleController)
	for _, name := range []string{cloud.ServiceLBController, cloud.NodeRouteController} {
		if st := h.WaitFor(name, manager.PhaseNotStarted); st.Phase != manager.PhaseNotStarted {
			t.Errorf("%s: %+v, want not started", name, st)
		}
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}

	o := fastOptions()
	o.ConfigureCloudRoutes = false
	h = ccm(t, &fake.Cloud{RouteMap: map[string]*fake.Route{}}, o)
	h.Start()
	if st := h.WaitFor(cloud.NodeRouteController, manager.PhaseNotStarted); st.Phase != manager.PhaseNotStarted {
		t.Errorf("route controller with --configure-cloud-routes=false: %+v", st)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestBadConfigFailsTheController: an invalid Config or --cluster-cidr is
// the controller's failure, naming the flag.
func TestBadConfigFailsTheController(t *testing.T) {
	for _, tt := range []struct {
		name       string
		cfg        cloud.Config
		controller string
		want       string
	}{
		{"no cloud", cloud.Config{Options: cloud.NewOptions()}, cloud.CloudNodeController, "Config.Cloud is nil"},
		{"bad period", cloud.Config{Cloud: &fake.Cloud{}, Options: func() cloud.Options { o := cloud.NewOptions(); o.NodeMonitorPeriod = 0; return o }()},
			cloud.CloudNodeController, "--node-monitor-period: must be a positive duration"},
		{"no cluster CIDR", cloud.Config{Cloud: &fake.Cloud{}, Options: cloud.NewOptions()}, cloud.NodeRouteController, "--cluster-cidr: required for node-route-controller"},
		{"bad cluster CIDR", cloud.Config{Cloud: &fake.Cloud{}, Options: func() cloud.Options { o := cloud.NewOptions(); o.ClusterCIDR = "10.0.0.0/8,10.1.0.0/16"; return o }()},
			cloud.NodeRouteController, "two CIDRs must be of different IP families"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var d descriptor.Descriptor
			for _, x := range cloud.Descriptors(tt.cfg) {
				if x.Name() == tt.controller {
					d = x
				}
			}
			h := managertest.New(t, "cloud-controller-manager", []descriptor.Descriptor{d})
			h.Options.CloudProvider = "fake"
			h.Builder.WithInProcessCloudProvider()
			h.Start()
			err := h.Err()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewProvider(t *testing.T) {
	cloudprovider.RegisterCloudProvider("cloud-test-provider", func(config io.Reader) (cloudprovider.Interface, error) {
		if config == nil {
			return &fake.Cloud{}, nil
		}
		b, _ := io.ReadAll(config)
		if string(b) == "broken" {
			return nil, errors.New("config broken")
		}
		return &untagged{&fake.Cloud{}}, nil
	})
	dir := t.TempDir()
	broken, untaggedCfg := dir+"/broken", dir+"/untagged"
	writeFile(t, broken, "broken")
	writeFile(t, untaggedCfg, "untagged")
	for _, tt := range []struct {
		name, provider, config string
		allowUntagged          bool
		want                   string // "" means success
	}{
		{"registered", "cloud-test-provider", "", false, ""},
		{"empty", "", "", false, "--cloud-provider: required"},
		{"external", "external", "", false, `"external" is for kube-controller-manager`},
		{"unknown", "nope", "", false, "--cloud-provider=nope: no cloud provider is registered under that name"},
		{"unreadable config", "cloud-test-provider", dir + "/missing", false, "--cloud-config"},
		{"factory error", "cloud-test-provider", broken, false, "config broken"},
		{"untagged", "cloud-test-provider", untaggedCfg, false, "no ClusterID found"},
		{"untagged allowed", "cloud-test-provider", untaggedCfg, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := cloud.NewProvider(tt.provider, tt.config, tt.allowUntagged)
			switch {
			case tt.want == "" && (err != nil || c == nil):
				t.Fatalf("NewProvider = %v, %v", c, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("NewProvider error = %v, want %q", err, tt.want)
			}
		})
	}
}

type untagged struct{ *fake.Cloud }

func (untagged) HasClusterID() bool { return false }
