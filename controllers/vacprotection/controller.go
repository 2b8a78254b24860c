package vacprotection

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workers is KCM's: one.
const workers = 1

// The indexes of volumes and claims by the classes they name.
const (
	pvsByClass  = "ctrlhost.io/pv-volumeattributesclass"
	pvcsByClass = "ctrlhost.io/pvc-volumeattributesclass"
)

// controller keeps the protection finalizer on VolumeAttributesClasses;
// keys are class names.
type controller struct {
	client  kubernetes.Interface
	classes storagelisters.VolumeAttributesClassLister
	pvs     cache.Indexer // by pvsByClass
	pvcs    cache.Indexer // by pvcsByClass
	loop    *workloop.Loop
}

func newController(cc descriptor.Context) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	vacInformer := cc.InformerFactory.Storage().V1().VolumeAttributesClasses()
	pvInformer := cc.InformerFactory.Core().V1().PersistentVolumes().Informer()
	pvcInformer := cc.InformerFactory.Core().V1().PersistentVolumeClaims().Informer()
	c := &controller{
		client:  client,
		classes: vacInformer.Lister(),
		pvs:     pvInformer.GetIndexer(),
		pvcs:    pvcInformer.GetIndexer(),
	}
	// The loop exists before the handlers: a running informer (warm
	// standby) calls them at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	if err := c.watch(vacInformer.Informer(), pvInformer, pvcInformer); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// watch adds the indexes and the handlers, and makes the loop wait for
// the three caches.
func (c *controller) watch(vacInformer, pvInformer, pvcInformer cache.SharedIndexInformer) error {
	if err := index.Add(pvInformer, pvsByClass, pvClassNames); err != nil {
		return fmt.Errorf("adding the volume index %s: %w", pvsByClass, err)
	}
	if err := index.Add(pvcInformer, pvcsByClass, pvcClassNames); err != nil {
		return fmt.Errorf("adding the claim index %s: %w", pvcsByClass, err)
	}
	if err := c.loop.Watch(vacInformer, workloop.EnqueueKey(), needsWrite); err != nil {
		return err
	}
	// Not Loop.Watch: a volume or claim queues only the classes it stopped
	// using (userHandler), not a key of its own kind.
	pvReg, err := pvInformer.AddEventHandler(userHandler(c.loop.Add, pvClasses))
	if err != nil {
		return fmt.Errorf("adding the volume handler: %w", err)
	}
	// Not Loop.Watch: as for volumes above.
	pvcReg, err := pvcInformer.AddEventHandler(userHandler(c.loop.Add, pvcClasses))
	if err != nil {
		return fmt.Errorf("adding the claim handler: %w", err)
	}
	c.loop.WaitFor(pvReg.HasSynced, pvcReg.HasSynced)
	return nil
}

// userHandler queues, for a volume or claim, the classes it may have
// stopped using: those an update dropped, and every class of one deleted.
// Adds queue nothing: a new user keeps a class, it cannot free one.
func userHandler(enqueue func(string),
	classesOf func(obj any) []string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			now := classesOf(obj)
			for _, name := range classesOf(old) {
				if !slices.Contains(now, name) {
					enqueue(name)
				}
			}
		},
		DeleteFunc: func(obj any) {
			for _, name := range classesOf(obj) {
				enqueue(name)
			}
		},
	}
}

// Run waits for the caches, then keeps finalizers until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Protecting VolumeAttributesClasses in use", "finalizer", Finalizer)
	defer log.Info("Stopped protecting VolumeAttributesClasses")
	return c.loop.RunWorkers(ctx, workers)
}

// classesOfPV is the class a volume names, if any.
func classesOfPV(pv *corev1.PersistentVolume) []string {
	if n := pv.Spec.VolumeAttributesClassName; n != nil && *n != "" {
		return []string{*n}
	}
	return nil
}

// classesOfPVC are the classes a claim names: the one it asks for, the
// one its volume has, and the one a modification in progress moves to;
// each once.
func classesOfPVC(pvc *corev1.PersistentVolumeClaim) []string {
	var out []string
	add := func(name string) {
		if name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if n := pvc.Spec.VolumeAttributesClassName; n != nil {
		add(*n)
	}
	if n := pvc.Status.CurrentVolumeAttributesClassName; n != nil {
		add(*n)
	}
	if s := pvc.Status.ModifyVolumeStatus; s != nil {
		add(s.TargetVolumeAttributesClassName)
	}
	return out
}

// pvClasses and pvcClasses are the classes of a volume or claim (or of
// the last state a tombstone holds); nil for any other object.
func pvClasses(obj any) []string {
	if pv, ok := workloop.Object[*corev1.PersistentVolume](obj); ok {
		return classesOfPV(pv)
	}
	return nil
}

func pvcClasses(obj any) []string {
	if pvc, ok := workloop.Object[*corev1.PersistentVolumeClaim](obj); ok {
		return classesOfPVC(pvc)
	}
	return nil
}

// pvClassNames and pvcClassNames are the indexes' functions.
func pvClassNames(obj any) ([]string, error) { return pvClasses(obj), nil }

func pvcClassNames(obj any) ([]string, error) { return pvcClasses(obj), nil }

// needsWrite passes the classes that lack the finalizer or are being
// deleted with it.
func needsWrite(_, obj any) bool {
	vac, ok := obj.(*storagev1.VolumeAttributesClass)
	return ok && (lacksFinalizer(vac) || deletionCandidate(vac))
}

func hasFinalizer(vac *storagev1.VolumeAttributesClass) bool {
	return slices.Contains(vac.Finalizers, Finalizer)
}

func lacksFinalizer(vac *storagev1.VolumeAttributesClass) bool {
	return vac.DeletionTimestamp == nil && !hasFinalizer(vac)
}

func deletionCandidate(vac *storagev1.VolumeAttributesClass) bool {
	return vac.DeletionTimestamp != nil && hasFinalizer(vac)
}

// sync removes the finalizer of a class being deleted that no cached
// volume or claim names, and adds it to a class that lacks it.
func (c *controller) sync(ctx context.Context, name string) error {
	vac, err := c.classes.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("volumeAttributesClass", name)
	if deletionCandidate(vac) {
		if c.inUse(ctx, name) {
			log.V(4).Info("Keeping the protection finalizer: the class is in use")
			return nil
		}
		return c.write(ctx, vac, slices.DeleteFunc(slices.Clone(vac.Finalizers),
			func(f string) bool { return f == Finalizer }), "Removed")
	}
	if lacksFinalizer(vac) {
		return c.write(ctx, vac, append(slices.Clone(vac.Finalizers), Finalizer), "Added")
	}
	return nil
}

// inUse: a cached volume or claim names the class. An index that cannot
// answer counts as a user, as in KCM: the class is kept, and the error
// logged.
func (c *controller) inUse(ctx context.Context, name string) bool {
	for _, idx := range []struct {
		indexer cache.Indexer
		name    string
	}{{c.pvs, pvsByClass}, {c.pvcs, pvcsByClass}} {
		keys, err := idx.indexer.IndexKeys(idx.name, name)
		if err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "Listing the users of a class",
				"volumeAttributesClass", name, "index", idx.name)
			return true
		}
		if len(keys) > 0 {
			return true
		}
	}
	return false
}

func (c *controller) write(ctx context.Context, vac *storagev1.VolumeAttributesClass,
	finalizers []string, what string) error {
	next := vac.DeepCopy()
	next.Finalizers = finalizers
	if _, err := c.client.StorageV1().VolumeAttributesClasses().Update(ctx, next,
		metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the finalizers of VolumeAttributesClass %s: %w", vac.Name, err)
	}
	logr.FromContextOrDiscard(ctx).V(3).Info(what+" the protection finalizer",
		"volumeAttributesClass", vac.Name)
	return nil
}
