package pvprotection

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workers is KCM's: one.
const workers = 1

// controller keeps the protection finalizer on volumes; keys are names.
type controller struct {
	client  kubernetes.Interface
	volumes corelisters.PersistentVolumeLister
	loop    *workloop.Loop
}

func newController(cc descriptor.Context) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Core().V1().PersistentVolumes()
	c := &controller{client: client, volumes: informer.Lister()}
	// The loop exists before the handler: a running informer (warm
	// standby) calls it at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	if err := c.loop.Watch(informer.Informer(), workloop.EnqueueKey(), needsWrite); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the cache, then keeps finalizers until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Protecting PersistentVolumes in use", "finalizer", Finalizer)
	defer log.Info("Stopped protecting PersistentVolumes")
	return c.loop.RunWorkers(ctx, workers)
}

// needsWrite passes the adds and updates of volumes that lack the finalizer
// or are being deleted with it; deletions are not watched, as in KCM.
func needsWrite(old, obj any) bool {
	pv, ok := obj.(*corev1.PersistentVolume) // a deleted volume comes as a tombstone
	return ok && (lacksFinalizer(pv) || deletionCandidate(pv))
}

func hasFinalizer(pv *corev1.PersistentVolume) bool {
	return slices.Contains(pv.Finalizers, Finalizer)
}

func lacksFinalizer(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp == nil && !hasFinalizer(pv)
}

func deletionCandidate(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil && hasFinalizer(pv)
}

// sync adds the finalizer to a volume that lacks it, and removes it from a
// volume being deleted that is not bound.
func (c *controller) sync(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("persistentVolume", name)
	if deletionCandidate(pv) {
		if pv.Status.Phase == corev1.VolumeBound {
			log.V(4).Info("Keeping the protection finalizer: the volume is bound")
			return nil
		}
		next := pv.DeepCopy()
		next.Finalizers = slices.DeleteFunc(next.Finalizers,
			func(f string) bool { return f == Finalizer })
		if _, err := c.client.CoreV1().PersistentVolumes().Update(
			ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("removing the protection finalizer of PersistentVolume %s: %w",
				name, err)
		}
		log.V(3).Info("Removed the protection finalizer")
		return nil
	}
	if lacksFinalizer(pv) {
		next := pv.DeepCopy()
		next.Finalizers = append(next.Finalizers, Finalizer)
		if _, err := c.client.CoreV1().PersistentVolumes().Update(
			ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("adding the protection finalizer to PersistentVolume %s: %w",
				name, err)
		}
		log.V(3).Info("Added the protection finalizer")
	}
	return nil
}
