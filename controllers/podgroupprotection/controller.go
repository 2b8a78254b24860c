package podgroupprotection

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workers is KCM's: one.
const workers = 1

// queueName is KCM's name for the work queue (its metrics' label).
const queueName = "podgroupprotection"

// ActivePodsByPodGroup names the pod index keyed by "namespace/name" of
// the PodGroup a pod names in spec.schedulingGroup.podGroupName; pods
// that have terminated (Succeeded or Failed) and pods that name none are
// not indexed.
const ActivePodsByPodGroup = "ctrlhost.io/active-pod-podgroup"

// indexers is the pod index above, for a descriptor's WithIndexers.
func indexers() cache.Indexers {
	return cache.Indexers{ActivePodsByPodGroup: activePodGroup}
}

func activePodGroup(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || terminated(pod) {
		return nil, nil
	}
	if key, ok := podGroupKey(pod); ok {
		return []string{key}, nil
	}
	return nil, nil
}

// podGroupKey is the key of the PodGroup pod names, if it names one.
func podGroupKey(pod *corev1.Pod) (string, bool) {
	g := pod.Spec.SchedulingGroup
	if g == nil || g.PodGroupName == nil {
		return "", false
	}
	return pod.Namespace + "/" + *g.PodGroupName, true
}

func terminated(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func deletionCandidate(pg *schedulingv1beta1.PodGroup) bool {
	return pg.DeletionTimestamp != nil && slices.Contains(pg.Finalizers, Finalizer)
}

// controller takes the protection finalizer off deleted PodGroups no
// active pod names; keys are "namespace/name" of PodGroups.
type controller struct {
	client kubernetes.Interface
	groups schedulinglisters.PodGroupLister
	pods   cache.Indexer
	loop   *workloop.Loop
	// enqueue queues a PodGroup's key: loop.Add (a test's recorder).
	enqueue func(key string)
}

func newController(cc descriptor.Context) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	pgInformer := cc.InformerFactory.Scheduling().V1beta1().PodGroups()
	podInformer := cc.InformerFactory.Core().V1().Pods().Informer()
	c := &controller{client: client, groups: pgInformer.Lister(),
		pods: podInformer.GetIndexer()}
	// The loop exists before the handlers: a running informer (warm
	// standby) calls them at once. On a later failure it is shut down here.
	c.loop = workloop.New(queueName, c.sync, workloop.Options{Metrics: cc.Metrics})
	c.enqueue = c.loop.Add
	if err := c.watch(pgInformer.Informer(), podInformer); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// watch adds the pod index and the handlers; the loop waits for both
// caches, as KCM starts its worker once both have synced.
func (c *controller) watch(pgInformer, podInformer cache.SharedIndexInformer) error {
	if err := index.Add(podInformer, ActivePodsByPodGroup, activePodGroup); err != nil {
		return fmt.Errorf("adding the pod index %s: %w", ActivePodsByPodGroup, err)
	}
	if err := c.loop.Watch(pgInformer, workloop.EnqueueKey(), isDeletionCandidate); err != nil {
		return err
	}
	// Not Loop.Watch: a pod queues its group only once it terminated, or its
	// old group when its UID changed.
	reg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(nil, obj) },
		UpdateFunc: c.podChanged,
		DeleteFunc: c.podDeleted,
	})
	if err != nil {
		return fmt.Errorf("adding the pod handler: %w", err)
	}
	c.loop.WaitFor(reg.HasSynced)
	return nil
}

// isDeletionCandidate passes the adds and updates of PodGroups being
// deleted with the finalizer; deletions are not watched, as in KCM.
func isDeletionCandidate(_, obj any) bool {
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	return ok && deletionCandidate(pg)
}

// podChanged queues the PodGroup of a pod added or updated as terminated,
// and that of the old pod when the update replaced it (another UID under
// the same name): it may have been that PodGroup's last active pod.
func (c *controller) podChanged(old, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if terminated(pod) {
		c.enqueueGroupOf(pod)
	}
	if was, ok := old.(*corev1.Pod); ok && was.UID != pod.UID {
		c.enqueueGroupOf(was)
	}
}

// podDeleted queues the PodGroup of a deleted pod (a tombstone's too).
func (c *controller) podDeleted(obj any) {
	if pod, ok := workloop.Object[*corev1.Pod](obj); ok {
		c.enqueueGroupOf(pod)
	}
}

func (c *controller) enqueueGroupOf(pod *corev1.Pod) {
	if key, ok := podGroupKey(pod); ok {
		c.enqueue(key)
	}
}

// Run waits for the caches, then releases PodGroups until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Protecting PodGroups in use", "finalizer", Finalizer)
	defer log.Info("Stopped protecting PodGroups")
	return c.loop.RunWorkers(ctx, workers)
}

// sync removes the finalizer from a PodGroup being deleted once no active
// pod of the cache names it.
func (c *controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(fmt.Errorf("PodGroup key %q: %w", key, err))
	}
	pg, err := c.groups.PodGroups(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	if !deletionCandidate(pg) {
		return nil
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("podGroup", key)
	users, err := c.pods.ByIndex(ActivePodsByPodGroup, key)
	if err != nil {
		return fmt.Errorf("listing the active pods of PodGroup %s: %w", key, err)
	}
	if len(users) > 0 {
		if m, ok := users[0].(metav1.Object); ok {
			log = log.WithValues("pod", m.GetName())
		}
		log.V(4).Info("Keeping the protection finalizer: an active pod names the PodGroup")
		return nil
	}
	next := pg.DeepCopy()
	next.Finalizers = slices.DeleteFunc(next.Finalizers,
		func(f string) bool { return f == Finalizer })
	if _, err := c.client.SchedulingV1beta1().PodGroups(namespace).Update(
		ctx, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("removing the protection finalizer of PodGroup %s: %w", key, err)
	}
	log.V(3).Info("Removed the protection finalizer")
	return nil
}
