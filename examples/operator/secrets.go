package main

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// secretCounter counts Secrets through a metadata-only informer. It is a
// descriptor.HealthChecker: unhealthy until its informer has synced.
type secretCounter struct {
	count  atomic.Int64
	synced cache.InformerSynced
}

func newSecretCounter(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
	c := &secretCounter{}
	inf := cc.MetadataInformerFactory.ForResource(corev1.SchemeGroupVersion.WithResource("secrets")).
		Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.count.Add(1) },
		DeleteFunc: func(any) { c.count.Add(-1) },
	})
	if err != nil {
		return nil, err
	}
	c.synced = reg.HasSynced
	return c, nil
}

// Count is the number of Secrets the informer holds.
func (c *secretCounter) Count() int64 { return c.count.Load() }

// Run waits for ctx; the informer does the counting.
func (c *secretCounter) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// HealthCheck fails until the informer has synced.
func (c *secretCounter) HealthCheck(*http.Request) error {
	if !c.synced() {
		return errors.New("secret informer not synced")
	}
	return nil
}
