package main

import (
	"context"
	"errors"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/listers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/examples/widget-operator/api/v1alpha1"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const (
	widgetLabel = "example.ctrlhost.io/widget"  // on a Secret: the Widget it is for
	finalizer   = "example.ctrlhost.io/release" // the Widget's Secrets lose widgetLabel
	secretKeys  = "secret-keys"                 // the ConfigMap entry listing the Secrets' keys
)

var (
	configMapResource = corev1.SchemeGroupVersion.WithResource("configmaps")
	secretResource    = corev1.SchemeGroupVersion.WithResource("secrets")
)

// widgetController keeps each Widget's ConfigMap and status.
type widgetController struct {
	widgets listers.ResourceIndexer[*v1alpha1.Widget]
	secrets corelisters.SecretLister
	kube    kubernetes.Interface
	write   workloop.Writer
}

func newWidgetController(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
	inf, err := informers.Custom[v1alpha1.Widget](cc.Informers, v1alpha1.Resource)
	if err != nil {
		return nil, err
	}
	dyn, err := cc.ClientBuilder.DynamicClient(cc.Name)
	if err != nil {
		return nil, err
	}
	kube, err := cc.ClientBuilder.Client(cc.Name)
	if err != nil {
		return nil, err
	}
	secrets := cc.InformerFactory.Core().V1().Secrets()
	c := &widgetController{
		widgets: listers.New[*v1alpha1.Widget](inf.GetIndexer(), v1alpha1.Resource.GroupResource()),
		secrets: secrets.Lister(),
		kube:    kube,
	}
	loop := workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	c.write = workloop.Writer{Client: dyn, FieldManager: cc.Name, Loop: loop}
	loop.WaitFor(secrets.Informer().HasSynced)
	cc.Queues.Handle(loop.Add) // secret-requeuer's keys
	cms := cc.InformerFactory.Core().V1().ConfigMaps().Informer()
	return loop, errors.Join(
		loop.Watch(inf, workloop.EnqueueKey()),
		loop.Watch(cms, workloop.EnqueueOwner(v1alpha1.Kind)),
	)
}

func (c *widgetController) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	w, err := listers.NewNamespaced(c.widgets, ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // the garbage collector deletes its ConfigMap
	} else if err != nil {
		return err
	}
	release := func(ctx context.Context) error { return c.release(ctx, ns, name) }
	deleting, err := c.write.Finalize(ctx, v1alpha1.Resource, w, finalizer, key, release)
	if deleting || err != nil {
		return err
	}
	secrets, err := c.secrets.Secrets(ns).List(labels.SelectorFromSet(labels.Set{widgetLabel: name}))
	if err != nil {
		return err
	}
	keys := sets.New[string]()
	for _, s := range secrets {
		keys.Insert(sets.KeySet(s.Data).UnsortedList()...)
	}
	data := maps.Clone(w.Spec.Data)
	if data == nil {
		data = map[string]string{}
	}
	data[secretKeys] = strings.Join(sets.List(keys), ",") // over any spec.data entry of that name
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
	next := w.DeepCopy()
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Reconciled"}
	_, err = c.write.ApplyOwned(ctx, configMapResource, cm, w, v1alpha1.Kind, key)
	if err != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "ConfigMapFailed", err.Error()
	} else {
		next.Status.ConfigMap, next.Status.SecretKeys = name, keys.Len()
	}
	workloop.SetCondition(&next.Status.Conditions, ready, w.Generation)
	if equality.Semantic.DeepEqual(next.Status, w.Status) {
		return err
	}
	_, statusErr := c.write.ApplyStatus(ctx, v1alpha1.Resource, next, key)
	return errors.Join(err, statusErr)
}

// release takes widgetLabel off the Widget's Secrets.
func (c *widgetController) release(ctx context.Context, ns, name string) error {
	secrets, err := c.secrets.Secrets(ns).List(labels.SelectorFromSet(labels.Set{widgetLabel: name}))
	if err != nil {
		return err
	}
	patch := []byte(`{"metadata":{"labels":{"` + widgetLabel + `":null}}}`)
	var errs []error
	for _, s := range secrets {
		_, err := c.kube.CoreV1().Secrets(ns).Patch(ctx, s.Name, types.MergePatchType, patch,
			metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// newSecretRequeuer hands the widget-controller the Widget a Secret is
// labelled for, on each change of the Secret: before and after an update,
// so that a Secret relabelled or unlabelled requeues its former Widget too.
func newSecretRequeuer(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
	loop := workloop.New(cc.Name, func(_ context.Context, key string) error {
		return cc.Queues.Send("widget-controller", key)
	}, workloop.Options{Metrics: cc.Metrics})
	return loop, loop.Watch(cc.InformerFactory.Core().V1().Secrets().Informer(), widgetOfSecret)
}

// widgetOfSecret maps a Secret to the key of the Widget its label names.
func widgetOfSecret(obj any) []string {
	s := obj.(*corev1.Secret)
	if w := s.Labels[widgetLabel]; w != "" {
		return []string{s.Namespace + "/" + w}
	}
	return nil
}
