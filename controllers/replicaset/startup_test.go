package replicaset

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/internal/poll"
)

// TestListedPodsAreNotHandled: pods of the initial list (or of a running
// informer's replay to a new handler) enqueue nothing; pods that arrive
// afterwards do.
func TestListedPodsAreNotHandled(t *testing.T) {
	rs := newRS("web", 1)
	f := newFixture(t, kindRS, rs)
	owned := newPod("web-1", rs)
	f.c.addPodUnlessListed(owned, true)
	if n := f.c.loop.Len(); n != 0 {
		t.Fatalf("a listed pod enqueued %d key(s), want none", n)
	}
	f.c.addPodUnlessListed(owned, false)
	if n := f.c.loop.Len(); n != 1 {
		t.Fatalf("a new pod enqueued %d key(s), want its owner", n)
	}
}

// TestStartupAdoptsListedOrphans: the owner's own initial list brings
// every ReplicaSet to a sync, which adopts the orphans it selects and
// counts its pods, though no listed pod enqueued anything.
func TestStartupAdoptsListedOrphans(t *testing.T) {
	rs := newRS("web", 2)
	owned, orphan := newPod("web-1", rs), newPod("orphan", nil)
	f := newFixture(t, kindRS, rs, owned, orphan)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	defer func() { cancel(); <-done; f.factory.Shutdown() }()
	f.factory.Start(ctx.Done())
	go func() {
		defer close(done)
		_ = f.c.Run(ctx)
	}()
	var err error
	if !poll.For(10*time.Second, func() bool {
		var got *corev1.Pod
		got, err = f.client.CoreV1().Pods("ns").Get(ctx, "orphan", metav1.GetOptions{})
		return err == nil && metav1.IsControlledBy(got, rs)
	}) {
		t.Fatalf("the orphan was not adopted within 10s (err %v); actions %v", err, f.actions())
	}
	for _, a := range f.actions() {
		if a == "create pods" {
			t.Errorf("created a pod; the ReplicaSet has its 2 (one adopted): actions %v", f.actions())
		}
	}
}
