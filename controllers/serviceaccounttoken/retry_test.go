package serviceaccounttoken

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// TestFailingKeyIsDroppedAfterMaxRetries: a secret whose delete keeps
// failing with a retriable error is tried once and retried MaxRetries
// times with back-off, then dropped, as KCM's retryOrForget does. The
// controller runs with its informers in a synctest bubble, so the
// back-offs pass on the bubble's clock.
func TestFailingKeyIsDroppedAfterMaxRetries(t *testing.T) {
	for _, retries := range []int{1, defaultMaxRetries} {
		synctest.Test(t, func(t *testing.T) {
			client := fake.NewClientset(token("ghost-token", "ghost", "", nil))
			var deletes atomic.Int32
			client.PrependReactor(
				"delete",
				"secrets",
				func(clienttesting.Action) (bool, runtime.Object, error) {
					deletes.Add(1)
					return true, nil, errServer
				},
			)
			factory := informers.NewSharedInformerFactory(client, 0)
			s, err := newSigner(NewTestKey(t, "p256"))
			if err != nil {
				t.Fatal(err)
			}
			o := NewOptions()
			o.MaxRetries = retries
			c, err := newController(
				descriptor.Context{Name: Name, InformerFactory: factory},
				client,
				s,
				testCA,
				o.withDefaults(),
			)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			factory.Start(ctx.Done())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()

			time.Sleep(time.Hour) // the bubble's clock: every back-off has passed
			synctest.Wait()
			if got, want := deletes.Load(), int32(1+retries); got != want {
				t.Errorf("MaxRetries %d: %d delete attempts, want %d", retries, got, want)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			factory.Shutdown()
		})
	}
}
