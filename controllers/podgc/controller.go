package podgc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/passes"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

const (
	// deleteParallelism bounds the concurrent API calls of one pass.
	deleteParallelism = 16

	// evictedReason is the status reason the kubelet sets on pods it evicts.
	evictedReason = "Evicted"

	// Reason and message of the DisruptionTarget condition set on pods of
	// a deleted node.
	orphanedReason  = "DeletionByPodGC"
	orphanedMessage = "PodGC: node no longer exists"
)

// controller is one term's pod garbage collector. Only the goroutine running
// Run reads or writes suspects.
type controller struct {
	client     kubernetes.Interface
	pods       corelisters.PodLister
	nodes      corelisters.NodeLister
	synced     []cache.InformerSynced
	threshold  int
	period     time.Duration
	quarantine time.Duration
	clock      clock.WithTicker

	// suspects maps the name of each node that pods are bound to but the
	// informer does not know to when it was first seen missing.
	suspects map[string]time.Time
}

func newController(cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	pods := cc.InformerFactory.Core().V1().Pods()
	nodes := cc.InformerFactory.Core().V1().Nodes()
	return &controller{
		client:     client,
		pods:       pods.Lister(),
		nodes:      nodes.Lister(),
		synced:     []cache.InformerSynced{pods.Informer().HasSynced, nodes.Informer().HasSynced},
		threshold:  int(o.TerminatedPodGCThreshold),
		period:     o.GCCheckPeriod,
		quarantine: o.QuarantineTime,
		clock:      o.Clock,
		suspects:   map[string]time.Time{},
	}, nil
}

// Run waits for the pod and node caches, then runs a pass at once and the
// next a period after each pass ended (KCM's wait.Until), until ctx is
// done: a fake clock has a waiter only once a pass has ended.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil
	}
	log.Info(
		"Starting pod garbage collection",
		"period",
		c.period,
		"quarantine",
		c.quarantine,
		"terminatedPodThreshold",
		c.threshold,
	)
	defer log.Info("Stopped pod garbage collection")
	passes.Every(ctx, c.clock, c.period, c.gc)
	return nil
}

// gc is one pass.
func (c *controller) gc(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		log.Error(err, "Listing pods")
		return
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		log.Error(err, "Listing nodes")
		return
	}
	p := pass{handled: map[types.UID]bool{}}
	if c.threshold > 0 {
		c.gcTerminated(ctx, &p, pods)
	}
	c.gcOutOfService(ctx, &p, pods)
	c.gcOrphaned(ctx, &p, pods, nodes)
	c.gcUnscheduledTerminating(ctx, &p, pods)
}

// pass remembers the pods a pass already acted on.
type pass struct {
	handled map[types.UID]bool
}

// take returns the pods not yet handled in this pass and marks them handled.
func (p *pass) take(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if !p.handled[pod.UID] {
			p.handled[pod.UID] = true
			out = append(out, pod)
		}
	}
	return out
}

func isTerminated(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodRunning, corev1.PodUnknown:
		return false
	}
	return true
}

// gcTerminated deletes the terminated pods beyond the threshold: evicted
// first, then by creation time, then by name.
func (c *controller) gcTerminated(ctx context.Context, p *pass, pods []*corev1.Pod) {
	var terminated []*corev1.Pod
	for _, pod := range pods {
		if isTerminated(pod) {
			terminated = append(terminated, pod)
		}
	}
	excess := len(terminated) - c.threshold
	if excess <= 0 {
		return
	}
	slices.SortFunc(terminated, deletionOrder)
	logr.FromContextOrDiscard(ctx).
		Info("Deleting terminated pods above the threshold", "count", excess, "threshold", c.threshold)
	c.deleteAll(ctx, p.take(terminated[:excess]), nil, "terminated")
}

func deletionOrder(a, b *corev1.Pod) int {
	ae, be := isEvicted(a), isEvicted(b)
	switch {
	case ae && !be:
		return -1
	case be && !ae:
		return 1
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	}
	return strings.Compare(a.Name, b.Name)
}

func isEvicted(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == evictedReason
}

// gcOutOfService deletes terminating pods on nodes that are not ready and
// are tainted node.kubernetes.io/out-of-service.
func (c *controller) gcOutOfService(ctx context.Context, p *pass, pods []*corev1.Pod) {
	log := logr.FromContextOrDiscard(ctx)
	var victims []*corev1.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			continue
		}
		node, err := c.nodes.Get(pod.Spec.NodeName)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				log.Error(
					err,
					"Getting the node of a terminating pod",
					"node",
					pod.Spec.NodeName,
					"pod",
					podRef(pod),
				)
			}
			continue
		}
		if !isNodeReady(node) && hasTaint(node, corev1.TaintNodeOutOfService) {
			victims = append(victims, pod)
		}
	}
	if len(victims) == 0 {
		return
	}
	slices.SortFunc(victims, deletionOrder)
	log.V(4).Info("Deleting terminating pods on out-of-service nodes", "count", len(victims))
	c.deleteAll(ctx, p.take(victims), nil, "terminating on an out-of-service node")
}

func isNodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(node *corev1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// gcOrphaned deletes the pods of nodes that stayed missing for the
// quarantine time and that the API server confirms are gone.
func (c *controller) gcOrphaned(
	ctx context.Context,
	p *pass,
	pods []*corev1.Pod,
	nodes []*corev1.Node,
) {
	log := logr.FromContextOrDiscard(ctx)
	known := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		known[n.Name] = true
	}
	missing := map[string]bool{}
	for _, pod := range pods {
		if n := pod.Spec.NodeName; n != "" && !known[n] {
			missing[n] = true
		}
	}
	for n := range c.suspects {
		if !missing[n] {
			delete(c.suspects, n) // the node appeared, or its pods are gone
		}
	}
	now := c.clock.Now()
	gone := map[string]bool{}
	for n := range missing {
		first, seen := c.suspects[n]
		if !seen {
			c.suspects[n] = now
			continue
		}
		if now.Sub(first) < c.quarantine {
			continue
		}
		// Checked: a node that still has pods here later starts a new
		// quarantine, whatever the answer.
		delete(c.suspects, n)
		_, err := c.client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone[n] = true
		case err != nil:
			log.Error(err, "Checking whether a node missing from the informer exists", "node", n)
		}
	}
	if len(gone) == 0 {
		return
	}
	var orphans []*corev1.Pod
	for _, pod := range pods {
		if gone[pod.Spec.NodeName] {
			orphans = append(orphans, pod)
		}
	}
	log.V(2).Info("Deleting pods of deleted nodes", "count", len(orphans), "nodes", len(gone))
	c.deleteAll(ctx, p.take(orphans), &corev1.PodCondition{
		Type:    corev1.DisruptionTarget,
		Status:  corev1.ConditionTrue,
		Reason:  orphanedReason,
		Message: orphanedMessage,
	}, "orphaned")
}

// gcUnscheduledTerminating deletes terminating pods bound to no node.
func (c *controller) gcUnscheduledTerminating(ctx context.Context, p *pass, pods []*corev1.Pod) {
	var victims []*corev1.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil && pod.Spec.NodeName == "" {
			victims = append(victims, pod)
		}
	}
	c.deleteAll(ctx, p.take(victims), nil, "unscheduled terminating")
}

// deleteAll marks each pod failed (with cond, if any) and force-deletes it,
// with bounded parallelism; it returns once every call has ended.
func (c *controller) deleteAll(
	ctx context.Context,
	pods []*corev1.Pod,
	cond *corev1.PodCondition,
	why string,
) {
	if len(pods) == 0 {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	workqueue.ParallelizeUntil(ctx, min(deleteParallelism, len(pods)), len(pods), func(i int) {
		pod := pods[i]
		if err := c.failAndDelete(ctx, pod, cond); err != nil {
			log.Error(err, "Deleting pod", "pod", podRef(pod), "reason", why)
			return
		}
		log.Info("Force-deleted pod", "pod", podRef(pod), "node", pod.Spec.NodeName, "reason", why)
	})
}

// failAndDelete patches a pod that is not yet terminal to phase Failed, then
// deletes it with grace period 0. Both calls are preconditioned on the UID of
// the lister's copy, which is never modified. A pod that is already gone is
// not an error.
func (c *controller) failAndDelete(
	ctx context.Context,
	pod *corev1.Pod,
	cond *corev1.PodCondition,
) error {
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		status := pod.Status.DeepCopy()
		status.Phase = corev1.PodFailed
		status.ObservedGeneration = pod.Generation
		if cond != nil {
			withCondition(status, *cond, pod.Generation, metav1.NewTime(c.clock.Now()))
		}
		patch, err := statusPatch(pod.UID, pod.Status, *status)
		if err != nil {
			return err
		}
		_, err = c.client.CoreV1().
			Pods(pod.Namespace).
			Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("marking the pod failed: %w", err)
		}
	}
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// withCondition sets cond in status, keeping the old transition time when
// the condition's status does not change.
func withCondition(
	status *corev1.PodStatus,
	cond corev1.PodCondition,
	generation int64,
	now metav1.Time,
) {
	cond.ObservedGeneration = generation
	cond.LastTransitionTime = now
	for i := range status.Conditions {
		if status.Conditions[i].Type != cond.Type {
			continue
		}
		if status.Conditions[i].Status == cond.Status {
			cond.LastTransitionTime = status.Conditions[i].LastTransitionTime
		}
		status.Conditions[i] = cond
		return
	}
	status.Conditions = append(status.Conditions, cond)
}

// statusPatch is a strategic merge patch from old to updated that also
// carries uid, which the API server checks as a precondition.
func statusPatch(uid types.UID, old, updated corev1.PodStatus) ([]byte, error) {
	before, err := json.Marshal(corev1.Pod{Status: old})
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: updated})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(before, after, corev1.Pod{})
}

func podRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
