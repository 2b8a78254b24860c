package serviceaccount

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// controller ensures service accounts; its keys are namespace names.
type controller struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	accounts   corelisters.ServiceAccountLister
	names      []string
	workers    int
	loop       *workloop.Loop
}

func newController(cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	nsInformer := cc.InformerFactory.Core().V1().Namespaces()
	saInformer := cc.InformerFactory.Core().V1().ServiceAccounts()
	c := &controller{
		client:     client,
		namespaces: nsInformer.Lister(),
		accounts:   saInformer.Lister(),
		names:      o.ServiceAccounts,
		workers:    o.Workers,
	}
	// The loop exists before any handler is registered: an informer that
	// is already running (warm standby) calls a handler at once. On a
	// later failure it is shut down here; otherwise Run releases it.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	// Every change of a namespace, and of one of its ServiceAccounts that
	// the controller ensures, syncs the namespace. KCM reacts to those
	// ServiceAccounts' deletions only; a sync that finds them all present
	// writes nothing, so the other events cost a lister read each.
	err = errors.Join(
		c.loop.Watch(nsInformer.Informer(), workloop.EnqueueKey()),
		c.loop.Watch(saInformer.Informer(), workloop.EnqueueMapped(namespaceOf), c.ensured))
	if err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then syncs namespaces until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info(
		"Ensuring service accounts in every active namespace",
		"serviceAccounts",
		c.names,
		"workers",
		c.workers,
	)
	defer log.Info("Stopped ensuring service accounts")
	return c.loop.RunWorkers(ctx, c.workers)
}

// ensured passes the ServiceAccounts the controller creates.
func (c *controller) ensured(_, obj any) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, err := meta.Accessor(obj)
	return err == nil && slices.Contains(c.names, m.GetName())
}

// namespaceOf maps an object to its namespace, the loop's key.
func namespaceOf(obj any) []string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return []string{m.GetNamespace()}
}

// sync creates the missing service accounts of one namespace.
func (c *controller) sync(ctx context.Context, namespace string) error {
	ns, err := c.namespaces.Get(namespace)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case ns.Status.Phase != corev1.NamespaceActive:
		return nil
	}
	log := logr.FromContextOrDiscard(ctx)
	var errs []error
	for _, name := range c.names {
		_, err := c.accounts.ServiceAccounts(namespace).Get(name)
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		sa := &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		}
		_, err = c.client.CoreV1().
			ServiceAccounts(namespace).
			Create(ctx, sa, metav1.CreateOptions{})
		switch {
		case err == nil:
			log.V(2).Info("Created service account", "serviceAccount", namespace+"/"+name)
		case apierrors.IsAlreadyExists(err):
			// The informer is behind; nothing to do.
		case apierrors.IsNotFound(err),
			apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// The namespace is going away.
		default:
			errs = append(
				errs,
				fmt.Errorf("creating service account %s/%s: %w", namespace, name, err),
			)
		}
	}
	return errors.Join(errs...)
}
