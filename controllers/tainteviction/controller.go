package tainteviction

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workers is one: a sync only reads the caches and schedules or cancels
// deletions, which run on goroutines of their own. One worker also keeps
// a node's taints and its pods' decisions in order, which KCM gets by
// hashing a node and its pods to one of its eight workers.
const workers = 1

// deleteAttempts and attemptPause are KCM's: a deletion is tried five
// times, 10ms apart.
const (
	deleteAttempts = 5
	attemptPause   = 10 * time.Millisecond
)

// Queue keys: "node/<name>", and "pod/<namespace>/<name>/<node>" with the
// node the pod was bound to when the event came ("" if none), so that a
// deleted pod's key still names it.
const (
	nodePrefix = "node/"
	podPrefix  = "pod/"
)

// controller deletes the pods that do not tolerate their node's NoExecute
// taints, at once or once their toleration seconds run out.
type controller struct {
	client     kubernetes.Interface
	pods       corelisters.PodLister
	podIndexer cache.Indexer
	nodes      corelisters.NodeLister
	recorder   record.EventRecorder
	clock      clock.WithDelayedExecution
	metrics    *metrics
	// comparisons is the TaintTolerationComparisonOperators gate.
	comparisons bool

	loop      *workloop.Loop
	evictions *evictions

	mu sync.Mutex
	// tainted holds the NoExecute taints of every node that has some.
	tainted map[string][]corev1.Taint
}

func newController(cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	m, err := metricsOn(cc.Metrics)
	if err != nil {
		return nil, err
	}
	podInf := cc.InformerFactory.Core().V1().Pods()
	nodeInf := cc.InformerFactory.Core().V1().Nodes()
	if err := index.AddPodsByNode(podInf.Informer()); err != nil {
		return nil, fmt.Errorf("adding the pods-by-node index: %w", err)
	}
	c := &controller{
		client:      client,
		pods:        podInf.Lister(),
		podIndexer:  podInf.Informer().GetIndexer(),
		nodes:       nodeInf.Lister(),
		recorder:    cc.EventRecorder,
		clock:       o.Clock,
		metrics:     m,
		comparisons: gate.Enabled(cc.FeatureGate, FeatureTaintTolerationComparisonOperators, false),
		tainted:     map[string][]corev1.Taint{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	c.evictions = newEvictions(c.clock, c.evict)
	// The loop exists before the handlers: a running informer (warm
	// standby) calls them at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	if err := c.loop.Watch(podInf.Informer(), workloop.EnqueueMapped(podKeys),
		podChanged); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	if err := c.loop.Watch(nodeInf.Informer(), workloop.EnqueueMapped(nodeKeys),
		taintsChanged); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then evicts until ctx is done; it cancels the
// deletions still waiting and waits for those running before it returns.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Evicting pods from nodes with NoExecute taints")
	defer log.Info("Stopped evicting pods")
	defer c.evictions.stop()
	return c.loop.RunWorkers(ctx, workers)
}

func podKeys(obj any) []string {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	return []string{podPrefix + p.Namespace + "/" + p.Name + "/" + p.Spec.NodeName}
}

func nodeKeys(obj any) []string {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil
	}
	return []string{nodePrefix + n.Name}
}

// podChanged passes adds, deletes, and updates that changed the pod's node
// or its tolerations.
func podChanged(old, obj any) bool {
	before, ok := old.(*corev1.Pod)
	if !ok {
		return true
	}
	after, ok := obj.(*corev1.Pod)
	return !ok || before.Spec.NodeName != after.Spec.NodeName ||
		!equality.Semantic.DeepEqual(tolerationsOf(before), tolerationsOf(after))
}

// tolerationsOf is a pod's tolerations, nil and empty alike.
func tolerationsOf(p *corev1.Pod) []corev1.Toleration {
	if len(p.Spec.Tolerations) == 0 {
		return []corev1.Toleration{}
	}
	return p.Spec.Tolerations
}

// taintsChanged passes adds, deletes, and updates that changed the node's
// NoExecute taints.
func taintsChanged(old, obj any) bool {
	before, ok := old.(*corev1.Node)
	if !ok {
		return true
	}
	after, ok := obj.(*corev1.Node)
	return !ok || !equality.Semantic.DeepEqual(noExecute(before.Spec.Taints),
		noExecute(after.Spec.Taints))
}

// noExecute returns the NoExecute taints of taints, never nil.
func noExecute(taints []corev1.Taint) []corev1.Taint {
	out := []corev1.Taint{}
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

func (c *controller) sync(ctx context.Context, key string) error {
	if name, ok := strings.CutPrefix(key, nodePrefix); ok {
		return c.syncNode(ctx, name)
	}
	rest, ok := strings.CutPrefix(key, podPrefix)
	parts := strings.SplitN(rest, "/", 3)
	if !ok || len(parts) != 3 {
		return workloop.Permanent(fmt.Errorf("malformed queue key %q", key))
	}
	return c.syncPod(ctx, parts[0], parts[1], parts[2])
}

// syncNode records the node's NoExecute taints and decides for each of
// its pods.
func (c *controller) syncNode(ctx context.Context, name string) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("node", name)
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		// Its pods' scheduled deletions stand, as in KCM.
		log.V(4).Info("Noticed the node's deletion")
		c.setTaints(name, nil)
		return nil
	}
	if err != nil {
		return err
	}
	taints := noExecute(node.Spec.Taints)
	log.V(4).Info("Updating the node's known NoExecute taints", "taints", taints)
	// The taints are recorded before the pods are listed: a pod added
	// later is decided by its own event, against these taints.
	c.setTaints(name, taints)
	objs, err := c.podIndexer.ByIndex(index.PodsByNode, name)
	if err != nil {
		return fmt.Errorf("listing the pods of node %s: %w", name, err)
	}
	if len(taints) == 0 {
		if len(objs) > 0 {
			log.V(4).Info("No NoExecute taint left: cancelling the node's pods' evictions")
		}
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				c.cancel(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
			}
		}
		return nil
	}
	now := c.clock.Now()
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			c.decide(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name},
				p.Spec.Tolerations, taints, now)
		}
	}
	return nil
}

func (c *controller) setTaints(node string, taints []corev1.Taint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(taints) == 0 {
		delete(c.tainted, node)
		return
	}
	c.tainted[node] = taints
}

func (c *controller) taintsOf(node string) ([]corev1.Taint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tainted[node]
	return t, ok
}

// syncPod decides for one pod: its deletion is cancelled when it is gone;
// a pod bound to a node with NoExecute taints is judged against them.
func (c *controller) syncPod(ctx context.Context, ns, name, node string) error {
	key := types.NamespacedName{Namespace: ns, Name: name}
	log := logr.FromContextOrDiscard(ctx).WithValues("pod", key.String())
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		log.V(4).Info("Noticed the pod's deletion")
		c.cancel(ctx, key)
		return nil
	}
	if err != nil {
		return err
	}
	// A key of the node the pod was on before is the other key's to decide.
	if pod.Spec.NodeName != node || node == "" {
		return nil
	}
	taints, ok := c.taintsOf(node)
	if !ok {
		// The node has no NoExecute taint (or is gone): the node's sync
		// cancelled what there was to cancel.
		return nil
	}
	log.V(4).Info("Noticed a change of the pod's tolerations or node")
	c.decide(ctx, key, pod.Spec.Tolerations, taints, c.clock.Now())
	return nil
}

// decide deletes a pod that does not tolerate every taint at once,
// schedules the deletion of one that tolerates them for a while (unless
// one is scheduled to happen sooner), and cancels the deletion of one that
// tolerates them forever.
func (c *controller) decide(ctx context.Context, key types.NamespacedName,
	tolerations []corev1.Toleration, taints []corev1.Taint, now time.Time) {
	log := logr.FromContextOrDiscard(ctx).WithValues("pod", key.String())
	if len(taints) == 0 {
		c.cancel(ctx, key)
		return
	}
	used, all := c.matching(ctx, taints, tolerations)
	if !all {
		log.V(2).Info("The pod does not tolerate every NoExecute taint of its node")
		c.cancel(ctx, key)
		c.evictions.schedule(ctx, key.String(), now, now)
		return
	}
	wait, forever := minToleration(used)
	if forever {
		log.V(4).Info("The pod tolerates its node's taints forever: no deletion")
		c.cancel(ctx, key)
		return
	}
	since, due := now, now.Add(wait)
	if e := c.evictions.scheduled(key.String()); e != nil {
		since = e.since
		if since.Add(wait).Before(due) {
			return
		}
		c.cancel(ctx, key)
	}
	c.evictions.schedule(ctx, key.String(), since, due)
}

// matching returns, for each taint, the first toleration that tolerates
// it; all is false when some taint has none (and then used is empty).
func (c *controller) matching(ctx context.Context, taints []corev1.Taint,
	tolerations []corev1.Toleration) (used []corev1.Toleration, all bool) {
	log := logr.FromContextOrDiscard(ctx)
	for i := range taints {
		found := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(log, &taints[i], c.comparisons) {
				used = append(used, tolerations[j])
				found = true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return used, true
}

// minToleration is the shortest of the tolerations' seconds: zero with no
// toleration or one of zero or fewer seconds; forever when none sets any.
func minToleration(used []corev1.Toleration) (wait time.Duration, forever bool) {
	if len(used) == 0 {
		return 0, false
	}
	least := int64(math.MaxInt64)
	for _, t := range used {
		if t.TolerationSeconds == nil {
			continue
		}
		if *t.TolerationSeconds <= 0 {
			return 0, false
		}
		least = min(least, *t.TolerationSeconds)
	}
	if least == math.MaxInt64 {
		return 0, true
	}
	return time.Duration(least) * time.Second, false
}

// cancel cancels the pod's scheduled deletion, and records so on the pod.
func (c *controller) cancel(ctx context.Context, key types.NamespacedName) {
	if c.evictions.cancel(key.String()) {
		logr.FromContextOrDiscard(ctx).V(4).Info("Cancelled the pod's deletion",
			"pod", key.String())
		c.event(key, "Cancelling deletion of Pod %s")
	}
}

func (c *controller) event(key types.NamespacedName, format string) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod",
		Namespace: key.Namespace, Name: key.Name}
	c.recorder.Eventf(ref, corev1.EventTypeNormal, eventReason, format, key.String())
}

// evict is a deletion come due: an event, then up to five attempts to
// mark the pod as a disruption target and delete it.
func (c *controller) evict(ctx context.Context, key string, due time.Time) error {
	ns, name, _ := strings.Cut(key, "/")
	nsName := types.NamespacedName{Namespace: ns, Name: name}
	logr.FromContextOrDiscard(ctx).Info("Deleting pod", "controller", Name, "pod", key)
	c.event(nsName, "Marking for deletion Pod %s")
	var err error
	for attempt := range deleteAttempts {
		if attempt > 0 {
			t := time.NewTimer(attemptPause)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		if err = c.markAndDelete(ctx, nsName); err == nil {
			c.metrics.deletions.Inc()
			c.metrics.latency.Observe(c.clock.Since(due).Seconds())
			return nil
		}
	}
	return err
}

// markAndDelete adds the DisruptionTarget condition to the pod as the
// API server has it (unless it has it already), then deletes the pod.
func (c *controller) markAndDelete(ctx context.Context, key types.NamespacedName) error {
	pods := c.client.CoreV1().Pods(key.Namespace)
	pod, err := pods.Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if status, changed := withDisruptionTarget(pod, c.clock.Now()); changed {
		patch, err := statusPatch(pod, status)
		if err != nil {
			return err
		}
		if _, err := pods.Patch(ctx, key.Name, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("patching the status of pod %s: %w", key, err)
		}
	}
	return pods.Delete(ctx, key.Name, metav1.DeleteOptions{})
}

// withDisruptionTarget returns the pod's status with the condition set, and
// whether that changed it. A condition already True keeps its transition
// time; its observed generation alone does not count as a change.
func withDisruptionTarget(pod *corev1.Pod, now time.Time) (corev1.PodStatus, bool) {
	status := *pod.Status.DeepCopy()
	cond := corev1.PodCondition{
		Type:               corev1.DisruptionTarget,
		ObservedGeneration: pod.Generation,
		Status:             corev1.ConditionTrue,
		Reason:             ConditionReason,
		Message:            conditionMessage,
		LastTransitionTime: metav1.NewTime(now),
	}
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != corev1.DisruptionTarget {
			continue
		}
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		same := old.Status == cond.Status && old.Reason == cond.Reason &&
			old.Message == cond.Message && old.LastProbeTime.Equal(&cond.LastProbeTime)
		*old = cond
		return status, !same
	}
	status.Conditions = append(status.Conditions, cond)
	return status, true
}

// statusPatch is the strategic merge patch from pod's status to status,
// with the pod's UID as a precondition.
func statusPatch(pod *corev1.Pod, status corev1.PodStatus) ([]byte, error) {
	before, err := json.Marshal(corev1.Pod{Status: pod.Status})
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID},
		Status: status})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(before, after, corev1.Pod{})
}
