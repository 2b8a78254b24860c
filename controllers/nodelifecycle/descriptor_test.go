package nodelifecycle_test

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/nodelifecycle"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(t, nodelifecycle.Descriptor(nodelifecycle.NewOptions()),
		controllertest.Identity{Name: "node-lifecycle-controller", Alias: "nodelifecycle",
			EventSource: "node-controller"})
}

func TestFlags(t *testing.T) {
	defaults := map[string]string{
		"node-monitor-period":          "5s",
		"node-monitor-grace-period":    "50s",
		"node-startup-grace-period":    "1m0s",
		"node-eviction-rate":           "0.1",
		"secondary-node-eviction-rate": "0.01",
		"large-cluster-size-threshold": "50",
		"unhealthy-zone-threshold":     "0.55",
	}
	o := nodelifecycle.NewOptions()
	fs := controllertest.FlagSet(o.AddFlags)
	n := 0
	fs.VisitAll(func(*pflag.Flag) { n++ })
	if n != len(defaults) {
		t.Errorf("%d flags, want KCM's %d", n, len(defaults))
	}
	for name, def := range defaults {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("--%s not registered", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s default %q, want %q", name, f.DefValue, def)
		}
	}
	if err := fs.Parse([]string{"--node-monitor-period=1s", "--node-monitor-grace-period=3s",
		"--node-eviction-rate=2", "--large-cluster-size-threshold=3"}); err != nil {
		t.Fatal(err)
	}
	if o.NodeMonitorPeriod != time.Second || o.NodeMonitorGracePeriod != 3*time.Second ||
		o.NodeEvictionRate != 2 || o.LargeClusterSizeThreshold != 3 {
		t.Errorf("parsed %+v", o)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	bad := nodelifecycle.NewOptions()
	bad.NodeMonitorPeriod = 0
	bad.NodeMonitorGracePeriod = -time.Second
	bad.NodeEvictionRate = -1
	bad.LargeClusterSizeThreshold = -1
	tests := []struct {
		name    string
		o       nodelifecycle.Options
		wantErr []string
	}{
		{"defaults", nodelifecycle.NewOptions(), nil},
		{"bad", bad, []string{"--node-monitor-period: must be positive, got 0s",
			"--node-monitor-grace-period: must not be negative, got -1s",
			"--node-eviction-rate: must not be negative, got -1",
			"--large-cluster-size-threshold: must not be negative, got -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, nodelifecycle.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestFeatureSpecs(t *testing.T) {
	specs := nodelifecycle.FeatureSpecs()
	s, ok := specs[nodelifecycle.FeatureNodeControllerLeaseCircuitBreaker]
	if len(specs) != 1 || !ok || !s.Default || s.PreRelease != featuregate.Beta {
		t.Errorf("specs %+v", specs)
	}
	if err := featuregate.NewFeatureGate().Add(specs); err != nil {
		t.Fatalf("the specs do not register: %v", err)
	}
}

func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		nodelifecycle.Descriptor(nodelifecycle.NewOptions()))
}

// TestManagerTaintsSilentNode: under a Manager, a node whose Lease is
// never renewed is marked Unknown and tainted unreachable NoSchedule
// (short periods, real time: the node's silence is real).
func TestManagerTaintsSilentNode(t *testing.T) {
	o := nodelifecycle.NewOptions()
	o.NodeMonitorPeriod = 50 * time.Millisecond
	o.NodeMonitorGracePeriod = 300 * time.Millisecond
	now := metav1.Now()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: now, LastTransitionTime: now}}}}
	holder := "n"
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n",
		Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder,
			RenewTime: &metav1.MicroTime{Time: now.Time}}}
	h := managertest.New(t, "test", []descriptor.Descriptor{nodelifecycle.Descriptor(o)},
		node, l).Start()
	managertest.Eventually(t, "the node Unknown and tainted", func() bool {
		n, err := h.Client.CoreV1().Nodes().Get(t.Context(), "n", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tainted := false
		for _, tt := range n.Spec.Taints {
			tainted = tainted || tt.Key == corev1.TaintNodeUnreachable &&
				tt.Effect == corev1.TaintEffectNoSchedule
		}
		return tainted && n.Status.Conditions[0].Status == corev1.ConditionUnknown
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
