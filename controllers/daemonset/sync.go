package daemonset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// Event reasons this package records besides podcontrol's, as KCM has them.
const (
	// reasonSelectingAll: the DaemonSet's selector is empty; it is not
	// synced until that changes.
	reasonSelectingAll = "SelectingAll"
	// reasonFailedDaemonPod: a daemon pod failed and is deleted, to be
	// recreated (after back-off).
	reasonFailedDaemonPod = "FailedDaemonPod"
	// reasonSucceededDaemonPod: a daemon pod exited successfully and is
	// deleted, to be recreated.
	reasonSucceededDaemonPod = "SucceededDaemonPod"
)

// slowStartInitialBatch is the size of the first batch of creates.
const slowStartInitialBatch = 1

// sync brings one DaemonSet's revisions, pods and status in line with its
// spec. The workqueue never runs it concurrently for the same key.
func (c *controller) sync(ctx context.Context, key string) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("daemonset", key)
	ctx = logr.NewContext(ctx, log)
	start := c.clock.Now()
	defer func() { log.V(4).Info("Finished syncing daemon set", "duration", c.clock.Since(start)) }()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	ds, err := c.dsLister.DaemonSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		log.V(3).Info("Daemon set has been deleted")
		c.forgetExpectations(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading DaemonSet %s from the cache: %w", key, err)
	}
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	if s := ds.Spec.Selector; s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		c.recorder.Eventf(
			ds,
			corev1.EventTypeWarning,
			reasonSelectingAll,
			"This daemon set is selecting all pods. A non-empty selector is required.",
		)
		return nil
	}
	if ds.DeletionTimestamp != nil {
		// Its revisions may be going (or gone): neither pods nor status can
		// be worked out reliably.
		return nil
	}

	cur, old, err := c.history(ctx, ds)
	if err != nil {
		return fmt.Errorf("failed to construct revisions of DaemonSet: %w", err)
	}
	hash := cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]

	if !c.expectationsSatisfied(key) {
		// Status only; observedGeneration stays, this generation was not
		// acted on.
		return c.updateStatus(ctx, ds, nodes, hash, false)
	}
	err = c.update(ctx, ds, nodes, hash, key, old)
	statusErr := c.updateStatus(ctx, ds, nodes, hash, true)
	switch {
	case err != nil:
		if statusErr != nil {
			log.Error(statusErr, "Failed to update status")
		}
		return err
	default:
		return statusErr
	}
}

// update runs the pod work of one sync: placement, then (once expectations
// are met) the rolling update, then history cleanup.
func (c *controller) update(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	nodes []*corev1.Node,
	hash, key string,
	old []*appsv1.ControllerRevision,
) error {
	if err := c.manage(ctx, ds, nodes, hash); err != nil {
		return err
	}
	if c.expectationsSatisfied(key) &&
		ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if err := c.rollingUpdate(ctx, ds, nodes, hash); err != nil {
			return err
		}
	}
	if err := c.cleanupHistory(ctx, ds, old); err != nil {
		return fmt.Errorf("failed to clean up revisions of DaemonSet: %w", err)
	}
	return nil
}

// claimPods returns the pods ds controls, adopting matching orphans and
// releasing its pods that stopped matching. They come from the cache:
// read-only.
func (c *controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	candidates, err := index.OwnedAndOrphans(
		c.podIndexer,
		ds.Namespace,
		controllerKind.Kind,
		ds.Name,
		ds.UID,
	)
	if err != nil {
		return nil, err
	}
	m, err := ownership.New[*corev1.Pod](ownership.Config{
		Owner:     ds,
		OwnerKind: controllerKind,
		Selector:  sel,
		Patch:     c.pods.PatchPod,
		Recheck:   c.recheck(ds),
	})
	if err != nil {
		return nil, err
	}
	return m.Claim(ctx, candidates)
}

// podsByNode groups ds's pods by the node each is for. Terminated pods that
// are being deleted are left out unless withDeletedTerminal: nothing is
// left to do with them.
func (c *controller) podsByNode(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	withDeletedTerminal bool,
) (map[string][]*corev1.Pod, error) {
	pods, err := c.claimPods(ctx, ds)
	if err != nil {
		return nil, fmt.Errorf(
			"couldn't get node to daemon pod mapping for daemon set %q: %w",
			ds.Name,
			err,
		)
	}
	out := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if !withDeletedTerminal && isTerminal(p) && p.DeletionTimestamp != nil {
			continue
		}
		node, err := targetNode(p)
		if err != nil {
			logr.FromContextOrDiscard(ctx).
				V(4).
				Info("Failed to get target node name of daemon pod", "pod", podKey(p), "err", err.Error())
			continue
		}
		out[node] = append(out[node], p)
	}
	return out, nil
}

// manage creates daemon pods on the nodes that should run one and have
// none, and deletes the pods that should not run where they are: on nodes
// no longer eligible, failed or succeeded ones, all but the oldest on a
// node (all but the one or two a surge keeps), and unscheduled pods for
// nodes that no longer exist.
func (c *controller) manage(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	nodes []*corev1.Node,
	hash string,
) error {
	byNode, err := c.podsByNode(ctx, ds, false)
	if err != nil {
		return err
	}
	e := newEligibility(ds, c.comparisonTaints)
	var create, del []string
	for _, n := range nodes {
		cr, dl := c.podsForNode(ctx, n, byNode, ds, hash, e)
		create = append(create, cr...)
		del = append(del, dl...)
	}
	del = append(del, unscheduledWithoutNode(nodes, byNode)...)
	return c.syncNodes(ctx, ds, del, create, hash)
}

// podsForNode works out, for one node, whether a pod is to be created on
// it and which of its pods are to be deleted.
func (c *controller) podsForNode(
	ctx context.Context,
	node *corev1.Node,
	byNode map[string][]*corev1.Pod,
	ds *appsv1.DaemonSet,
	hash string,
	e eligibility,
) (create, del []string) {
	log := logr.FromContextOrDiscard(ctx)
	shouldRun, shouldContinue := e.check(node)
	pods, exists := byNode[node.Name]
	switch {
	case shouldRun && !exists:
		return []string{node.Name}, nil

	case shouldContinue:
		var running []*corev1.Pod
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			switch p.Status.Phase {
			case corev1.PodFailed:
				// Kubelets that reject a pod fail it at once: back off, so
				// that delete and create do not spin.
				bk := backoffKey(ds, node.Name)
				now := c.clock.Now()
				if c.backoff.IsInBackOffSinceUpdate(bk, now) {
					delay := c.backoff.Get(bk)
					log.V(4).
						Info("Deleting failed pod on node has been limited by backoff", "pod", podKey(p),
							"node", node.Name, "currentDelay", delay)
					c.enqueueAfter(keyOf(ds), delay)
					continue
				}
				c.backoff.Next(bk, now)
				log.V(2).
					Info("Found failed daemon pod on node, will try to kill it",
						"pod", podKey(p), "node", node.Name)
				c.recorder.Eventf(
					ds,
					corev1.EventTypeWarning,
					reasonFailedDaemonPod,
					"Found failed daemon pod %s/%s on node %s, will try to kill it",
					p.Namespace,
					p.Name,
					node.Name,
				)
				del = append(del, p.Name)
			case corev1.PodSucceeded:
				log.V(2).
					Info("Found succeeded daemon pod on node, will try to delete it",
						"pod", podKey(p), "node", node.Name)
				c.recorder.Eventf(
					ds,
					corev1.EventTypeNormal,
					reasonSucceededDaemonPod,
					"Found succeeded daemon pod %s/%s on node %s, will try to delete it",
					p.Namespace,
					p.Name,
					node.Name,
				)
				del = append(del, p.Name)
			default:
				running = append(running, p)
			}
		}
		if !allowsSurge(ds) {
			if len(running) > 1 {
				sort.Sort(oldestFirst(running))
				for _, p := range running[1:] {
					del = append(del, p.Name)
				}
			}
			return create, del
		}
		if len(running) <= 1 {
			if len(running) == 0 && shouldRun {
				create = append(create, node.Name)
			}
			return create, del
		}
		// Surging: keep the oldest current pod and the oldest old one, and
		// the old one only while it is ready and the current one is not yet
		// available.
		sort.Sort(oldestFirst(running))
		var oldestNew, oldestOld *corev1.Pod
		gen := templateGeneration(ds)
		for _, p := range running {
			if isUpdated(p, hash, gen) {
				if oldestNew == nil {
					oldestNew = p
					continue
				}
			} else if oldestOld == nil {
				oldestOld = p
				continue
			}
			del = append(del, p.Name)
		}
		if oldestNew != nil && oldestOld != nil &&
			(!podstate.IsReady(oldestOld) ||
				podstate.IsAvailable(oldestNew, ds.Spec.MinReadySeconds, c.clock.Now())) {
			del = append(del, oldestOld.Name)
		}
		return create, del

	case exists:
		// Should not run here (not even continue): delete them all.
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				del = append(del, p.Name)
			}
		}
	}
	return create, del
}

// backoffKey scopes failed-pod back-off to a DaemonSet, the generation it
// last acted on, and a node.
func backoffKey(ds *appsv1.DaemonSet, node string) string {
	return fmt.Sprintf("%s/%d/%s", ds.UID, ds.Status.ObservedGeneration, node)
}

// unscheduledWithoutNode names the unbound pods whose target node does not
// exist: no scheduler will place them and the pod GC does not collect
// them.
func unscheduledWithoutNode(nodes []*corev1.Node, byNode map[string][]*corev1.Pod) []string {
	exists := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		exists[n.Name] = true
	}
	var out []string
	for node, pods := range byNode {
		if exists[node] {
			continue
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// syncNodes deletes the named pods and creates one daemon pod for each
// named node, at most burst of each, creations in slow-start batches. It
// records the expectations first and returns every failure joined.
func (c *controller) syncNodes(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	del, create []string,
	hash string,
) error {
	log := logr.FromContextOrDiscard(ctx)
	key := keyOf(ds)
	nCreate := min(len(create), c.burst)
	nDelete := min(len(del), c.burst)
	delKeys := make([]string, nDelete)
	for i := range nDelete {
		delKeys[i] = ds.Namespace + "/" + del[i]
	}
	// Expected before the first call: a watch event may beat its answer.
	c.exp.ExpectCreations(createKey(key), nCreate)
	c.exp.ExpectDeletions(deleteKey(key), delKeys)

	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}

	if nCreate > 0 {
		log.V(4).
			Info("Nodes needing daemon pods for daemon set, creating", "nodes", create[:nCreate])
		template := podTemplate(ds, hash)
		ref := metav1.NewControllerRef(ds, controllerKind)
		attempted, err := slowStartBatch(nCreate, slowStartInitialBatch, func(i int) error {
			t := template.DeepCopy()
			t.Spec.Affinity = targetAffinity(t.Spec.Affinity, create[i])
			err := c.pods.CreatePod(ctx, ds.Namespace, t, ds, ref)
			if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil // every create will fail the same way
			}
			if err != nil {
				log.V(2).Info("Failed creation, decrementing expectations for daemon set")
				c.exp.CreationObserved(createKey(key))
			}
			return err
		})
		if err != nil {
			fail(err)
			// Those never attempted are never observed either.
			if skipped := nCreate - attempted; skipped > 0 {
				log.V(2).
					Info("Slow-start failure. Skipping creation of pods, decrementing expectations for daemon set",
						"skippedPods", skipped)
				c.exp.LowerCreations(createKey(key), skipped)
			}
		}
	}

	if nDelete > 0 {
		log.V(4).Info("Pods to delete for daemon set, deleting", "pods", del[:nDelete])
		var wg sync.WaitGroup
		for i := range nDelete {
			wg.Go(func() {
				err := c.pods.DeletePod(ctx, ds.Namespace, del[i], ds)
				if err == nil {
					return
				}
				c.exp.DeletionObserved(deleteKey(key), delKeys[i]) // it will not be observed
				if !apierrors.IsNotFound(err) {
					log.V(2).
						Info("Failed deletion, decremented expectations for daemon set", "pod", delKeys[i])
					fail(err)
				}
			})
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

// slowStartBatch calls fn(0..count-1) in batches of growing size (initial,
// then doubling), each batch concurrently, and stops after the first batch
// with a failure. It returns how many calls it made (failed ones included)
// and the errors of the last batch. A flood of creates that would all fail
// the same way (quota, say) thus costs a handful of calls and events.
func slowStartBatch(count, initial int, fn func(i int) error) (attempted int, err error) {
	pos := 0
	for size := min(count, initial); size > 0; size = min(2*size, count-pos) {
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for i := pos; i < pos+size; i++ {
			wg.Go(func() {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		pos += size
		if len(errs) > 0 {
			return pos, errors.Join(errs...)
		}
	}
	return pos, nil
}

// podTemplate is the template of ds's new pods: its own, with the default
// daemon tolerations, the pod-template-generation label when the API
// server's template-generation annotation parses, and the revision hash
// label.
func podTemplate(ds *appsv1.DaemonSet, hash string) *corev1.PodTemplateSpec {
	t := ds.Spec.Template.DeepCopy()
	addDaemonTolerations(&t.Spec)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if gen := templateGeneration(ds); gen != nil {
		t.Labels[extensionsv1beta1.DaemonSetTemplateGenerationKey] = strconv.FormatInt(*gen, 10)
	}
	if hash != "" {
		t.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	}
	return t
}

// templateGeneration is the API server's deprecated template-generation
// annotation, nil when it is absent or does not parse.
func templateGeneration(ds *appsv1.DaemonSet) *int64 {
	v, ok := ds.Annotations[appsv1.DeprecatedTemplateGeneration]
	if !ok {
		return nil
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	return &g
}

// isUpdated: p carries the current revision's hash, or the current
// template generation.
func isUpdated(p *corev1.Pod, hash string, gen *int64) bool {
	if hash != "" && p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
		return true
	}
	return gen != nil &&
		p.Labels[extensionsv1beta1.DaemonSetTemplateGenerationKey] == strconv.FormatInt(*gen, 10)
}

// oldestFirst orders pods bound ones first, then by creation, then name.
type oldestFirst []*corev1.Pod

func (o oldestFirst) Len() int      { return len(o) }
func (o oldestFirst) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o oldestFirst) Less(i, j int) bool {
	bi, bj := o[i].Spec.NodeName != "", o[j].Spec.NodeName != ""
	if bi != bj {
		return bi
	}
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}
