package main

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
	"github.com/ctrlhost/ctrlhost/controllers/csrsigning"
	"github.com/ctrlhost/ctrlhost/controllers/ctbpublisher"
	"github.com/ctrlhost/ctrlhost/controllers/hpa"
	"github.com/ctrlhost/ctrlhost/controllers/nodeipam"
	"github.com/ctrlhost/ctrlhost/controllers/podgroupprotection"
	"github.com/ctrlhost/ctrlhost/controllers/replicaset"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccounttoken"
	"github.com/ctrlhost/ctrlhost/controllers/storageversiongc"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/serving"
)

// builtins are every built-in, as this program registers them, with a
// root CA given inline.
func builtins(t *testing.T) []descriptor.Descriptor {
	o := builtin.NewOptions()
	pem, _, err := certutil.GenerateSelfSignedCertKey("ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.RootCACertPublisher.RootCAFile, o.RootCACertPublisher.RootCA = "", pem
	return o.Descriptors()
}

// TestBuiltinsTakeOverWarmCaches: under warm standby a new leader's
// built-ins register their handlers on informers that are already running,
// which call them at once; every built-in must be ready for that (before
// the fix, rootcacertpublisher's handler used its queue before it existed,
// and the process died).
func TestBuiltinsTakeOverWarmCaches(t *testing.T) {
	objects := []runtime.Object{
		&corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
		},
		&corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-system"},
			Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
		},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
		&corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"},
		},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "default"},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"},
			Type:       "bootstrap.kubernetes.io/token",
		},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "default"}},
	}
	replica := func(identity string) (*managertest.Harness, func() string) {
		var mu sync.Mutex
		var logged strings.Builder
		h := managertest.New(t, component, builtins(t), objects...)
		gates, err := builtin.NewFeatureGate()
		if err != nil {
			t.Fatal(err)
		}
		h.Builder.WithFeatureGate(gates).WithLogger(funcr.New(func(_, args string) {
			mu.Lock()
			defer mu.Unlock()
			logged.WriteString(args + "\n")
		}, funcr.Options{}))
		h.Options = manager.Options{
			Serving:     serving.Options{SecurePort: serving.PortDisabled},
			Controllers: []string{"*", "tokencleaner", "bootstrapsigner"},
			LeaderElect: true,
			LeaderElection: leader.Config{Identity: identity,
				LeaseDuration: 3 * time.Second, RenewDeadline: 1400 * time.Millisecond, RetryPeriod: 300 * time.Millisecond},
			WarmStandby: true,
		}
		return h, func() string { mu.Lock(); defer mu.Unlock(); return logged.String() }
	}
	a, _ := replica("a")
	a.Start()
	a.WaitRunning(replicaset.ReplicaSetControllerName)
	b, bLog := replica("b")
	b.SameAPI(a)
	b.Start()
	managertest.Eventually(
		t,
		"b's caches synced",
		func() bool { return strings.Contains(bLog(), "Warm standby: caches synced") },
	)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	// These choose not to start here, as KCM's do: no
	// --service-account-private-key-file, no --cluster-signing-* files, no
	// CA for the trust bundle, StorageVersionAPI and GenericWorkload off, no
	// --allocate-node-cidrs; and the HPA controller, which needs a REST
	// config the fake clients do not have.
	notStarted := []string{serviceaccounttoken.Name, csrsigning.Name, ctbpublisher.Name,
		storageversiongc.Name, podgroupprotection.Name, nodeipam.Name, hpa.Name}
	var all []string
	for _, d := range builtins(t) {
		if !slices.Contains(notStarted, d.Name()) {
			all = append(all, d.Name())
		}
	}
	b.WaitRunning(all...)
	b.WaitHealthy("/readyz")
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}
