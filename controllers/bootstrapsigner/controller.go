package bootstrapsigner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/ctrlhost/ctrlhost/controllers/internal/bootstraptoken"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workers is KCM's: one. There is one key.
const workers = 1

// controller keeps the signatures of one ConfigMap; its one key is the
// ConfigMap's namespace/name.
type controller struct {
	client     kubernetes.Interface
	secrets    corelisters.SecretLister
	configMaps corelisters.ConfigMapLister
	o          Options
	key        string
	loop       *workloop.Loop
}

func newController(cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	secrets := cc.InformerFactory.Core().V1().Secrets()
	configMaps := cc.InformerFactory.Core().V1().ConfigMaps()
	c := &controller{
		client:     client,
		secrets:    secrets.Lister(),
		configMaps: configMaps.Lister(),
		o:          o,
		key:        o.ConfigMapNamespace + "/" + o.ConfigMapName,
	}
	// The loop exists before any handler is registered: an informer that
	// is already running (warm standby) calls a handler at once. On a
	// later failure it is shut down here; otherwise Run releases it.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	toKey := workloop.EnqueueMapped(func(any) []string { return []string{c.key} })
	err = errors.Join(
		c.loop.Watch(configMaps.Informer(), toKey,
			func(_, obj any) bool { return c.isSigned(obj) }),
		c.loop.Watch(secrets.Informer(), toKey,
			func(_, obj any) bool { return c.isToken(obj) }))
	if err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then keeps the signatures until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Signing the cluster-info kubeconfig with bootstrap tokens", "configMap", c.key,
		"tokenNamespace", c.o.TokenSecretNamespace)
	defer log.Info("Stopped signing the cluster-info kubeconfig")
	return c.loop.RunWorkers(ctx, workers)
}

// isSigned passes every change of the signed ConfigMap.
func (c *controller) isSigned(obj any) bool {
	cm, ok := workloop.Object[*corev1.ConfigMap](obj)
	return ok && cm.Namespace == c.o.ConfigMapNamespace && cm.Name == c.o.ConfigMapName
}

// isToken passes every change of a bootstrap token Secret of the token
// namespace, its deletion included.
func (c *controller) isToken(obj any) bool {
	s, ok := workloop.Object[*corev1.Secret](obj)
	return ok && s.Type == bootstraptoken.SecretType && s.Namespace == c.o.TokenSecretNamespace
}

// signatures returns the signatures the ConfigMap's kubeconfig should
// carry, by data key, and how long until the first of their tokens
// expires (0: none expires).
func (c *controller) signatures(ctx context.Context, kubeconfig string) (map[string]string,
	time.Duration, error) {
	all, err := c.secrets.Secrets(c.o.TokenSecretNamespace).List(labels.Everything())
	if err != nil {
		return nil, 0, err
	}
	log := logr.FromContextOrDiscard(ctx)
	now := c.o.Clock.Now()
	sigs := map[string]string{}
	var next time.Duration
	for _, s := range all {
		if s.Type != bootstraptoken.SecretType {
			continue
		}
		t, err := bootstraptoken.ForSigning(s, now)
		if err != nil {
			if !errors.Is(err, bootstraptoken.ErrNotSigning) {
				log.V(3).Info("Not signing with this bootstrap token", "secret", s.Namespace+"/"+
					s.Name, "reason", err.Error())
			}
			continue
		}
		key := SignatureKeyPrefix + t.ID
		if _, dup := sigs[key]; dup {
			log.V(1).Info("Ignoring a second bootstrap token with the same ID", "tokenID", t.ID,
				"secret", s.Namespace+"/"+s.Name)
			continue
		}
		sig, err := jws.ComputeDetachedSignature(kubeconfig, t.ID, t.Secret)
		if err != nil {
			log.Error(err, "Cannot sign with this bootstrap token", "tokenID", t.ID)
			continue
		}
		sigs[key] = sig
		if t.Expires && (next == 0 || t.Left < next) {
			next = t.Left
		}
	}
	return sigs, next, nil
}

// sync brings the ConfigMap's signatures to one per signing token, of its
// current kubeconfig, and schedules itself for the next token's expiry.
func (c *controller) sync(ctx context.Context, key string) error {
	if key != c.key {
		return workloop.Permanent(fmt.Errorf("unexpected key %q: only %q is signed", key, c.key))
	}
	cm, err := c.configMaps.ConfigMaps(c.o.ConfigMapNamespace).Get(c.o.ConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("configMap", key)
	kubeconfig, ok := cm.Data[kubeConfigKey]
	if !ok {
		log.V(3).Info("Nothing to sign: the ConfigMap has no kubeconfig", "key", kubeConfigKey)
		return nil
	}
	want, next, err := c.signatures(ctx, kubeconfig)
	if err != nil {
		return err
	}
	have := map[string]string{}
	for k, v := range cm.Data {
		if strings.HasPrefix(k, SignatureKeyPrefix) {
			have[k] = v
		}
	}
	if !maps.Equal(have, want) {
		signed := cm.DeepCopy()
		maps.DeleteFunc(signed.Data, func(k, _ string) bool {
			return strings.HasPrefix(k, SignatureKeyPrefix)
		})
		maps.Copy(signed.Data, want)
		updated, err := c.client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, signed,
			metav1.UpdateOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil // deleted meanwhile
		case err != nil:
			return fmt.Errorf("updating the signatures of ConfigMap %s: %w", key, err)
		}
		c.loop.Wrote(key, updated)
		log.V(2).Info("Updated the kubeconfig's signatures", "signatures", len(want))
	}
	if next > 0 {
		// A signature goes when its token expires, not at the next event.
		return workloop.RequeueAfter(next)
	}
	return nil
}
