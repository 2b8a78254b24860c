package replicaset_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/replicaset"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestOptionsAndFlags(t *testing.T) {
	o := replicaset.NewOptions()
	if o.ConcurrentReplicaSetSyncs != 5 || o.ConcurrentRCSyncs != 5 {
		t.Errorf("NewOptions = %+v, want 5/5", o)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	for _, name := range []string{"concurrent-replicaset-syncs", "concurrent-rc-syncs"} {
		if f := fs.Lookup(name); f == nil || f.DefValue != "5" ||
			!strings.Contains(f.Usage, "allowed to sync concurrently") {
			t.Errorf("flag %s: %+v", name, f)
		}
	}
	if err := fs.Parse([]string{"--concurrent-replicaset-syncs=7", "--concurrent-rc-syncs=3"}); err != nil {
		t.Fatal(err)
	}
	if o.ConcurrentReplicaSetSyncs != 7 || o.ConcurrentRCSyncs != 3 {
		t.Errorf("after parsing: %+v", o)
	}
}

func TestDescriptorNames(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		replicaset.Descriptor(replicaset.NewOptions()),
		controllertest.Identity{
			Name: "replicaset-controller", Alias: "replicaset"},
	)
	controllertest.CheckIdentity(
		t,
		replicaset.ReplicationControllerDescriptor(replicaset.NewOptions()),
		controllertest.Identity{
			Name: "replicationcontroller-controller", Alias: "replicationcontroller", EventSource: "replication-controller"},
	)
}

func TestBuildRejectsInvalidOptions(t *testing.T) {
	bad := replicaset.Options{ConcurrentReplicaSetSyncs: 0, ConcurrentRCSyncs: -2}
	_, err := manager.NewBuilder("test").
		WithClient(fake.NewClientset(), nil).
		WithLogger(logr.Discard()).
		Register(replicaset.Descriptor(bad), replicaset.ReplicationControllerDescriptor(bad)).
		Build()
	if err == nil {
		t.Fatal("Build accepted zero and negative worker counts")
	}
	for _, want := range []string{"--concurrent-replicaset-syncs: must be at least 1, got 0", "--concurrent-rc-syncs: must be at least 1, got -2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Build error does not contain %q:\n%v", want, err)
		}
	}
}

// generateNames makes the fake API server name pods from generateName, as a
// real one does.
func generateNames(cs *fake.Clientset) {
	var n atomic.Int64
	cs.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if p, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod); ok && p.Name == "" {
			id := n.Add(1)
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, id)
			p.UID = types.UID(fmt.Sprintf("generated-%d", id))
		}
		return false, nil, nil
	})
}

// TestThroughManager runs each descriptor in a Manager over fake clients and
// waits, with a deadline, for the right number of pods, checking on every
// poll that there are never more.
func TestThroughManager(t *testing.T) {
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	tests := []struct {
		name   string
		d      descriptor.Descriptor
		obj    runtime.Object
		want   int
		status func(t *testing.T, h *managertest.Harness) (int32, error)
	}{
		{
			name: "ReplicaSet",
			d:    replicaset.Descriptor(replicaset.NewOptions()),
			obj: &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "rs-uid"},
				Spec: appsv1.ReplicaSetSpec{
					Replicas: ptr.To[int32](3),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Template: template,
				},
			},
			want: 3,
			status: func(t *testing.T, h *managertest.Harness) (int32, error) {
				rs, err := h.Client.AppsV1().
					ReplicaSets("ns").
					Get(t.Context(), "web", metav1.GetOptions{})
				if err != nil {
					return 0, err
				}
				return rs.Status.Replicas, nil
			},
		},
		{
			name: "ReplicationController",
			d:    replicaset.ReplicationControllerDescriptor(replicaset.NewOptions()),
			obj: &corev1.ReplicationController{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "rc-uid"},
				Spec: corev1.ReplicationControllerSpec{
					Replicas: ptr.To[int32](2),
					Selector: map[string]string{"app": "web"},
					Template: &template,
				},
			},
			want: 2,
			status: func(t *testing.T, h *managertest.Harness) (int32, error) {
				rc, err := h.Client.CoreV1().
					ReplicationControllers("ns").
					Get(t.Context(), "web", metav1.GetOptions{})
				if err != nil {
					return 0, err
				}
				return rc.Status.Replicas, nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := managertest.New(t, "test", []descriptor.Descriptor{tt.d}, tt.obj)
			generateNames(h.Client)
			h.Start()
			var pods *corev1.PodList
			var replicas int32
			if !poll.For(30*time.Second, func() bool {
				var err error
				pods, err = h.Client.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if n := len(pods.Items); n > tt.want {
					t.Fatalf("%d pods, more than the %d wanted", n, tt.want)
				}
				replicas, err = tt.status(t, h)
				if err != nil {
					t.Fatal(err)
				}
				if len(pods.Items) == tt.want && int(replicas) == tt.want {
					return true
				}
				select {
				case <-h.Done():
					t.Fatalf("the manager stopped: %v", h.Err())
				default:
				}
				return false
			}) {
				t.Fatalf("after 30s: %d pods, status.replicas %d; want %d",
					len(pods.Items), replicas, tt.want)
			}
			for _, p := range mustList(t, h) {
				if ref := metav1.GetControllerOf(&p); ref == nil || ref.Name != "web" {
					t.Errorf("pod %s has controller %+v", p.Name, ref)
				}
			}
			if err := h.Stop(); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
}

func mustList(t *testing.T, h *managertest.Harness) []corev1.Pod {
	t.Helper()
	l, err := h.Client.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}
