package pvcprotection

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workers is KCM's: one worker syncs the claims of one namespace at a time.
const workers = 1

// The Unused condition's reasons and messages, as KCM writes them.
const (
	reasonUsed    = "PodUsingPVC"
	messageUsed   = "A pod is currently referencing this PVC"
	reasonUnused  = "NoPodsUsingPVC"
	messageUnused = "No pods are currently referencing this PVC"
)

// controller keeps the protection finalizer on claims, and their Unused
// condition. Its loop's keys are namespaces: a sync works the claims of
// one namespace waiting in batches, with at most one live list of the
// namespace's pods between them, as KCM does.
type controller struct {
	client  kubernetes.Interface
	claims  corelisters.PersistentVolumeClaimLister
	pods    cache.Indexer
	clock   clock.WithTicker
	unused  bool // FeaturePersistentVolumeClaimUnusedSinceTime
	batches *batches
	// retries spaces out a failed claim's next sync, per claim.
	retries workqueue.TypedRateLimiter[string]
	loop    *workloop.Loop
}

func newController(cc descriptor.Context) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	pvcInformer := cc.InformerFactory.Core().V1().PersistentVolumeClaims()
	podInformer := cc.InformerFactory.Core().V1().Pods().Informer()
	c := &controller{
		client:  client,
		claims:  pvcInformer.Lister(),
		pods:    podInformer.GetIndexer(),
		clock:   clock.RealClock{},
		unused:  gate.Enabled(cc.FeatureGate, FeaturePersistentVolumeClaimUnusedSinceTime, true),
		batches: newBatches(),
		retries: workqueue.DefaultTypedControllerRateLimiter[string](),
	}
	// The loop exists before the handlers: a running informer (warm
	// standby) calls them at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics, Clock: c.clock})
	if err := c.watch(pvcInformer.Informer(), podInformer); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// watch adds the claim index and the handlers, and makes the loop wait
// for them.
func (c *controller) watch(pvcInformer, podInformer cache.SharedIndexInformer) error {
	if err := index.AddPodsByClaim(podInformer); err != nil {
		return fmt.Errorf("adding the pod index %s: %w", index.PodsByClaim, err)
	}
	// Not Loop.Watch: the claim and pod handlers share c.enqueue, which keys
	// by namespace and name from either kind.
	pvcReg, err := pvcInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, obj any) { c.claimChanged(obj) },
	})
	if err != nil {
		return fmt.Errorf("adding the claim handler: %w", err)
	}
	// Not Loop.Watch: a pod maps to the claims it uses only when it may have
	// released them (podChanged's deleted argument tells a deletion apart).
	podReg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(obj, false) },
		UpdateFunc: c.podUpdated,
		DeleteFunc: func(obj any) { c.podChanged(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("adding the pod handler: %w", err)
	}
	c.loop.WaitFor(pvcReg.HasSynced, podReg.HasSynced)
	return nil
}

// Run waits for the caches, then keeps finalizers until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Protecting PersistentVolumeClaims in use", "finalizer", Finalizer,
		"unusedCondition", c.unused)
	defer log.Info("Stopped protecting PersistentVolumeClaims")
	return c.loop.RunWorkers(ctx, workers)
}

// enqueue has the claim synced at once.
func (c *controller) enqueue(namespace, name string) {
	c.batches.add(namespace, name, time.Time{})
	c.loop.Add(namespace)
}

// claimChanged queues a claim that lacks the finalizer, is being deleted
// with it, or (with the gate) has no Unused condition yet.
func (c *controller) claimChanged(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if lacksFinalizer(pvc) || deletionCandidate(pvc) ||
		c.unused && unusedCondition(pvc) == nil {
		c.enqueue(pvc.Namespace, pvc.Name)
	}
}

// podUpdated queues the claims of the pod, and those of the old one as if
// it was deleted when it was replaced under the same name between two
// events: it may have been the last user of claims the new one does not
// name.
func (c *controller) podUpdated(old, obj any) {
	c.podChanged(obj, false)
	was, okOld := old.(*corev1.Pod)
	is, okNew := obj.(*corev1.Pod)
	if okOld && okNew && was.UID != is.UID {
		c.podChanged(was, true)
	}
}

// podChanged queues the claims a pod names. Without the gate only a pod
// that may have stopped using them counts: one deleted, terminated, or not
// scheduled (an unscheduled pod uses no claim).
func (c *controller) podChanged(obj any, deleted bool) {
	pod, ok := workloop.Object[*corev1.Pod](obj)
	if !ok {
		return
	}
	if !c.unused && !deleted && !terminated(pod) && pod.Spec.NodeName != "" {
		return
	}
	for i := range pod.Spec.Volumes {
		if claim := index.ClaimOf(pod, &pod.Spec.Volumes[i]); claim != "" {
			c.enqueue(pod.Namespace, claim)
		}
	}
}

func hasFinalizer(pvc *corev1.PersistentVolumeClaim) bool {
	return slices.Contains(pvc.Finalizers, Finalizer)
}

func lacksFinalizer(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp == nil && !hasFinalizer(pvc)
}

func deletionCandidate(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp != nil && hasFinalizer(pvc)
}

func unusedCondition(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaimCondition {
	for i := range pvc.Status.Conditions {
		if pvc.Status.Conditions[i].Type == corev1.PersistentVolumeClaimUnused {
			return &pvc.Status.Conditions[i]
		}
	}
	return nil
}

// sync works the claims of a namespace that are due. A claim whose sync
// fails waits for its own back-off (or its next event).
func (c *controller) sync(ctx context.Context, namespace string) error {
	names := c.batches.take(namespace, c.clock.Now())
	done := 0
	defer func() {
		// A panic leaves the rest for the loop's retry of the namespace.
		for _, name := range names[done:] {
			c.batches.add(namespace, name, time.Time{})
		}
	}()
	live := &livePods{}
	for _, name := range names {
		err := c.syncClaim(ctx, namespace, name, live)
		done++
		key := namespace + "/" + name
		if err == nil {
			c.retries.Forget(key)
			continue
		}
		delay := c.retries.When(key)
		logr.FromContextOrDiscard(ctx).V(2).Info("Retrying the claim after an error",
			"persistentVolumeClaim", key, "after", delay, "err", err.Error())
		c.batches.retry(namespace, name, c.clock.Now().Add(delay))
		c.loop.AddAfter(namespace, delay)
	}
	return nil
}

// livePods is one live list of a namespace's pods, made at most once per
// batch, when the first claim the cache finds no user of needs it.
type livePods struct {
	pods   []corev1.Pod
	listed bool
}

// syncClaim keeps a claim's Unused condition (with the gate), removes the
// finalizer of a deleted claim no pod uses, and adds it to a claim that
// lacks it.
func (c *controller) syncClaim(ctx context.Context, namespace, name string, live *livePods) error {
	pvc, err := c.claims.PersistentVolumeClaims(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("persistentVolumeClaim",
		namespace+"/"+name)
	if c.unused && pvc.DeletionTimestamp == nil && pvc.Status.Phase == corev1.ClaimBound {
		used, err := c.inUse(ctx, pvc, live, usesForUnused)
		if err != nil {
			return err
		}
		if pvc, err = c.markUsage(ctx, pvc, used); err != nil {
			return err
		}
	}
	if deletionCandidate(pvc) {
		used, err := c.inUse(ctx, pvc, live, usesForDeletion)
		if err != nil {
			return err
		}
		if !used {
			return c.writeFinalizers(ctx, pvc, slices.DeleteFunc(slices.Clone(pvc.Finalizers),
				func(f string) bool { return f == Finalizer }), "Removed")
		}
		log.V(2).Info("Keeping the claim: a pod uses it")
	}
	if lacksFinalizer(pvc) {
		return c.writeFinalizers(ctx, pvc, append(slices.Clone(pvc.Finalizers), Finalizer), "Added")
	}
	return nil
}

func (c *controller) writeFinalizers(ctx context.Context, pvc *corev1.PersistentVolumeClaim,
	finalizers []string, what string) error {
	next := pvc.DeepCopy()
	next.Finalizers = finalizers
	if _, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, next,
		metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the finalizers of PersistentVolumeClaim %s/%s: %w",
			pvc.Namespace, pvc.Name, err)
	}
	logr.FromContextOrDiscard(ctx).V(3).Info(what+" the protection finalizer",
		"persistentVolumeClaim", pvc.Namespace+"/"+pvc.Name)
	return nil
}

// markUsage sets the Unused condition to False when a pod uses the claim
// and it is missing or True, to True when none does and it is missing or
// not True; it returns the claim as written (or as given: no write).
func (c *controller) markUsage(ctx context.Context, pvc *corev1.PersistentVolumeClaim,
	used bool) (*corev1.PersistentVolumeClaim, error) {
	cond := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimUnused,
		LastTransitionTime: metav1.NewTime(c.clock.Now())}
	existing := unusedCondition(pvc)
	switch {
	case used && (existing == nil || existing.Status == corev1.ConditionTrue):
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, reasonUsed, messageUsed
	case !used && (existing == nil || existing.Status != corev1.ConditionTrue):
		cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, reasonUnused, messageUnused
	default:
		return pvc, nil
	}
	next := pvc.DeepCopy()
	if e := unusedCondition(next); e != nil {
		*e = cond
	} else {
		next.Status.Conditions = append(next.Status.Conditions, cond)
	}
	written, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx,
		next, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("writing the Unused condition of PersistentVolumeClaim %s/%s: %w",
			pvc.Namespace, pvc.Name, err)
	}
	logr.FromContextOrDiscard(ctx).V(3).Info("Wrote the Unused condition",
		"persistentVolumeClaim", pvc.Namespace+"/"+pvc.Name, "status", cond.Status)
	return written, nil
}

// usage says whether pod uses pvc, for one purpose.
type usage func(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool

// inUse asks the cache for a pod that uses pvc; when it has none, it asks
// the API server (live, at most once per batch): a pod just created may
// not have reached the cache.
func (c *controller) inUse(ctx context.Context, pvc *corev1.PersistentVolumeClaim,
	live *livePods, uses usage) (bool, error) {
	log := logr.FromContextOrDiscard(ctx)
	cached, err := index.PodsNaming(c.pods, pvc.Namespace, pvc.Name)
	if err != nil {
		// The live list decides.
		log.Error(err, "Listing the cached pods that name a claim",
			"persistentVolumeClaim", pvc.Namespace+"/"+pvc.Name)
	}
	if slices.ContainsFunc(cached, func(p *corev1.Pod) bool { return uses(p, pvc) }) {
		return true, nil
	}
	if !live.listed {
		l, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("listing the pods of namespace %s: %w", pvc.Namespace, err)
		}
		live.pods, live.listed = l.Items, true
	}
	for i := range live.pods {
		if uses(&live.pods[i], pvc) {
			return true, nil
		}
	}
	log.V(2).Info("No pod uses the claim", "persistentVolumeClaim", pvc.Namespace+"/"+pvc.Name)
	return false, nil
}

// usesForDeletion: a scheduled pod uses a claim it names in a
// persistentVolumeClaim volume (whatever its phase), or the claim of its
// ephemeral volume when the claim is the pod's and the pod is not shut
// down. An unscheduled pod uses none: the kubelet will not start a pod
// whose claim is being deleted.
func usesForDeletion(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name ||
			!shutDown(pod) && ephemeralClaimOf(pod, v, pvc) {
			return true
		}
	}
	return false
}

// usesForUnused: a pod that has not terminated uses the claims it names,
// scheduled or not.
func usesForUnused(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if terminated(pod) {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name ||
			ephemeralClaimOf(pod, v, pvc) {
			return true
		}
	}
	return false
}

// ephemeralClaimOf: v is an ephemeral volume of pod whose claim is pvc,
// controlled by the pod.
func ephemeralClaimOf(pod *corev1.Pod, v *corev1.Volume, pvc *corev1.PersistentVolumeClaim) bool {
	return v.Ephemeral != nil && index.EphemeralClaimName(pod, v) == pvc.Name &&
		pvc.Namespace == pod.Namespace && metav1.IsControlledBy(pvc, pod)
}

// shutDown: the pod is deleted with no grace left (the kubelet is done with
// it, or it was force-deleted) and only waits for its finalizers.
func shutDown(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil &&
		*pod.DeletionGracePeriodSeconds == 0
}

// terminated: the pod failed or succeeded, or is being deleted and none of
// its containers runs (no status counts as not running).
func terminated(pod *corev1.Pod) bool {
	s := &pod.Status
	return s.Phase == corev1.PodFailed || s.Phase == corev1.PodSucceeded ||
		pod.DeletionTimestamp != nil && noneRunning(s.InitContainerStatuses) &&
			noneRunning(s.ContainerStatuses) && noneRunning(s.EphemeralContainerStatuses)
}

func noneRunning(statuses []corev1.ContainerStatus) bool {
	return !slices.ContainsFunc(statuses, func(s corev1.ContainerStatus) bool {
		return s.State.Terminated == nil && s.State.Waiting == nil
	})
}

// batches holds, per namespace, the claims waiting for a sync, each with
// the time it is due (zero: at once).
type batches struct {
	mu     sync.Mutex
	claims map[string]map[string]time.Time
}

func newBatches() *batches { return &batches{claims: map[string]map[string]time.Time{}} }

// add makes the claim due at at, or sooner if it is due sooner already.
func (b *batches) add(namespace, name string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.claims[namespace]
	if m == nil {
		m = map[string]time.Time{}
		b.claims[namespace] = m
	}
	if due, ok := m[name]; !ok || at.Before(due) {
		m[name] = at
	}
}

// retry makes the claim due at at, unless it is waiting already (an event
// came while it was synced: it is due at once).
func (b *batches) retry(namespace, name string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.claims[namespace]
	if m == nil {
		m = map[string]time.Time{}
		b.claims[namespace] = m
	}
	if _, ok := m[name]; !ok {
		m[name] = at
	}
}

// take removes and returns, sorted, the namespace's claims due at now.
func (b *batches) take(namespace string, now time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.claims[namespace]
	var due []string
	for name, at := range m {
		if !at.After(now) {
			due = append(due, name)
		}
	}
	for _, name := range due {
		delete(m, name)
	}
	if len(m) == 0 {
		delete(b.claims, namespace)
	}
	slices.Sort(due)
	return due
}
