package nodelifecycle

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// zoneFixture is n Ready nodes of zone z with Leases, after a first pass.
func zoneFixture(t *testing.T, o Options, n int) *fixture {
	var objs []runtime.Object
	for i := range n {
		name := fmt.Sprint("n", i)
		objs = append(objs, readyNode(name, "z"), lease(name, epoch))
	}
	f := newFixture(t, o, objs...)
	f.pass()
	return f
}

// lapseAllBut passes the grace period with only the first ready nodes
// renewing, and runs a pass.
func (f *fixture) lapseAllBut(ready int) {
	f.clock.Step(11 * time.Second)
	for i := range ready {
		f.renew(fmt.Sprint("n", i))
	}
	f.pass()
}

const zoneZ = ":\x00:z" // GetZoneKey: region, ":\x00:", zone

// TestZoneStates: rates follow the zone's state.
func TestZoneStates(t *testing.T) {
	tests := []struct {
		name      string
		nodes     int
		ready     int
		threshold int32
		state     zoneState
		rate      float32
	}{
		{"healthy", 5, 5, 50, stateNormal, 0.1},
		{"two of five down: normal", 5, 3, 50, stateNormal, 0.1},
		{"three of five down, small zone: stopped", 5, 2, 50, statePartialDisruption, 1},
		{"three of five down, large zone: secondary", 5, 2, 4, statePartialDisruption, 0.01},
		{"all down: stopped", 3, 0, 50, stateFullDisruption, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			o.LargeClusterSizeThreshold = tc.threshold
			f := zoneFixture(t, o, tc.nodes)
			f.lapseAllBut(tc.ready)
			if got := f.c.zoneStates[zoneZ]; got != tc.state {
				t.Errorf("state %s, want %s", got, tc.state)
			}
			if got := f.c.zoneQueues[zoneZ].rate(); got != tc.rate {
				t.Errorf("rate %v, want %v (a stopped limiter says 1)", got, tc.rate)
			}
		})
	}
}

// TestExitFullDisruption: when a node of a fully disrupted cluster is
// Ready again, probe times restart and the zone's rate comes back.
func TestExitFullDisruption(t *testing.T) {
	f := zoneFixture(t, testOptions(), 2)
	f.lapseAllBut(0)
	if got := f.c.zoneStates[zoneZ]; got != stateFullDisruption {
		t.Fatalf("state %s", got)
	}
	// n0 renews; its Ready condition stays Unknown until its kubelet
	// posts, so the zone stays fully disrupted.
	f.clock.Step(time.Second)
	f.renew("n0")
	n := f.node("n0")
	ready := readyCondition(&n.Status)
	ready.Status = corev1.ConditionTrue
	ready.LastHeartbeatTime.Time = f.clock.Now()
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(t.Context(), n,
		updateOptions); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.pass()
	if got := f.c.zoneStates[zoneZ]; got != stateNormal {
		t.Fatalf("state %s, want Normal", got)
	}
	if got := f.c.zoneQueues[zoneZ].rate(); got != 0.1 {
		t.Errorf("rate %v", got)
	}
	// Probe times restarted: n1 is not judged again before a new grace
	// period.
	if h := f.c.health.get("n1"); !h.probeTimestamp.Time.Equal(f.clock.Now()) {
		t.Errorf("n1 probed at %v, want now", h.probeTimestamp)
	}
}

// TestLeaseConsistency: the breaker's record holds until the store has
// synced past it.
func TestLeaseConsistency(t *testing.T) {
	s := &rvStore{}
	l := newLeaseConsistency(s)
	if err := l.ready(); err != nil {
		t.Fatal(err)
	}
	l.readAt("7")
	l.readAt("5") // older: kept at 7
	s.rv = "6"
	if err := l.ready(); err == nil {
		t.Fatal("ready with the store at 6 of 7")
	}
	s.rv = "7"
	if err := l.ready(); err != nil {
		t.Fatal(err)
	}
	l.readAt("9")
	s.rv = "" // not tracked: trusted
	if err := l.ready(); err != nil {
		t.Fatal(err)
	}
	s.rv = "1"
	if err := l.ready(); err != nil {
		t.Fatalf("the record was not cleared: %v", err)
	}
}

type rvStore struct{ rv string }

func (s *rvStore) LastStoreSyncResourceVersion() string { return s.rv }

// TestNoExecuteSwap: a node tainted not-ready:NoExecute that goes
// Unknown is swapped to unreachable at once, without waiting for a token;
// the eviction is counted once, by the tainting pass that added the first.
func TestNoExecuteSwap(t *testing.T) {
	f := zoneFixture(t, testOptions(), 2)
	// n0's kubelet says NotReady.
	f.clock.Step(time.Second)
	n := f.node("n0")
	ready := readyCondition(&n.Status)
	ready.Status = corev1.ConditionFalse
	ready.LastHeartbeatTime.Time = f.clock.Now()
	ready.LastTransitionTime.Time = f.clock.Now()
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(t.Context(), n,
		updateOptions); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.renew("n1")
	f.pass()
	f.taintPass()
	if got := taintKeys(f.node("n0")); len(got) != 1 ||
		got[0] != "node.kubernetes.io/not-ready:NoExecute" {
		t.Fatalf("taints %v", got)
	}
	// Then it goes silent: the swap needs no token (there is none left).
	// As in KCM, the pass after a status heartbeat forgets the Lease seen
	// with the old status, takes the Lease as renewed and probes again, so
	// the silence counts from then.
	for range 2 {
		f.clock.Step(11 * time.Second)
		f.renew("n1")
		f.pass()
	}
	if got := taintKeys(f.node("n0")); len(got) != 1 ||
		got[0] != "node.kubernetes.io/unreachable:NoExecute" {
		t.Fatalf("taints after the swap %v", got)
	}
	if got := value(t, f.c.metrics.evictions.WithLabelValues(zoneZ)); got != 1 {
		t.Errorf("evictions_total %v, want 1", got)
	}
	if got := value(t, f.c.metrics.unhealthyNodes.WithLabelValues(zoneZ)); got != 1 {
		t.Errorf("unhealthy_nodes_in_zone %v, want 1", got)
	}
	if got := value(t, f.c.metrics.zoneHealth.WithLabelValues(zoneZ)); got != 50 {
		t.Errorf("zone_health %v, want 50", got)
	}
}

// value reads a gauge or counter.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

func TestZoneKey(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{"x": "y"}, ""},
		{map[string]string{corev1.LabelTopologyZone: "z"}, ":\x00:z"},
		{map[string]string{corev1.LabelTopologyZone: "z", corev1.LabelFailureDomainBetaZone: "old",
			corev1.LabelTopologyRegion: "r"}, "r:\x00:old"},
		{map[string]string{corev1.LabelFailureDomainBetaRegion: "r"}, "r:\x00:"},
	}
	for _, tc := range tests {
		n := &corev1.Node{}
		n.Labels = tc.labels
		if got := zoneKey(n); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.labels, got, tc.want)
		}
	}
}
