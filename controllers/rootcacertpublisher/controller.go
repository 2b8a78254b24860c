package rootcacertpublisher

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// The published ConfigMap, as KCM writes it.
const (
	ConfigMapName         = "kube-root-ca.crt"
	DataKey               = "ca.crt"
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver " +
		"when using internal endpoints such as the internal service IP or kubernetes.default.svc. No " +
		"other usage is guaranteed across distributions of Kubernetes clusters."
)

// controller publishes the bundle; its keys are namespace names.
type controller struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	configMaps corelisters.ConfigMapLister
	data       map[string]string
	workers    int
	loop       *workloop.Loop
}

func newController(cc descriptor.Context, ca []byte, workers int) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	nsInformer := cc.InformerFactory.Core().V1().Namespaces()
	cmInformer := cc.InformerFactory.Core().V1().ConfigMaps()
	c := &controller{
		client:     client,
		namespaces: nsInformer.Lister(),
		configMaps: cmInformer.Lister(),
		data:       map[string]string{DataKey: string(ca)},
		workers:    workers,
	}
	// The loop exists before any handler is registered: an informer that
	// is already running (warm standby) calls a handler at once. On a
	// later failure it is shut down here; otherwise Run releases it.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	err = errors.Join(
		c.loop.Watch(nsInformer.Informer(), workloop.EnqueueKey(), addedOrActive),
		c.loop.Watch(cmInformer.Informer(), workloop.EnqueueMapped(namespaceOf), isRootCAConfigMap))
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
		"Publishing the root CA in every namespace",
		"configMap",
		ConfigMapName,
		"workers",
		c.workers,
	)
	defer log.Info("Stopped publishing the root CA")
	return c.loop.RunWorkers(ctx, c.workers)
}

// addedOrActive passes a namespace's add, and its updates while it is
// active. (Its deletion passes too; the sync finds no namespace.)
func addedOrActive(old, obj any) bool {
	ns, ok := workloop.Object[*corev1.Namespace](obj)
	return ok && (old == nil || ns.Status.Phase == corev1.NamespaceActive)
}

// isRootCAConfigMap passes every change of a namespace's root CA ConfigMap.
func isRootCAConfigMap(_, obj any) bool {
	cm, ok := workloop.Object[*corev1.ConfigMap](obj)
	return ok && cm.Name == ConfigMapName
}

// namespaceOf maps the ConfigMap to its namespace, the loop's key.
func namespaceOf(obj any) []string {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil
	}
	return []string{cm.Namespace}
}

// sync creates or corrects the ConfigMap of one namespace.
func (c *controller) sync(ctx context.Context, namespace string) error {
	ns, err := c.namespaces.Get(namespace)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil:
		return nil
	}
	log := logr.FromContextOrDiscard(ctx)
	cm, err := c.configMaps.ConfigMaps(namespace).Get(ConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		_, err := c.client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   namespace,
				Name:        ConfigMapName,
				Annotations: map[string]string{DescriptionAnnotation: Description},
			},
			Data: maps.Clone(c.data),
		}, metav1.CreateOptions{})
		switch {
		case err == nil:
			log.V(2).Info("Created the root CA config map", "namespace", namespace)
			return nil
		case apierrors.IsAlreadyExists(err):
			// The informer is behind; its add event requeues the namespace.
			return nil
		case apierrors.IsNotFound(err),
			apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			return nil
		default:
			return fmt.Errorf("creating %s/%s: %w", namespace, ConfigMapName, err)
		}
	case err != nil:
		return err
	}
	if maps.Equal(cm.Data, c.data) && cm.Annotations[DescriptionAnnotation] != "" {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = maps.Clone(c.data)
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	if _, err := c.client.CoreV1().ConfigMaps(namespace).Update(ctx, cm,
		metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile; the delete event requeues it
		}
		return fmt.Errorf("updating %s/%s: %w", namespace, ConfigMapName, err)
	}
	log.V(2).Info("Corrected the root CA config map", "namespace", namespace)
	return nil
}
