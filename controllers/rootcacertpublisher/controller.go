package rootcacertpublisher

import (
	"context"
	"fmt"
	"maps"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// The published ConfigMap, as KCM writes it.
const (
	ConfigMapName         = "kube-root-ca.crt"
	DataKey               = "ca.crt"
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints " +
		"such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)

// controller publishes the bundle; its keys are namespace names.
type controller struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	configMaps corelisters.ConfigMapLister
	synced     []cache.InformerSynced
	data       map[string]string
	workers    int
	loop       *workloop.Loop
}

func newController(cc descriptor.Context, ca []byte, workers int) (*controller, error) {
	client, err := cc.ClientBuilder.Client(cc.Name)
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
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{})
	nsReg, err := nsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.namespaceAdded,
		UpdateFunc: func(_, obj any) { c.namespaceUpdated(obj) },
	})
	if err != nil {
		c.loop.ShutDown()
		return nil, fmt.Errorf("namespace event handler: %w", err)
	}
	cmReg, err := cmInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.configMapChanged,
		UpdateFunc: func(_, obj any) { c.configMapChanged(obj) },
		DeleteFunc: c.configMapChanged,
	})
	if err != nil {
		c.loop.ShutDown()
		return nil, fmt.Errorf("config map event handler: %w", err)
	}
	c.synced = []cache.InformerSynced{nsReg.HasSynced, cmReg.HasSynced}
	return c, nil
}

// Run waits for the caches, then syncs namespaces until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Publishing the root CA in every namespace", "configMap", ConfigMapName, "workers", c.workers)
	defer log.Info("Stopped publishing the root CA")
	c.loop.WaitFor(c.synced...)
	return c.loop.RunWorkers(ctx, c.workers)
}

func (c *controller) namespaceAdded(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.loop.Add(ns.Name)
	}
}

func (c *controller) namespaceUpdated(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok && ns.Status.Phase == corev1.NamespaceActive {
		c.loop.Add(ns.Name)
	}
}

func (c *controller) configMapChanged(obj any) {
	if cm, ok := workloop.Object[*corev1.ConfigMap](obj); ok && cm.Name == ConfigMapName {
		c.loop.Add(cm.Namespace)
	}
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
		case apierrors.IsNotFound(err), apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
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
	if _, err := c.client.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile; the delete event requeues it
		}
		return fmt.Errorf("updating %s/%s: %w", namespace, ConfigMapName, err)
	}
	log.V(2).Info("Corrected the root CA config map", "namespace", namespace)
	return nil
}
