package ephemeral

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/collectors"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// reasonFailedBinding is the reason of the warning a pod gets when one of
// its ephemeral volumes' claims cannot be had, as KCM records it.
const reasonFailedBinding = "FailedBinding"

// controller creates the claims of pods' generic ephemeral volumes; keys
// are pods' "namespace/name".
type controller struct {
	client   kubernetes.Interface
	pods     corelisters.PodLister
	podIndex cache.Indexer
	claims   corelisters.PersistentVolumeClaimLister
	recorder record.EventRecorder
	metrics  *metrics
	workers  int
	loop     *workloop.Loop
}

func newController(cc descriptor.Context, workers int) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	m, err := metricsOn(cc.Metrics)
	if err != nil {
		return nil, err
	}
	podInformer := cc.InformerFactory.Core().V1().Pods()
	pvcInformer := cc.InformerFactory.Core().V1().PersistentVolumeClaims()
	c := &controller{
		client:   client,
		pods:     podInformer.Lister(),
		podIndex: podInformer.Informer().GetIndexer(),
		claims:   pvcInformer.Lister(),
		recorder: cc.EventRecorder,
		metrics:  m,
		workers:  workers,
	}
	// The loop exists before the handlers: a running informer (warm
	// standby) calls them at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	if err := c.watch(podInformer.Informer(), pvcInformer.Informer()); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// watch adds the claim index and the handlers: pods when they are added
// (a pod's volumes never change; a deleted pod's claims go with it through
// the garbage collector), claims when they are deleted (the pods whose
// ephemeral claim it was get it back).
func (c *controller) watch(podInformer, pvcInformer cache.SharedIndexInformer) error {
	if err := index.AddPodsByClaim(podInformer); err != nil {
		return fmt.Errorf("adding the pod index %s: %w", index.PodsByClaim, err)
	}
	// Not Loop.Watch: only pods added with ephemeral volumes are queued, and
	// deleted claims queue the pods that name them (below).
	podReg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.podAdded,
	})
	if err != nil {
		return fmt.Errorf("adding the pod handler: %w", err)
	}
	// Not Loop.Watch: a deleted claim queues the pods naming it, found through
	// the pod index.
	pvcReg, err := pvcInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.claimDeleted,
	})
	if err != nil {
		return fmt.Errorf("adding the claim handler: %w", err)
	}
	c.loop.WaitFor(podReg.HasSynced, pvcReg.HasSynced)
	return nil
}

// Run waits for the caches, then creates claims until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Creating the claims of ephemeral volumes", "workers", c.workers)
	defer log.Info("Stopped creating the claims of ephemeral volumes")
	return c.loop.RunWorkers(ctx, c.workers)
}

// podAdded queues a pod not being deleted that has an ephemeral volume.
func (c *controller) podAdded(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.DeletionTimestamp != nil || !hasEphemeral(pod) {
		return
	}
	c.loop.Add(pod.Namespace + "/" + pod.Name)
}

func hasEphemeral(pod *corev1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Ephemeral != nil {
			return true
		}
	}
	return false
}

// claimDeleted queues the cached pods that name the deleted claim, as
// podAdded would (a tombstone's claim too).
func (c *controller) claimDeleted(obj any) {
	pvc, ok := workloop.Object[*corev1.PersistentVolumeClaim](obj)
	if !ok {
		return
	}
	pods, err := index.PodsNaming(c.podIndex, pvc.Namespace, pvc.Name)
	if err != nil {
		return // the index is added before the handler: it is there
	}
	for _, p := range pods {
		c.podAdded(p)
	}
}

// sync makes sure every ephemeral volume of the pod has its claim, in the
// order of the volumes; the first that cannot is a warning on the pod, and
// the pod is retried with back-off.
func (c *controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("pod", key)
	pod, err := c.pods.Pods(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		log.V(5).Info("Nothing to do: the pod is gone")
		return nil
	case err != nil:
		return err
	}
	if pod.DeletionTimestamp != nil {
		log.V(5).Info("Nothing to do: the pod is being deleted")
		return nil
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if err := c.ensureClaim(ctx, pod, v); err != nil {
			c.recorder.Event(pod, corev1.EventTypeWarning, reasonFailedBinding,
				fmt.Sprintf("ephemeral volume %s: %v", v.Name, err))
			return fmt.Errorf("pod %s, ephemeral volume %s: %w", key, v.Name, err)
		}
	}
	return nil
}

// errNotOwner is the error of a claim of the volume's name that the pod
// does not control.
var errNotOwner = errors.New("pod is not owner")

// ensureClaim creates the claim of an ephemeral volume from its template,
// controlled by the pod, unless it exists; an existing claim the pod does
// not control is an error.
func (c *controller) ensureClaim(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) error {
	if v.Ephemeral == nil {
		return nil
	}
	name := index.EphemeralClaimName(pod, v)
	log := logr.FromContextOrDiscard(ctx).WithValues("volume", v.Name,
		"persistentVolumeClaim", pod.Namespace+"/"+name)
	existing, err := c.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
	switch {
	case err == nil:
		if existing.Namespace != pod.Namespace || !metav1.IsControlledBy(existing, pod) {
			return fmt.Errorf("PVC %s/%s was not created for pod %s/%s (%w)",
				existing.Namespace, existing.Name, pod.Namespace, pod.Name, errNotOwner)
		}
		log.V(5).Info("The claim exists")
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	tmpl := v.Ephemeral.VolumeClaimTemplate
	if tmpl == nil {
		// The API server rejects such a pod: it cannot be cached.
		return workloop.Permanent(errors.New("the volume has no volumeClaimTemplate"))
	}
	tmpl = tmpl.DeepCopy()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: pod.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "v1",
				Kind:               "Pod",
				Name:               pod.Name,
				UID:                pod.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
			Labels:      tmpl.Labels,
			Annotations: tmpl.Annotations,
		},
		Spec: tmpl.Spec,
	}
	c.metrics.creates.Inc()
	if _, err := c.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Create(ctx, claim,
		metav1.CreateOptions{}); err != nil {
		c.metrics.createFailures.Inc()
		return fmt.Errorf("create PVC %s: %w", name, err)
	}
	log.V(3).Info("Created the claim")
	return nil
}

// metrics are KCM's counters of the controller's creates.
type metrics struct {
	creates, createFailures prometheus.Counter
}

// metricsOn returns the counters registered on reg (those an earlier term
// registered there, else new ones); on a nil reg, unregistered ones.
func metricsOn(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		creates: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "ephemeral_volume_controller", Name: "create_total",
			Help: "Number of PersistentVolumeClaim creation requests",
		}),
		createFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "ephemeral_volume_controller", Name: "create_failures_total",
			Help: "Number of PersistentVolumeClaim creation requests that failed",
		}),
	}
	r := collectors.On(reg)
	collectors.Register(r, &m.creates)
	collectors.Register(r, &m.createFailures)
	return m, r.Err()
}
