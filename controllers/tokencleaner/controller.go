package tokencleaner

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/bootstraptoken"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workers is KCM's: one.
const workers = 1

// controller deletes expired tokens; its keys are namespace/name.
type controller struct {
	client    kubernetes.Interface
	secrets   corelisters.SecretLister
	namespace string
	clock     clock.PassiveClock
	loop      *workloop.Loop
	// after requeues a key after a delay: loop.AddAfter, replaced in tests.
	after func(key string, d time.Duration)
}

func newController(cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Core().V1().Secrets()
	c := &controller{
		client:    client,
		secrets:   informer.Lister(),
		namespace: o.TokenSecretNamespace,
		clock:     o.Clock,
	}
	// The loop exists before any handler is registered: an informer that
	// is already running (warm standby) calls a handler at once. On a
	// later failure it is shut down here; otherwise Run releases it.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	c.after = c.loop.AddAfter
	isToken := func(_, obj any) bool { return c.isToken(obj) }
	if err := c.loop.Watch(informer.Informer(), workloop.EnqueueKey(), isToken); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the cache, then cleans tokens until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Cleaning expired bootstrap tokens", "namespace", c.namespace)
	defer log.Info("Stopped cleaning bootstrap tokens")
	return c.loop.RunWorkers(ctx, workers)
}

// isToken passes the bootstrap-token Secrets of the token namespace. (A
// token's deletion passes too; its sync finds no Secret and does nothing.)
func (c *controller) isToken(obj any) bool {
	s, ok := workloop.Object[*corev1.Secret](obj)
	return ok && s.Type == corev1.SecretTypeBootstrapToken && s.Namespace == c.namespace
}

// expiry reports how long until s expires (<= 0: expired). A token without
// an expiration never expires (ok false). An unparsable expiration is an
// error; callers treat the token as expired, as KCM does.
func expiry(s *corev1.Secret, now time.Time) (left time.Duration, ok bool, err error) {
	return bootstraptoken.Expiry(s, now)
}

// due reports whether s is to be deleted now, requeueing key for its expiry
// when it is not yet.
func (c *controller) due(ctx context.Context, key string, s *corev1.Secret) bool {
	if s.Type != corev1.SecretTypeBootstrapToken || s.Namespace != c.namespace ||
		s.DeletionTimestamp != nil {
		return false
	}
	left, expires, err := expiry(s, c.clock.Now())
	switch {
	case err != nil:
		logr.FromContextOrDiscard(ctx).
			Error(err, "Bootstrap token has an invalid expiration; treating it as expired", "secret", key)
		return true
	case !expires:
		return false
	case left > 0:
		c.after(key, left)
		return false
	}
	return true
}

// sync deletes one token if it has expired.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	cached, err := c.secrets.Secrets(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !c.due(ctx, key, cached):
		return nil
	}
	fresh, err := c.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !c.due(ctx, key, fresh):
		return nil
	}
	err = c.client.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{
			UID:             &fresh.UID,
			ResourceVersion: &fresh.ResourceVersion,
		},
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s changed since it was read; re-evaluating: %w", key, err)
	case err != nil:
		return err
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Deleted expired bootstrap token", "secret", key)
	return nil
}
