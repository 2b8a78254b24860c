package storageversiongc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// The work queues' names, KCM's: one for deleted identity leases, one for
// StorageVersions naming an unknown API server. Each has one worker.
const (
	leaseQueue          = "storage_version_garbage_collector_leases"
	storageVersionQueue = "storage_version_garbage_collector_storageversions"
)

// An API server's identity lease: in kube-system, with this label and
// value.
const (
	identityLabel = "apiserver.kubernetes.io/identity"
	kubeAPIServer = "kube-apiserver"
)

// controller removes from StorageVersions the entries of API servers whose
// identity lease is gone, and deletes a StorageVersion left without any.
type controller struct {
	client   kubernetes.Interface
	leases   coordinationlisters.LeaseLister
	leaseGC  *workloop.Loop // keys: names of deleted identity leases
	versions *workloop.Loop // keys: StorageVersion names
}

func newController(cc descriptor.Context) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	leaseInformer := cc.InformerFactory.Coordination().V1().Leases()
	svInformer := cc.InformerFactory.Internal().V1alpha1().StorageVersions().Informer()
	c := &controller{client: client, leases: leaseInformer.Lister()}
	// The loops exist before the handlers: a running informer (warm
	// standby) calls them at once. On a later failure they are shut down
	// here.
	c.leaseGC = workloop.New(leaseQueue, c.syncLease, workloop.Options{Metrics: cc.Metrics})
	c.versions = workloop.New(storageVersionQueue, c.syncStorageVersion,
		workloop.Options{Metrics: cc.Metrics})
	if err := c.watch(leaseInformer.Informer(), svInformer); err != nil {
		c.leaseGC.ShutDown()
		c.versions.ShutDown()
		return nil, err
	}
	return c, nil
}

// watch adds the handlers; both loops wait for both caches, as KCM starts
// its workers once both have synced.
func (c *controller) watch(leaseInformer, svInformer cache.SharedIndexInformer) error {
	// Not Loop.Watch: two loops, as KCM's two queues: deleted identity Leases
	// to one, StorageVersions naming a missing server to the other.
	leaseReg, err := leaseInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.leaseDeleted,
	})
	if err != nil {
		return fmt.Errorf("adding the Lease handler: %w", err)
	}
	// Not Loop.Watch: see the Lease handler above (two loops).
	svReg, err := svInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.storageVersionChanged,
		UpdateFunc: func(_, obj any) { c.storageVersionChanged(obj) },
	})
	if err != nil {
		return fmt.Errorf("adding the StorageVersion handler: %w", err)
	}
	for _, l := range []*workloop.Loop{c.leaseGC, c.versions} {
		l.WaitFor(leaseReg.HasSynced, svReg.HasSynced)
	}
	return nil
}

// Run waits for the caches, then collects until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Collecting the StorageVersion entries of API servers that are gone")
	defer log.Info("Stopped collecting StorageVersion entries")
	var wg sync.WaitGroup
	var leaseErr, svErr error
	wg.Go(func() { leaseErr = c.leaseGC.RunWorkers(ctx, 1) })
	wg.Go(func() { svErr = c.versions.RunWorkers(ctx, 1) })
	wg.Wait()
	return errors.Join(leaseErr, svErr)
}

// isIdentityLease: lease names a kube-apiserver.
func isIdentityLease(lease *coordinationv1.Lease) bool {
	return lease.Namespace == metav1.NamespaceSystem && lease.Labels[identityLabel] == kubeAPIServer
}

// leaseDeleted queues the name of a deleted identity lease (a tombstone's
// last state too).
func (c *controller) leaseDeleted(obj any) {
	if lease, ok := workloop.Object[*coordinationv1.Lease](obj); ok && isIdentityLease(lease) {
		c.leaseGC.Add(lease.Name)
	}
}

// storageVersionChanged queues a StorageVersion with an entry for an API
// server the cache holds no identity lease of.
func (c *controller) storageVersionChanged(obj any) {
	sv, ok := obj.(*apiserverinternalv1alpha1.StorageVersion)
	if !ok {
		return
	}
	for _, e := range sv.Status.StorageVersions {
		lease, err := c.leases.Leases(metav1.NamespaceSystem).Get(e.APIServerID)
		if err != nil || !isIdentityLease(lease) {
			c.versions.Add(sv.Name)
			return
		}
	}
}

// syncLease: if the identity lease is still gone (asked of the API
// server), every StorageVersion (listed from the API server) loses its
// entry for that API server.
func (c *controller) syncLease(ctx context.Context, name string) error {
	_, err := c.client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, name,
		metav1.GetOptions{})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	list, err := c.client.InternalV1alpha1().StorageVersions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		sv := &list.Items[i]
		kept := without(sv.Status.StorageVersions,
			func(e apiserverinternalv1alpha1.ServerStorageVersion) bool {
				return e.APIServerID == name
			})
		if len(kept) == len(sv.Status.StorageVersions) {
			continue
		}
		if err := c.prune(ctx, sv, kept); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncStorageVersion: the StorageVersion (read from the API server) loses
// the entries of API servers without an identity lease (each asked of the
// API server; a lease that cannot be read counts as none).
func (c *controller) syncStorageVersion(ctx context.Context, name string) error {
	sv, err := c.client.InternalV1alpha1().StorageVersions().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	kept := without(sv.Status.StorageVersions,
		func(e apiserverinternalv1alpha1.ServerStorageVersion) bool {
			lease, err := c.client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx,
				e.APIServerID, metav1.GetOptions{})
			return err != nil || !isIdentityLease(lease)
		})
	if len(kept) == len(sv.Status.StorageVersions) {
		return nil
	}
	return c.prune(ctx, sv, kept)
}

// without returns the entries for which gone is false, in order.
func without(entries []apiserverinternalv1alpha1.ServerStorageVersion,
	gone func(apiserverinternalv1alpha1.ServerStorageVersion) bool,
) []apiserverinternalv1alpha1.ServerStorageVersion {
	var kept []apiserverinternalv1alpha1.ServerStorageVersion
	for _, e := range entries {
		if !gone(e) {
			kept = append(kept, e)
		}
	}
	return kept
}

// prune deletes sv when no entry is kept, else writes the kept entries to
// its status with the common encoding version and its condition worked
// out again.
func (c *controller) prune(ctx context.Context, sv *apiserverinternalv1alpha1.StorageVersion,
	kept []apiserverinternalv1alpha1.ServerStorageVersion) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("storageVersion", sv.Name)
	svs := c.client.InternalV1alpha1().StorageVersions()
	if len(kept) == 0 {
		if err := svs.Delete(ctx, sv.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting StorageVersion %s: %w", sv.Name, err)
		}
		log.V(2).Info("Deleted: no API server it named is left")
		return nil
	}
	next := sv.DeepCopy()
	next.Status.StorageVersions = kept
	setCommonEncoding(next, time.Now())
	if _, err := svs.UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the status of StorageVersion %s: %w", sv.Name, err)
	}
	log.V(2).Info("Removed the entries of API servers that are gone", "left", len(kept))
	return nil
}
