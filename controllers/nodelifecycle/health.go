package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/util/workqueue"
)

// Reasons and messages of the conditions the controller writes, KCM's.
const (
	reasonNeverUpdated  = "NodeStatusNeverUpdated"
	messageNeverUpdated = "Kubelet never posted node status."
	reasonUnknown       = "NodeStatusUnknown"
	messageUnknown      = "Kubelet stopped posting node status."
)

// excludeDisruptionLabel keeps a node out of its zone's state.
const excludeDisruptionLabel = "node.kubernetes.io/exclude-disruption"

// unknownConditions are the conditions set to Unknown when a node goes
// silent; NetworkUnavailable is left to the control plane, as in KCM.
var unknownConditions = []corev1.NodeConditionType{corev1.NodeReady,
	corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}

// nodeHealth is what the controller last saw of a node, and when (by its
// own clock: the node's timestamps are not trusted across clock skew).
type nodeHealth struct {
	probeTimestamp           metav1.Time
	readyTransitionTimestamp metav1.Time
	status                   *corev1.NodeStatus
	lease                    *coordinationv1.Lease
}

func (h *nodeHealth) deepCopy() *nodeHealth {
	if h == nil {
		return nil
	}
	return &nodeHealth{probeTimestamp: h.probeTimestamp,
		readyTransitionTimestamp: h.readyTransitionTimestamp,
		status:                   h.status.DeepCopy(), lease: h.lease.DeepCopy()}
}

type healthMap struct {
	mu    sync.RWMutex
	nodes map[string]*nodeHealth
}

func newHealthMap() *healthMap { return &healthMap{nodes: map[string]*nodeHealth{}} }

func (m *healthMap) get(name string) *nodeHealth {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.nodes[name].deepCopy()
}

func (m *healthMap) set(name string, h *nodeHealth) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[name] = h
}

func readyCondition(s *corev1.NodeStatus) *corev1.NodeCondition {
	return nodeCondition(s, corev1.NodeReady)
}

func nodeCondition(s *corev1.NodeStatus, t corev1.NodeConditionType) *corev1.NodeCondition {
	if s == nil {
		return nil
	}
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

func (c *controller) now() metav1.Time { return metav1.NewTime(c.clock.Now()) }

// leaseStale is the circuit breaker's verdict: the Lease cache is behind
// a live read; no node is judged until it catches up.
type leaseStale struct{ err error }

func (e leaseStale) Error() string { return e.err.Error() }
func (e leaseStale) Unwrap() error { return e.err }

// leaseConsistency remembers the newest live Lease resourceVersion the
// breaker read, until the Lease informer's store has synced past it.
type leaseConsistency struct {
	store any // has LastStoreSyncResourceVersion when client-go tracks it
	mu    sync.Mutex
	wrote string
}

func newLeaseConsistency(store any) *leaseConsistency {
	return &leaseConsistency{store: store}
}

func (l *leaseConsistency) readAt(rv string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote != "" {
		if cmp, err := resourceversion.CompareResourceVersion(l.wrote, rv); err == nil &&
			cmp >= 0 {
			return
		}
	}
	l.wrote = rv
}

// ready is nil once the cache holds what was read live (or when the
// informer does not say what it holds, or versions do not compare).
func (l *leaseConsistency) ready() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote == "" {
		return nil
	}
	s, ok := l.store.(interface{ LastStoreSyncResourceVersion() string })
	if ok {
		if read := s.LastStoreSyncResourceVersion(); read != "" {
			cmp, err := resourceversion.CompareResourceVersion(l.wrote, read)
			if err == nil && cmp > 0 {
				return fmt.Errorf("read version: %s is not as new as written version: "+
					"%s for group resource leases.coordination.k8s.io", read, l.wrote)
			}
		}
	}
	l.wrote = ""
	return nil
}

// monitorNodeHealth is one health pass over every cached node: nodes
// silent past their grace period are marked Unknown, nodes not Ready are
// queued for the NoExecute taint and their pods marked not ready, and the
// zones' states and eviction rates follow.
func (c *controller) monitorNodeHealth(ctx context.Context) error {
	start := c.clock.Now()
	defer func() { c.metrics.allNodesHealth.Observe(c.clock.Since(start).Seconds()) }()
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	log := logr.FromContextOrDiscard(ctx)
	added, deleted, newZones := c.classifyNodes(nodes)
	for _, n := range newZones {
		c.addZone(log, n)
	}
	for _, n := range added {
		log.V(1).Info("Controller observed a new Node", "node", n.Name)
		c.nodeEvent(n.Name, n.UID, corev1.EventTypeNormal, "RegisteredNode",
			fmt.Sprintf("Registered Node %v in Controller", n.Name))
		c.knownNodes[n.Name] = n
		c.addZone(log, n)
		if _, err := c.markNodeAsReachable(ctx, n); err != nil {
			log.Error(err, "Failed to remove NoExecute taints", "node", n.Name)
		}
	}
	for _, n := range deleted {
		log.V(1).Info("Controller observed a Node deletion", "node", n.Name)
		c.nodeEvent(n.Name, n.UID, corev1.EventTypeNormal, "RemovingNode",
			fmt.Sprintf("Removing Node %v from Controller", n.Name))
		delete(c.knownNodes, n.Name)
	}
	var mu sync.Mutex
	zones := map[string][]*corev1.NodeCondition{}
	workqueue.ParallelizeUntil(ctx, nodeWorkers, len(nodes), func(i int) {
		c.updateNode(ctx, nodes[i], &mu, zones)
	})
	c.handleDisruption(ctx, zones, nodes)
	return nil
}

// updateNode judges one node's health and acts on it.
func (c *controller) updateNode(ctx context.Context, cached *corev1.Node, mu *sync.Mutex,
	zones map[string][]*corev1.NodeCondition) {
	start := c.clock.Now()
	defer func() { c.metrics.nodeHealth.Observe(c.clock.Since(start).Seconds()) }()
	log := logr.FromContextOrDiscard(ctx).WithValues("node", cached.Name)
	node := cached.DeepCopy()
	var observed corev1.NodeCondition
	var current *corev1.NodeCondition
	for attempt := 1; ; attempt++ {
		var err error
		observed, current, err = c.tryUpdateNodeHealth(ctx, node)
		if err == nil {
			break
		}
		if _, ok := errors.AsType[leaseStale](err); ok && c.breaker {
			log.Error(err, "Skipping the node's health this pass: the Lease cache is stale")
			return
		}
		if attempt >= healthAttempts {
			log.Error(err, "Updating the node's health failed; skipping it this pass")
			return
		}
		if !c.sleep(ctx, c.retryWait) {
			return
		}
		if node, err = c.client.CoreV1().Nodes().Get(ctx, cached.Name,
			metav1.GetOptions{}); err != nil {
			log.Error(err, "Getting the node to retry its health update failed")
			return
		}
	}
	if _, ok := node.Labels[excludeDisruptionLabel]; !ok {
		zone := zoneKey(node)
		mu.Lock()
		zones[zone] = append(zones[zone], current)
		mu.Unlock()
	}
	if current != nil {
		pods, err := c.podsOn(node.Name)
		if err != nil {
			log.Error(err, "Listing the node's pods failed")
			if current.Status != corev1.ConditionTrue &&
				observed.Status == corev1.ConditionTrue {
				c.nodesToRetry.Store(node.Name, struct{}{})
			}
			return
		}
		c.processTaintBasedEviction(ctx, node, current)
		_, retry := c.nodesToRetry.Load(node.Name)
		turned := current.Status != corev1.ConditionTrue &&
			observed.Status == corev1.ConditionTrue
		if turned {
			c.recorder.Eventf(nodeRef(node.Name, node.UID), corev1.EventTypeNormal,
				"NodeNotReady", "Node %s status is now: %s", node.Name, "NodeNotReady")
		}
		if turned || (retry && observed.Status != corev1.ConditionTrue) {
			if err := c.markPodsNotReady(ctx, pods, node.Name); err != nil {
				log.Error(err, "Marking the node's pods not ready failed; retrying next pass")
				c.nodesToRetry.Store(node.Name, struct{}{})
				return
			}
		}
	}
	c.nodesToRetry.Delete(node.Name)
}

// sleep waits d (real time: a retry's short pause); false if ctx ended.
func (c *controller) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// nodeEvent records an event on the node named name, worded as KCM's.
func (c *controller) nodeEvent(name string, uid types.UID, kind, reason, msg string) {
	c.recorder.Eventf(nodeRef(name, uid), kind, reason, "Node %s event: %s", name, msg)
}

func nodeRef(name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: uid}
}

// tryUpdateNodeHealth brings the node's health record up to date from its
// status and Lease, and marks its conditions Unknown (written to the API
// server) when it has been silent past its grace period. It returns the
// Ready condition as observed and as it is now.
func (c *controller) tryUpdateNodeHealth(ctx context.Context,
	node *corev1.Node) (corev1.NodeCondition, *corev1.NodeCondition, error) {
	health := c.health.get(node.Name)
	defer func() { c.health.set(node.Name, health) }()
	if c.breaker {
		if err := c.consistency.ready(); err != nil {
			return corev1.NodeCondition{}, nil, leaseStale{err}
		}
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("node", node.Name)
	var observed corev1.NodeCondition
	var grace time.Duration
	current := readyCondition(&node.Status)
	if current == nil {
		// Never posted: a made-up Unknown condition dated at creation.
		observed = corev1.NodeCondition{Type: corev1.NodeReady,
			Status:            corev1.ConditionUnknown,
			LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: node.CreationTimestamp}
		grace = c.o.NodeStartupGracePeriod
		if health != nil {
			health.status = &node.Status
		} else {
			health = &nodeHealth{status: &node.Status, probeTimestamp: node.CreationTimestamp,
				readyTransitionTimestamp: node.CreationTimestamp}
		}
	} else {
		observed = *current
		grace = c.o.NodeMonitorGracePeriod
	}
	var saved *corev1.NodeCondition
	var savedLease *coordinationv1.Lease
	if health != nil {
		saved = readyCondition(health.status)
		savedLease = health.lease
	}
	fresh := func() *nodeHealth {
		return &nodeHealth{status: &node.Status, probeTimestamp: c.now(),
			readyTransitionTimestamp: c.now()}
	}
	switch {
	case health == nil:
		log.Info("Missing timestamp for Node. Assuming now as a timestamp")
		health = fresh()
	case saved == nil && current != nil:
		log.V(1).Info("Creating timestamp entry for newly observed Node")
		health = fresh()
	case saved != nil && current == nil:
		log.Error(nil, "ReadyCondition was removed from Status of Node")
		health = fresh()
	case saved != nil && current != nil &&
		!saved.LastHeartbeatTime.Equal(&current.LastHeartbeatTime):
		transition := health.readyTransitionTimestamp
		if !saved.LastTransitionTime.Equal(&current.LastTransitionTime) {
			log.V(3).Info("ReadyCondition for Node transitioned")
			transition = c.now()
		}
		health = &nodeHealth{status: &node.Status, probeTimestamp: c.now(),
			readyTransitionTimestamp: transition}
	}
	// A renewed Lease is a probe, whatever the status says.
	lease, _ := c.leases.Leases(corev1.NamespaceNodeLease).Get(node.Name)
	if lease != nil &&
		(savedLease == nil || savedLease.Spec.RenewTime.Before(lease.Spec.RenewTime)) {
		health.lease = lease
		health.probeTimestamp = c.now()
	}
	if !c.clock.Now().After(health.probeTimestamp.Add(grace)) {
		return observed, current, nil
	}
	if c.breaker {
		// The cached Lease says expired: check the live one.
		var cachedRV string
		if health.lease != nil {
			cachedRV = health.lease.ResourceVersion
		}
		live, err := c.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx,
			node.Name, metav1.GetOptions{})
		switch {
		case err == nil && live.ResourceVersion != cachedRV:
			c.consistency.readAt(live.ResourceVersion)
			return corev1.NodeCondition{}, nil, leaseStale{fmt.Errorf(
				"read version: %s is not as new as written version: %s for group resource "+
					"leases.coordination.k8s.io", cachedRV, live.ResourceVersion)}
		case err != nil && !apierrors.IsNotFound(err):
			return corev1.NodeCondition{}, nil, leaseStale{fmt.Errorf(
				"error looking up lease to verify node %s: %w", node.Name, err)}
		}
	}
	now := c.now()
	for _, t := range unknownConditions {
		cond := nodeCondition(&node.Status, t)
		if cond == nil {
			log.V(2).Info("Condition of node was never updated by kubelet", "condition", t)
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
				Type: t, Status: corev1.ConditionUnknown,
				Reason: reasonNeverUpdated, Message: messageNeverUpdated,
				LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: now})
			continue
		}
		log.V(2).Info("Node hasn't been updated", "condition", t,
			"duration", c.clock.Since(health.probeTimestamp.Time))
		if cond.Status != corev1.ConditionUnknown {
			cond.Status = corev1.ConditionUnknown
			cond.Reason, cond.Message = reasonUnknown, messageUnknown
			cond.LastTransitionTime = now
		}
	}
	current = readyCondition(&node.Status)
	if apiequality.Semantic.DeepEqual(current, &observed) {
		return observed, current, nil
	}
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, node,
		metav1.UpdateOptions{}); err != nil {
		return observed, current, fmt.Errorf("updating the status of node %s: %w",
			node.Name, err)
	}
	health = &nodeHealth{status: &node.Status, probeTimestamp: health.probeTimestamp,
		readyTransitionTimestamp: c.now(), lease: lease}
	return observed, current, nil
}
