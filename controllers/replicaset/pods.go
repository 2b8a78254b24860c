package replicaset

import (
	"math"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

// untilAvailable is how long after now a ready pod becomes available, or
// nil if it is not ready, already available, or has no ready time.
func untilAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) *time.Duration {
	if minReadySeconds <= 0 || !podstate.IsReady(p) {
		return nil
	}
	since := podstate.ReadyTime(p)
	if since.IsZero() {
		return nil
	}
	if d := since.Add(time.Duration(minReadySeconds) * time.Second).Sub(now); d > 0 {
		return &d
	}
	return nil
}

// nextAvailabilityCheck is when the earliest of pods that is ready but not
// yet available (as evaluated at evaluated) becomes available, measured from
// current; 0 if that moment has passed meanwhile; nil if no pod is waiting.
func nextAvailabilityCheck(
	pods []*corev1.Pod,
	minReadySeconds int32,
	evaluated, current time.Time,
) *time.Duration {
	var first *corev1.Pod
	var least time.Duration
	for _, p := range pods {
		if d := untilAvailable(p, minReadySeconds, evaluated); d != nil &&
			(first == nil || *d < least) {
			first, least = p, *d
		}
	}
	if first == nil {
		return nil
	}
	if d := untilAvailable(first, minReadySeconds, current); d != nil {
		return d
	}
	var zero time.Duration
	return &zero
}

// deletionCost is the pod's controller.kubernetes.io/pod-deletion-cost, 0
// when absent or invalid: not an int32, or starting with "+" or a leading
// zero (upstream's rule).
func deletionCost(p *corev1.Pod) int32 {
	v := p.Annotations[corev1.PodDeletionCost]
	if v == "" || !(v[0] == '-' || v == "0" || v[0] >= '1' && v[0] <= '9') {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// maxRestarts returns the highest restart count among regular containers
// and among restartable init containers (sidecars).
func maxRestarts(p *corev1.Pod) (regular, sidecar int32) {
	for _, s := range p.Status.ContainerStatuses {
		regular = max(regular, s.RestartCount)
	}
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if sidecars[s.Name] {
			sidecar = max(sidecar, s.RestartCount)
		}
	}
	return regular, sidecar
}

// phaseOrder: pending before unknown before running (anything else counts
// as pending).
func phaseOrder(p corev1.PodPhase) int {
	switch p {
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 0
}

// deletionOrder sorts pods so that the ones to delete come first, by the
// rules of upstream's ActivePodsWithRanks:
//
//  1. unscheduled before scheduled;
//  2. pending before unknown before running;
//  3. not ready before ready;
//  4. lower deletion cost first (when the PodDeletionCost feature is on);
//  5. higher rank first (rank: how many related pods share its node);
//  6. both ready: ready more recently first, compared on a log2 scale of
//     the time since, ties broken by UID;
//  7. more container restarts first (regular, then sidecar);
//  8. created more recently first, on the same log2 scale.
type deletionOrder struct {
	pods  []*corev1.Pod
	ranks []int
	now   time.Time
	cost  bool
}

func (s deletionOrder) Len() int { return len(s.pods) }

func (s deletionOrder) Swap(i, j int) {
	s.pods[i], s.pods[j] = s.pods[j], s.pods[i]
	s.ranks[i], s.ranks[j] = s.ranks[j], s.ranks[i]
}

func (s deletionOrder) Less(i, j int) bool {
	a, b := s.pods[i], s.pods[j]
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrder(a.Status.Phase), phaseOrder(b.Status.Phase); pa != pb {
		return pa < pb
	}
	ra, rb := podstate.IsReady(a), podstate.IsReady(b)
	if ra != rb {
		return !ra
	}
	if s.cost {
		if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
			return ca < cb
		}
	}
	if s.ranks[i] != s.ranks[j] {
		return s.ranks[i] > s.ranks[j]
	}
	if ra && rb {
		if ta, tb := podstate.ReadyTime(a), podstate.ReadyTime(b); !ta.Equal(tb) {
			return s.newer(a, b, ta, tb)
		}
	}
	regA, sideA := maxRestarts(a)
	regB, sideB := maxRestarts(b)
	if regA != regB {
		return regA > regB
	}
	if sideA != sideB {
		return sideA > sideB
	}
	if ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time; !ta.Equal(tb) {
		return s.newer(a, b, ta, tb)
	}
	return false
}

// newer reports whether ta (of a) counts as more recent than tb (of b).
// With a reference time, times whose age falls in the same power-of-two
// bucket are equal and the UID decides, so that pods of similar age are
// picked at random rather than always the very newest.
func (s deletionOrder) newer(a, b *corev1.Pod, ta, tb time.Time) bool {
	if s.now.IsZero() || ta.IsZero() || tb.IsZero() {
		return zeroOrAfter(ta, tb)
	}
	if d := ageBucket(s.now, ta) - ageBucket(s.now, tb); d != 0 {
		return d < 0
	}
	return a.UID < b.UID
}

// zeroOrAfter: a zero time is the most recent of all.
func zeroOrAfter(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b)
}

func ageBucket(now, t time.Time) int64 {
	d := now.Sub(t)
	if d <= 0 {
		return -1
	}
	return int64(math.Log2(float64(d)))
}

// podsToDelete returns the first diff pods of pods in deletion order.
// related are the active pods of every object sharing the owner's
// controller; each candidate is ranked by how many of them share its node.
// pods is not modified.
func podsToDelete(pods, related []*corev1.Pod, diff int, now time.Time, cost bool) []*corev1.Pod {
	if diff >= len(pods) {
		return append([]*corev1.Pod(nil), pods...)
	}
	perNode := map[string]int{}
	for _, p := range related {
		if podstate.IsActive(p) {
			perNode[p.Spec.NodeName]++
		}
	}
	order := deletionOrder{
		pods:  append([]*corev1.Pod(nil), pods...),
		ranks: make([]int, len(pods)),
		now:   now,
		cost:  cost,
	}
	for i, p := range order.pods {
		order.ranks[i] = perNode[p.Spec.NodeName]
	}
	sort.Sort(order)
	return order.pods[:diff]
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
