package main

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const (
	toLabel    = "mirror.ctrlhost.io/to"
	fromNSLbl  = "mirror.ctrlhost.io/from-namespace"
	fromName   = "mirror.ctrlhost.io/from-name"
	fromAnnote = "mirror.ctrlhost.io/from"
)

type mirror struct {
	client kubernetes.Interface
	cms    listers.ConfigMapLister
	loop   *workloop.Loop
}

func newMirror(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
	client, err := cc.ClientBuilder.Client(cc.Name)
	if err != nil {
		return nil, err
	}
	inf := cc.InformerFactory.Core().V1().ConfigMaps()
	m := &mirror{client: client, cms: inf.Lister()}
	m.loop = workloop.New(cc.Name, m.sync, workloop.Options{Metrics: cc.Metrics})
	return m.loop, m.loop.Watch(inf.Informer(), workloop.EnqueueMapped(sourceKey))
}

// sourceKey maps a copy to its source and any other ConfigMap to itself.
func sourceKey(obj any) []string {
	cm := obj.(*corev1.ConfigMap)
	if ns, name := cm.Labels[fromNSLbl], cm.Labels[fromName]; ns != "" && name != "" {
		return []string{ns + "/" + name}
	}
	return []string{cm.Namespace + "/" + cm.Name}
}

func (m *mirror) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key) // sourceKey made it
	target := ""
	src, err := m.cms.ConfigMaps(ns).Get(name)
	if err == nil && src.Labels[toLabel] != ns {
		target = src.Labels[toLabel]
	} else if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	copies, _ := m.cms.List(labels.SelectorFromSet(labels.Set{fromNSLbl: ns, fromName: name}))
	var errs []error
	for _, c := range copies { // label-based cleanup: copies outside target go
		if c.Namespace == target {
			continue
		}
		err := m.client.CoreV1().ConfigMaps(c.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if target == "" {
		return errors.Join(errs...)
	}
	cur, err := m.cms.ConfigMaps(target).Get(name)
	want := &corev1.ConfigMap{Data: src.Data, BinaryData: src.BinaryData,
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: target,
			Labels:      map[string]string{fromNSLbl: ns, fromName: name},
			Annotations: map[string]string{fromAnnote: key}}}
	var wrote *corev1.ConfigMap
	switch { // the informer sees our write and enqueues key: no-op updates would loop
	case apierrors.IsNotFound(err):
		wrote, err = m.client.CoreV1().ConfigMaps(target).Create(ctx, want, metav1.CreateOptions{})
	case err == nil && cur.Annotations[fromAnnote] != key:
		err = workloop.Permanent(fmt.Errorf("%s/%s exists and is not a mirror of %s",
			target, name, key))
	case err == nil && !equality.Semantic.DeepEqual([]any{cur.Data, cur.BinaryData, cur.Labels},
		[]any{want.Data, want.BinaryData, want.Labels}):
		want.ResourceVersion = cur.ResourceVersion
		wrote, err = m.client.CoreV1().ConfigMaps(target).Update(ctx, want, metav1.UpdateOptions{})
	}
	m.loop.Wrote(key, wrote) // hold key until the informer has seen this write
	return errors.Join(append(errs, err)...)
}
