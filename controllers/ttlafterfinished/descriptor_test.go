package ttlafterfinished_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/ttlafterfinished"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	d := ttlafterfinished.Descriptor(ttlafterfinished.NewOptions())
	if d.Name() != "ttl-after-finished-controller" {
		t.Errorf("name %q", d.Name())
	}
	if a := d.Aliases(); len(a) != 1 || a[0] != "ttl-after-finished" {
		t.Errorf("aliases %q, want [ttl-after-finished]", a)
	}
	if d.IsDisabledByDefault() {
		t.Error("disabled by default; KCM enables it")
	}
	o := ttlafterfinished.NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	f := fs.Lookup("concurrent-ttl-after-finished-syncs")
	if f == nil {
		t.Fatal("--concurrent-ttl-after-finished-syncs not registered")
	}
	if f.DefValue != "5" || f.Usage != "The number of ttl-after-finished-controller workers that are allowed to sync concurrently." {
		t.Errorf("default %q usage %q", f.DefValue, f.Usage)
	}
	if err := fs.Parse([]string{"--concurrent-ttl-after-finished-syncs=9"}); err != nil {
		t.Fatal(err)
	}
	if o.ConcurrentTTLSyncs != 9 {
		t.Errorf("ConcurrentTTLSyncs %d, want 9", o.ConcurrentTTLSyncs)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       ttlafterfinished.Options
		wantErr string
	}{
		{"defaults", ttlafterfinished.NewOptions(), ""},
		{"zero value takes the default", ttlafterfinished.Options{}, ""},
		{"negative workers", ttlafterfinished.Options{ConcurrentTTLSyncs: -1},
			`descriptor "ttl-after-finished-controller": --concurrent-ttl-after-finished-syncs: must be at least 1, got -1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).Register(ttlafterfinished.Descriptor(tt.o)).Build()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// waitFor polls cond every 10ms for up to 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestManagerDeletesFinishedJob(t *testing.T) {
	job := func(name string, finished bool) *batchv1.Job {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:       batchv1.JobSpec{TTLSecondsAfterFinished: ptr.To[int32](0)},
		}
		if finished {
			j.Status.Conditions = []batchv1.JobCondition{{
				Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute)),
			}}
		}
		return j
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{ttlafterfinished.Descriptor(ttlafterfinished.NewOptions())},
		job("done", true), job("running", false)).Start()
	gone := func(name string) bool {
		_, err := h.Client.BatchV1().Jobs("ns").Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	waitFor(t, "the finished job to be deleted", func() bool { return gone("done") })

	// Finishing the running job makes it go too.
	j, err := h.Client.BatchV1().Jobs("ns").Get(t.Context(), "running", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Status.Conditions = job("x", true).Status.Conditions
	if _, err := h.Client.BatchV1().Jobs("ns").UpdateStatus(t.Context(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job finished later to be deleted", func() bool { return gone("running") })
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

type clients struct{ cs kubernetes.Interface }

func (c clients) Config(string) (*rest.Config, error) { return nil, errors.New("no config") }
func (c clients) Client(string) (kubernetes.Interface, error) {
	return c.cs, nil
}
func (c clients) MetadataClient(string) (metadata.Interface, error) {
	return nil, errors.New("no metadata client")
}

// TestRunWithCancelledContext: Run returns and releases the queue (its
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cs := fake.NewClientset()
	c, err := ttlafterfinished.Descriptor(ttlafterfinished.NewOptions()).Init()(t.Context(), descriptor.Context{
		Name: ttlafterfinished.Name, ClientBuilder: clients{cs}, InformerFactory: informers.NewSharedInformerFactory(cs, 0),
	})
	if err != nil || c == nil {
		t.Fatalf("Init = %v, %v", c, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
