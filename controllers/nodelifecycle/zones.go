package nodelifecycle

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// zoneState is a zone's health, KCM's four.
type zoneState string

const (
	stateInitial           zoneState = "Initial"
	stateNormal            zoneState = "Normal"
	stateFullDisruption    zoneState = "FullDisruption"
	statePartialDisruption zoneState = "PartialDisruption"
)

// The NoExecute taints the controller manages, mutually exclusive.
var (
	unreachableTaint = corev1.Taint{Key: corev1.TaintNodeUnreachable,
		Effect: corev1.TaintEffectNoExecute}
	notReadyTaint = corev1.Taint{Key: corev1.TaintNodeNotReady,
		Effect: corev1.TaintEffectNoExecute}
)

// classifyNodes splits nodes into those not known before, the known ones
// gone, and known ones whose zone has no state (a zone dropped when it had
// no node left to judge).
func (c *controller) classifyNodes(nodes []*corev1.Node) (added, deleted,
	newZones []*corev1.Node) {
	c.zoneMu.Lock()
	for _, n := range nodes {
		if _, ok := c.knownNodes[n.Name]; !ok {
			added = append(added, n)
		} else if _, ok := c.zoneStates[zoneKey(n)]; !ok {
			newZones = append(newZones, n)
		}
	}
	c.zoneMu.Unlock()
	if len(c.knownNodes)+len(added) != len(nodes) {
		present := make(map[string]bool, len(nodes))
		for _, n := range nodes {
			present[n.Name] = true
		}
		for name, n := range c.knownNodes {
			if !present[name] {
				deleted = append(deleted, n)
			}
		}
	}
	return added, deleted, newZones
}

// addZone gives node's zone a state and a fresh tainting queue if it has
// no state.
func (c *controller) addZone(log logr.Logger, node *corev1.Node) {
	c.zoneMu.Lock()
	defer c.zoneMu.Unlock()
	zone := zoneKey(node)
	if _, ok := c.zoneStates[zone]; ok {
		return
	}
	c.zoneStates[zone] = stateInitial
	c.zoneQueues[zone] = newZoneQueue(c.clock, c.o.NodeEvictionRate)
	log.Info("Initializing eviction metric for zone", "zone", zone)
	c.metrics.evictions.WithLabelValues(zone).Add(0)
}

func (c *controller) zoneQueue(node *corev1.Node) *zoneQueue {
	c.zoneMu.Lock()
	defer c.zoneMu.Unlock()
	return c.zoneQueues[zoneKey(node)]
}

// processTaintBasedEviction swaps a NoExecute taint that no longer fits
// at once, queues a not-Ready node for its taint, and clears a Ready one.
func (c *controller) processTaintBasedEviction(ctx context.Context, node *corev1.Node,
	ready *corev1.NodeCondition) {
	log := logr.FromContextOrDiscard(ctx).WithValues("node", node.Name)
	swapOrQueue := func(want, opposite corev1.Taint, status corev1.ConditionStatus) {
		if hasTaint(node.Spec.Taints, opposite) {
			if !c.swapTaints(ctx, node, []corev1.Taint{want}, []corev1.Taint{opposite}) {
				log.Error(nil, "Failed to instantly swap NoExecute taints; retrying next pass",
					"add", want.Key, "remove", opposite.Key)
			}
		} else if c.markNodeForTainting(node, status) {
			log.V(2).Info("Node is not ready; queued for its NoExecute taint",
				"ready", status)
		}
	}
	switch ready.Status {
	case corev1.ConditionFalse:
		swapOrQueue(notReadyTaint, unreachableTaint, corev1.ConditionFalse)
	case corev1.ConditionUnknown:
		swapOrQueue(unreachableTaint, notReadyTaint, corev1.ConditionUnknown)
	case corev1.ConditionTrue:
		removed, err := c.markNodeAsReachable(ctx, node)
		if err != nil {
			log.Error(err, "Failed to remove taints from node; retrying next pass")
		}
		if removed {
			log.V(2).Info("Node is healthy again, removed all taints")
		}
	}
}

// markNodeForTainting queues node in its zone, first forgetting it if it
// lacks the taint its status calls for (so that it is queued again).
func (c *controller) markNodeForTainting(node *corev1.Node, status corev1.ConditionStatus) bool {
	q := c.zoneQueue(node)
	if q == nil {
		return false
	}
	if status == corev1.ConditionFalse && !hasTaint(node.Spec.Taints, notReadyTaint) ||
		status == corev1.ConditionUnknown && !hasTaint(node.Spec.Taints, unreachableTaint) {
		q.remove(node.Name)
	}
	return q.add(node.Name, string(node.UID))
}

// markNodeAsReachable removes both NoExecute taints and forgets the node
// in its zone's queue; true if it was queued.
func (c *controller) markNodeAsReachable(ctx context.Context, node *corev1.Node) (bool, error) {
	if err := c.removeTaints(ctx, node, unreachableTaint); err != nil {
		return false, err
	}
	if err := c.removeTaints(ctx, node, notReadyTaint); err != nil {
		return false, err
	}
	q := c.zoneQueue(node)
	return q != nil && q.remove(node.Name), nil
}

// noExecuteTaintingPass taints the due nodes of every zone, as each zone's
// rate allows.
func (c *controller) noExecuteTaintingPass(ctx context.Context) {
	c.zoneMu.Lock()
	queues := make([]*zoneQueue, 0, len(c.zoneQueues))
	for _, q := range c.zoneQueues {
		queues = append(queues, q)
	}
	c.zoneMu.Unlock()
	log := logr.FromContextOrDiscard(ctx)
	for _, q := range queues {
		q.try(func(v timedNode) (bool, time.Duration) {
			node, err := c.nodes.Get(v.name)
			if apierrors.IsNotFound(err) {
				log.Info("Node no longer present in nodeLister", "node", v.name)
				return true, 0
			} else if err != nil {
				log.Info("Failed to get Node from the nodeLister", "node", v.name, "err", err)
				return false, 50 * time.Millisecond
			}
			ready := readyCondition(&node.Status)
			if ready == nil {
				log.Info("Failed to get NodeCondition from the node status", "node", v.name)
				return false, 50 * time.Millisecond
			}
			var add, opposite corev1.Taint
			switch ready.Status {
			case corev1.ConditionFalse:
				add, opposite = notReadyTaint, unreachableTaint
			case corev1.ConditionUnknown:
				add, opposite = unreachableTaint, notReadyTaint
			default:
				log.V(4).Info("Node was in a taint queue, but it's ready now", "node", v.name)
				return true, 0
			}
			ok := c.swapTaints(ctx, node, []corev1.Taint{add}, []corev1.Taint{opposite})
			if ok {
				c.metrics.evictions.WithLabelValues(zoneKey(node)).Inc()
			}
			return ok, 0
		})
	}
}

// computeZoneState counts a zone's not-Ready nodes (a missing condition
// counts) and names its state.
func (c *controller) computeZoneState(conds []*corev1.NodeCondition) (int, zoneState) {
	ready, notReady := 0, 0
	for _, cond := range conds {
		if cond != nil && cond.Status == corev1.ConditionTrue {
			ready++
		} else {
			notReady++
		}
	}
	switch {
	case ready == 0 && notReady > 0:
		return notReady, stateFullDisruption
	case notReady > 2 &&
		float32(notReady)/float32(notReady+ready) >= c.o.UnhealthyZoneThreshold:
		return notReady, statePartialDisruption
	default:
		return notReady, stateNormal
	}
}

// reducedQPS is a partially disrupted zone's rate: the secondary rate in
// a large zone, none in a small one.
func (c *controller) reducedQPS(size int) float32 {
	if int32(size) > c.o.LargeClusterSizeThreshold {
		return c.o.SecondaryNodeEvictionRate
	}
	return 0
}

// setZoneRate sets zone's rate for state; zoneMu held.
func (c *controller) setZoneRate(zone string, size int, state zoneState) {
	q := c.zoneQueues[zone]
	if q == nil {
		return
	}
	switch state {
	case stateNormal, stateFullDisruption:
		q.swapLimiter(c.o.NodeEvictionRate)
	case statePartialDisruption:
		q.swapLimiter(c.reducedQPS(size))
	}
}

// handleDisruption updates the zones' states and rates from this pass's
// Ready conditions. When every zone is fully disrupted (the control plane
// is more likely cut off than every node down), NoExecute taints are
// removed everywhere and tainting stops until a node is Ready again.
func (c *controller) handleDisruption(ctx context.Context,
	zones map[string][]*corev1.NodeCondition, nodes []*corev1.Node) {
	log := logr.FromContextOrDiscard(ctx)
	next := map[string]zoneState{}
	allFully := true
	c.zoneMu.Lock()
	for zone, conds := range zones {
		c.metrics.zoneSize.WithLabelValues(zone).Set(float64(len(conds)))
		unhealthy, state := c.computeZoneState(conds)
		c.metrics.zoneHealth.WithLabelValues(zone).Set(
			float64(100*(len(conds)-unhealthy)) / float64(len(conds)))
		c.metrics.unhealthyNodes.WithLabelValues(zone).Set(float64(unhealthy))
		if state != stateFullDisruption {
			allFully = false
		}
		next[zone] = state
		if _, ok := c.zoneStates[zone]; !ok {
			log.Error(nil, "Setting initial state for unseen zone", "zone", zone)
			c.zoneStates[zone] = stateInitial
		}
	}
	wasFully := true
	// As KCM: zones without nodes this pass are dropped, and the first zone
	// not fully disrupted ends the look (its state alone decides).
	for _, zone := range sortedZones(c.zoneStates) {
		state := c.zoneStates[zone]
		if _, ok := zones[zone]; !ok {
			c.metrics.zoneSize.WithLabelValues(zone).Set(0)
			c.metrics.zoneHealth.WithLabelValues(zone).Set(100)
			c.metrics.unhealthyNodes.WithLabelValues(zone).Set(0)
			delete(c.zoneStates, zone)
			continue
		}
		if state != stateFullDisruption {
			wasFully = false
			break
		}
	}
	if allFully && wasFully {
		c.zoneMu.Unlock()
		return
	}
	switch {
	case allFully:
		c.zoneMu.Unlock()
		log.Info("Controller detected that all Nodes are not-Ready. " +
			"Entering master disruption mode")
		for _, n := range nodes {
			if _, err := c.markNodeAsReachable(ctx, n); err != nil {
				log.Error(err, "Failed to remove taints from Node", "node", n.Name)
			}
		}
		c.zoneMu.Lock()
		for zone := range c.zoneStates {
			if q := c.zoneQueues[zone]; q != nil {
				q.swapLimiter(0)
			}
			c.zoneStates[zone] = stateFullDisruption
		}
	case wasFully:
		log.Info("Controller detected that some Nodes are Ready. " +
			"Exiting master disruption mode")
		now := c.now()
		for _, n := range nodes {
			if h := c.health.get(n.Name); h != nil {
				h.probeTimestamp, h.readyTransitionTimestamp = now, now
				c.health.set(n.Name, h)
			}
		}
		for zone := range c.zoneStates {
			c.setZoneRate(zone, len(zones[zone]), next[zone])
			c.zoneStates[zone] = next[zone]
		}
	default:
		for zone, state := range c.zoneStates {
			if next[zone] == state {
				continue
			}
			log.Info("Controller detected that zone is now in new state",
				"zone", zone, "newState", next[zone])
			c.setZoneRate(zone, len(zones[zone]), next[zone])
			c.zoneStates[zone] = next[zone]
		}
	}
	c.zoneMu.Unlock()
}

func sortedZones(states map[string]zoneState) []string {
	return slices.Sorted(maps.Keys(states))
}

// zoneKey is a node's zone as KCM keys it: the region and zone labels
// (the deprecated failure-domain ones first), joined by ":\x00:" (no
// label value holds a NUL), or "" for a node with neither.
func zoneKey(node *corev1.Node) string {
	label := func(deprecated, stable string) string {
		if v, ok := node.Labels[deprecated]; ok {
			return v
		}
		return node.Labels[stable]
	}
	zone := label(corev1.LabelFailureDomainBetaZone, corev1.LabelTopologyZone)
	region := label(corev1.LabelFailureDomainBetaRegion, corev1.LabelTopologyRegion)
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}
