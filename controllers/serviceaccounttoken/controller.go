package serviceaccounttoken

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// The queue names, which label the work queues' metrics.
const (
	serviceAccountQueue = "serviceaccount_tokens_service"
	secretQueue         = "serviceaccount_tokens_secret"
)

// removeReferenceBackoff spaces the retries of removing a deleted secret
// from its ServiceAccount's secrets on conflicts, as KCM's does.
var removeReferenceBackoff = wait.Backoff{Steps: 10, Duration: 100 * time.Millisecond, Jitter: 1.0}

// controller fills and deletes service-account token secrets. It has two
// loops: one keyed by ServiceAccount (namespace, name, uid), deleting the
// token secrets of ServiceAccounts that are gone, and one keyed by token
// Secret (namespace, name, uid and the ServiceAccount its annotations
// name).
type controller struct {
	client          kubernetes.Interface
	serviceAccounts corelisters.ServiceAccountLister
	secrets         corelisters.SecretLister
	signer          *signer
	rootCA          []byte
	workers         int
	saLoop          *workloop.Loop
	secretLoop      *workloop.Loop
	// removeBackoff spaces retries of a conflicting reference removal;
	// tests shorten it.
	removeBackoff wait.Backoff
}

func newController(
	cc descriptor.Context,
	client kubernetes.Interface,
	s *signer,
	rootCA []byte,
	o Options,
) (*controller, error) {
	saInformer := cc.InformerFactory.Core().V1().ServiceAccounts()
	secretInformer := cc.InformerFactory.Core().V1().Secrets()
	c := &controller{
		client:          client,
		serviceAccounts: saInformer.Lister(),
		secrets:         secretInformer.Lister(),
		signer:          s,
		rootCA:          rootCA,
		workers:         int(o.ConcurrentSATokenSyncs),
		removeBackoff:   removeReferenceBackoff,
	}
	// The loops exist before any handler is registered: an informer that is
	// already running (warm standby) calls a handler at once. On a later
	// failure they are shut down here; otherwise Run releases them.
	loopOpts := workloop.Options{MaxRetries: o.MaxRetries, Metrics: cc.Metrics}
	c.saLoop = workloop.New(serviceAccountQueue, c.syncServiceAccount, loopOpts)
	c.secretLoop = workloop.New(secretQueue, c.syncSecret, loopOpts)
	fail := func(err error) (*controller, error) {
		c.saLoop.ShutDown()
		c.secretLoop.ShutDown()
		return nil, err
	}
	// Not Loop.Watch: two loops, one per kind, as KCM's two queues; keys carry
	// the UID (serviceAccountKey, secretKey).
	saReg, err := saInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.serviceAccountChanged,
		UpdateFunc: func(_, obj any) { c.serviceAccountChanged(obj) },
		DeleteFunc: c.serviceAccountChanged,
	})
	if err != nil {
		return fail(fmt.Errorf("service account event handler: %w", err))
	}
	// Not Loop.Watch: the secret loop's keys carry the UID (see above).
	secretReg, err := secretInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.secretChanged,
		UpdateFunc: func(_, obj any) { c.secretChanged(obj) },
		DeleteFunc: c.secretChanged,
	})
	if err != nil {
		return fail(fmt.Errorf("secret event handler: %w", err))
	}
	// Each loop joins both kinds, so each waits for both caches.
	for _, l := range []*workloop.Loop{c.saLoop, c.secretLoop} {
		l.WaitFor(saReg.HasSynced, secretReg.HasSynced)
	}
	return c, nil
}

// Run waits for the caches, then syncs ServiceAccounts and Secrets, each
// with the configured number of workers, until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Managing service account token secrets", "workers", c.workers)
	defer log.Info("Stopped managing service account token secrets")
	var wg sync.WaitGroup
	var saErr, secretErr error
	wg.Go(func() { saErr = c.saLoop.RunWorkers(ctx, c.workers) })
	wg.Go(func() { secretErr = c.secretLoop.RunWorkers(ctx, c.workers) })
	wg.Wait()
	return errors.Join(saErr, secretErr)
}

func (c *controller) serviceAccountChanged(obj any) {
	if sa, ok := workloop.Object[*corev1.ServiceAccount](obj); ok {
		c.saLoop.Add(serviceAccountKey(sa))
	}
}

func (c *controller) secretChanged(obj any) {
	if s, ok := workloop.Object[*corev1.Secret](obj); ok &&
		s.Type == corev1.SecretTypeServiceAccountToken {
		c.secretLoop.Add(secretKey(s))
	}
}

// serviceAccountKey is "namespace/name/uid".
func serviceAccountKey(sa *corev1.ServiceAccount) string {
	return sa.Namespace + "/" + sa.Name + "/" + string(sa.UID)
}

type saRef struct {
	namespace, name string
	uid             types.UID
}

func parseServiceAccountKey(key string) (saRef, error) {
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return saRef{}, fmt.Errorf("invalid service account key %q: want namespace/name/uid", key)
	}
	return saRef{parts[0], parts[1], types.UID(parts[2])}, nil
}

// secretRef is what a secret key holds: the secret and the ServiceAccount
// its annotations name (saUID is empty when the uid annotation is).
type secretRef struct {
	namespace, name string
	uid             types.UID
	saName          string
	saUID           types.UID
}

// secretKey is "namespace/name/uid/saName/saUID", the two annotation values
// path-escaped (they may hold anything, slashes included).
func secretKey(s *corev1.Secret) string {
	return strings.Join([]string{s.Namespace, s.Name, string(s.UID),
		url.PathEscape(s.Annotations[corev1.ServiceAccountNameKey]),
		url.PathEscape(s.Annotations[corev1.ServiceAccountUIDKey])}, "/")
}

func parseSecretKey(key string) (secretRef, error) {
	parts := strings.Split(key, "/")
	if len(parts) != 5 {
		return secretRef{}, fmt.Errorf(
			"invalid secret key %q: want namespace/name/uid/saName/saUID",
			key,
		)
	}
	saName, err1 := url.PathUnescape(parts[3])
	saUID, err2 := url.PathUnescape(parts[4])
	if err := errors.Join(err1, err2); err != nil {
		return secretRef{}, fmt.Errorf("invalid secret key %q: %w", key, err)
	}
	r := secretRef{parts[0], parts[1], types.UID(parts[2]), saName, types.UID(saUID)}
	if r.namespace == "" || r.name == "" || r.uid == "" || r.saName == "" {
		return secretRef{}, fmt.Errorf(
			"invalid secret key %q: the namespace, name, uid and %s annotation must be set",
			key,
			corev1.ServiceAccountNameKey,
		)
	}
	return r, nil
}
