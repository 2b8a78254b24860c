//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

var shared testenv.Shared

func env(t *testing.T) *testenv.Env {
	t.Helper()
	return shared.Get(t)
}

// Goroutines upstream packages start at import time are not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(stopEnv{m}, goleak.IgnoreCurrent())
}

type stopEnv struct{ m *testing.M }

func (s stopEnv) Run() int {
	code := s.m.Run()
	if err := shared.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the environment:", err)
		code = 1
	}
	return code
}

// pending holds native controllers outside the one list (a controller
// under way, or one in a module of its own): its scenario file registers
// it here from an init function.
var pending []descriptor.Descriptor

// The settings both sides get, under KCM's flag names.
const terminatedPodGCThreshold = 2

// runner builds both sides' descriptors with the same settings.
func runner(t *testing.T, e *testenv.Env) differential.Runner {
	caFile := e.PKI().CAFile
	return differential.Runner{
		Config: e.Config(),
		Descriptors: func(side differential.Side) []descriptor.Descriptor {
			if side == differential.Native {
				// Every native built-in (the one list), built for the
				// scenarios' API server, whose PKI holds the
				// service-account signing key.
				o := builtin.NewOptions()
				o.PodGC.TerminatedPodGCThreshold = terminatedPodGCThreshold
				o.RootCACertPublisher.RootCAFile = caFile
				o.CTBPublisher.RootCAFile = caFile
				o.ServiceAccountToken.ServiceAccountKeyFile = e.PKI().ServiceAccountKeyFile
				o.ServiceAccountToken.RootCAFile = caFile
				return append(o.Descriptors(), pending...)
			}
			o, err := kcm.NewOptions()
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := o.Config(manager.NewOptions())
			if err != nil {
				t.Fatal(err)
			}
			cfg.PodGCController.TerminatedPodGCThreshold = terminatedPodGCThreshold
			cfg.SAController.RootCAFile = caFile
			cfg.SAController.ServiceAccountKeyFile = e.PKI().ServiceAccountKeyFile
			ds, err := kcm.Descriptors(kcm.Config{Component: cfg})
			if err != nil {
				t.Fatal(err)
			}
			return ds
		},
		FeatureGate: func(side differential.Side) featuregate.FeatureGate {
			if side == differential.Upstream {
				return utilfeature.DefaultMutableFeatureGate
			}
			return nil
		},
	}
}

// gatedRunner starts an API server of the test's own that serves the
// group version runtimeConfig names ("group/version") with gate on, and
// returns it with a runner for it whose two sides have gate on too:
// upstream through KCM's default gate, native through a gate of specs.
// For a built-in KCM and ctrlhost leave off by default.
func gatedRunner(t *testing.T, gate featuregate.Feature,
	specs map[featuregate.Feature]featuregate.FeatureSpec,
	runtimeConfig string) (differential.Runner, *testenv.Env) {
	t.Helper()
	e, err := testenv.Start(t.Context(), testenv.Options{
		FeatureGates:        map[string]bool{string(gate): true},
		ExtraAPIServerFlags: []string{"--runtime-config=" + runtimeConfig + "=true"},
		Logf:                t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, gate, true)
	native := featuregate.NewFeatureGate()
	if err := native.Add(specs); err != nil {
		t.Fatal(err)
	}
	if err := native.SetFromMap(map[string]bool{string(gate): true}); err != nil {
		t.Fatal(err)
	}
	r := runner(t, e)
	r.FeatureGate = func(side differential.Side) featuregate.FeatureGate {
		if side == differential.Upstream {
			return utilfeature.DefaultMutableFeatureGate
		}
		return native
	}
	return r, e
}

// upstreamAfterSync makes r's upstream side start the controller name
// only once the informer informer returns has synced. KCM's cleaners make
// their first pass over their cache as soon as they run, without waiting
// for it, and the next one a period later (an hour, five minutes):
// unwrapped, the first pass sees whatever the informer has listed by then
// (usually nothing), and a scenario would compare a race. Wrapped, both
// sides' first passes see every object, and the comparison is of what each
// decides. The native cleaners wait for their caches themselves.
func upstreamAfterSync(r *differential.Runner, name string,
	informer func(descriptor.Context) cache.SharedIndexInformer) {
	descriptors := r.Descriptors
	r.Descriptors = func(side differential.Side) []descriptor.Descriptor {
		ds := descriptors(side)
		if side != differential.Upstream {
			return ds
		}
		for i, d := range ds {
			if d.Name() != name {
				continue
			}
			init := d.Init()
			ds[i] = descriptor.New(d.Name(), func(ctx context.Context,
				cc descriptor.Context) (descriptor.Controller, error) {
				c, err := init(ctx, cc)
				if c == nil || err != nil {
					return c, err
				}
				inf := informer(cc)
				return descriptor.ControllerFunc(func(ctx context.Context) error {
					cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
					return c.Run(ctx) // even when ctx is done: Run releases what init took
				}), nil
			}).WithAliases(d.Aliases()...).WithFeatureGates(d.FeatureGates()...)
		}
		return ds
	}
}

// compare runs sc and fails on any difference.
func compare(t *testing.T, sc differential.Scenario) differential.Result {
	t.Helper()
	e := env(t)
	start := time.Now()
	res, err := runner(t, e).Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	return res
}

// withDefaultSA creates the namespace's "default" ServiceAccount, which
// the API server's admission requires of pods and which no controller
// makes here, then runs setup.
func withDefaultSA(setup func(context.Context, kubernetes.Interface, string) error) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if setup == nil {
			return nil
		}
		return setup(ctx, cs, ns)
	}
}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

func objects[T any](items []T, ptr func(*T) runtime.Object) []runtime.Object {
	out := make([]runtime.Object, 0, len(items))
	for i := range items {
		out = append(out, ptr(&items[i]))
	}
	return out
}

func podsIn(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		l.Items[i].Kind = "Pod"
	}
	return objects(l.Items, func(p *corev1.Pod) runtime.Object { return p }), nil
}

func count(state []map[string]any, kind string) int {
	n := 0
	for _, o := range state {
		if o["kind"] == kind {
			n++
		}
	}
	return n
}

// deletePods force-deletes the pods of ns (there is no kubelet).
func deletePods(ctx context.Context, cs kubernetes.Interface, ns string) error {
	return cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
}

// TestReplicaSet: a ReplicaSet of 3 adopts a matching orphan pod and
// creates two more; its status counts them.
func TestReplicaSet(t *testing.T) {
	labels := map[string]string{"app": "web"}
	res := compare(t, differential.Scenario{
		Name: "replicaset adopts and scales up", Controller: "replicaset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod("web-orphan", labels), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: appsv1.ReplicaSetSpec{
					Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod("", nil).Spec},
				},
			}, metav1.CreateOptions{})
			return err
		}),
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			objs, err := podsIn(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			rs, err := cs.AppsV1().ReplicaSets(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			rs.Kind = "ReplicaSet"
			return append(objs, rs), nil
		},
		Settled: func(state []map[string]any) bool {
			return count(state, "Pod") == 3 && strings.Contains(fmt.Sprint(state), "fullyLabeledReplicas:3")
		},
		Cleanup: deletePods,
	})
	if count(res.Native, "Pod") != 3 {
		t.Errorf("native side ended with %d pods, want 3", count(res.Native, "Pod"))
	}
}

// TestReplicationController: the same through a ReplicationController.
func TestReplicationController(t *testing.T) {
	labels := map[string]string{"app": "legacy"}
	compare(t, differential.Scenario{
		Name: "replicationcontroller scales up", Controller: "replicationcontroller-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			_, err := cs.CoreV1().ReplicationControllers(ns).Create(ctx, &corev1.ReplicationController{
				ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
				Spec: corev1.ReplicationControllerSpec{
					Replicas: ptr.To[int32](2), Selector: labels,
					Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod("", nil).Spec},
				},
			}, metav1.CreateOptions{})
			return err
		}),
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			objs, err := podsIn(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			rc, err := cs.CoreV1().ReplicationControllers(ns).Get(ctx, "legacy", metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			rc.Kind = "ReplicationController"
			return append(objs, rc), nil
		},
		Settled: func(state []map[string]any) bool {
			return count(state, "Pod") == 2 && strings.Contains(fmt.Sprint(state), "fullyLabeledReplicas:2")
		},
		Cleanup: deletePods,
	})
}

// TestPodGCTerminatedThreshold: with --terminated-pod-gc-threshold=2, four
// succeeded pods become two. Which two survive depends on creation times
// that tie within a second, so the count is compared, not the names.
func TestPodGCTerminatedThreshold(t *testing.T) {
	compare(t, differential.Scenario{
		Name: "podgc keeps the threshold of terminated pods", Controller: "pod-garbage-collector-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for i := range 4 {
				p, err := cs.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("done-%d", i), nil), metav1.CreateOptions{})
				if err != nil {
					return err
				}
				p.Status.Phase = corev1.PodSucceeded
				if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			return nil
		}),
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			summary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "summary"},
				Data: map[string]string{"terminatedPodsLeft": fmt.Sprint(len(l.Items))}}
			summary.Kind = "Summary"
			return []runtime.Object{summary}, nil
		},
		Settled: func(state []map[string]any) bool { return strings.Contains(fmt.Sprint(state), "terminatedPodsLeft:2") },
		Cleanup: deletePods,
	})
}

// TestServiceAccount: a new namespace gets its "default" ServiceAccount.
func TestServiceAccount(t *testing.T) {
	compare(t, differential.Scenario{
		Name: "serviceaccount creates default", Controller: "serviceaccount-controller",
		Setup: func(context.Context, kubernetes.Interface, string) error { return nil },
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			l, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "ServiceAccount"
			}
			return objects(l.Items, func(s *corev1.ServiceAccount) runtime.Object { return s }), nil
		},
		Settled: func(state []map[string]any) bool { return count(state, "ServiceAccount") == 1 },
	})
}

// TestTokenCleaner: an expired bootstrap token goes, a valid one stays.
func TestTokenCleaner(t *testing.T) {
	secret := func(prefix, ns string, expires time.Time) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Namespace: "kube-system", Labels: map[string]string{"differential": ns}},
			Type:       corev1.SecretTypeBootstrapToken,
			StringData: map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef", "expiration": expires.UTC().Format(time.RFC3339)},
		}
	}
	compare(t, differential.Scenario{
		Name: "tokencleaner deletes the expired token", Controller: "token-cleaner-controller",
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, s := range []*corev1.Secret{secret("bootstrap-token-expired-", ns, time.Now().Add(-time.Hour)), secret("bootstrap-token-valid-", ns, time.Now().Add(time.Hour))} {
				if _, err := cs.CoreV1().Secrets("kube-system").Create(ctx, s, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			l, err := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "differential=" + ns})
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "Secret"
				l.Items[i].Data = nil // the expiration differs by run
			}
			return objects(l.Items, func(s *corev1.Secret) runtime.Object { return s }), nil
		},
		Settled: func(state []map[string]any) bool { return count(state, "Secret") == 1 },
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			return cs.CoreV1().Secrets("kube-system").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "differential=" + ns})
		},
	})
}

// TestRootCAPublisher: a namespace gets kube-root-ca.crt with the CA.
func TestRootCAPublisher(t *testing.T) {
	e := env(t)
	ca, err := os.ReadFile(filepath.Clean(e.PKI().CAFile))
	if err != nil {
		t.Fatal(err)
	}
	res := compare(t, differential.Scenario{
		Name: "root CA published", Controller: "root-ca-certificate-publisher-controller",
		Setup: func(context.Context, kubernetes.Interface, string) error { return nil },
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			cm.Kind = "ConfigMap"
			return []runtime.Object{cm}, nil
		},
	})
	if !strings.Contains(fmt.Sprint(res.Native), strings.TrimSpace(string(ca))[:40]) {
		t.Error("the published ConfigMap does not hold the CA")
	}
}

// TestTTLAfterFinished: a finished Job with ttlSecondsAfterFinished 0 is
// deleted in the foreground (with no garbage collector running here, it
// stays behind its foregroundDeletion finalizer, on both sides).
func TestTTLAfterFinished(t *testing.T) {
	compare(t, differential.Scenario{
		Name: "ttl-after-finished deletes a finished job", Controller: "ttl-after-finished-controller",
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			j, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "done"},
				Spec: batchv1.JobSpec{
					TTLSecondsAfterFinished: ptr.To[int32](0), Suspend: ptr.To(true),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			now := metav1.Now()
			j.Status = batchv1.JobStatus{
				StartTime: &now, CompletionTime: &now, Succeeded: 1,
				Conditions: []batchv1.JobCondition{
					{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
					{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
				},
			}
			_, err = cs.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
			return err
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, "done", metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			j.Kind = "Job"
			return []runtime.Object{j}, nil
		},
		Settled: func(state []map[string]any) bool { return strings.Contains(fmt.Sprint(state), "foregroundDeletion") },
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			_, err := cs.BatchV1().Jobs(ns).Patch(ctx, "done", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			return err
		},
	})
}

// TestClusterRoleAggregation: a ClusterRole aggregating two selectors gets
// its matching roles' rules (a rule two of them share once, in name order),
// applied by the controller's field manager; a matching role added while
// it runs adds its rules.
func TestClusterRoleAggregation(t *testing.T) {
	rule := func(verb, resource string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""},
			Resources: []string{resource}}
	}
	role := func(ns, name, feeds string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		labels := map[string]string{"differential": ns}
		if feeds != "" {
			labels["aggregate-to-"+feeds] = ns
		}
		return &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name, Labels: labels},
			Rules:      rules}
	}
	create := func(ctx context.Context, cs kubernetes.Interface, r *rbacv1.ClusterRole) error {
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	compare(t, differential.Scenario{
		Name:       "clusterrole-aggregation aggregates and follows",
		Controller: "clusterrole-aggregation-controller",
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			agg := role(ns, "agg", "", rule("stale", "things"))
			agg.AggregationRule = &rbacv1.AggregationRule{
				ClusterRoleSelectors: []metav1.LabelSelector{
					{MatchLabels: map[string]string{"aggregate-to-edit": ns}},
					{MatchLabels: map[string]string{"aggregate-to-view": ns}},
				}}
			for _, r := range []*rbacv1.ClusterRole{agg,
				role(ns, "b", "edit", rule("list", "pods"), rule("get", "pods")),
				role(ns, "a", "edit", rule("get", "pods")),
				role(ns, "v", "view", rule("get", "configmaps"), rule("get", "pods")),
				role(ns, "other", "", rule("delete", "pods")),
			} {
				if err := create(ctx, cs, r); err != nil {
					return err
				}
			}
			return nil
		},
		// Once the first aggregation is written, a new matching role.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			agg, err := cs.RbacV1().ClusterRoles().Get(ctx, ns+"-agg", metav1.GetOptions{})
			if err != nil || len(agg.Rules) != 3 {
				return err
			}
			return create(ctx, cs, role(ns, "c", "edit", rule("watch", "secrets")))
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			agg, err := cs.RbacV1().ClusterRoles().Get(ctx, ns+"-agg", metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			agg.Kind = "ClusterRole"
			// managedFields are normalised away: who applied the rules, kept.
			var managers []string
			for _, m := range agg.ManagedFields {
				managers = append(managers, m.Manager+"/"+string(m.Operation))
			}
			slices.Sort(managers)
			agg.Annotations = map[string]string{"managers": strings.Join(managers, ",")}
			return []runtime.Object{agg}, nil
		},
		Settled: func(state []map[string]any) bool {
			rules, _ := state[0]["rules"].([]any)
			return len(rules) == 4
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			return cs.RbacV1().ClusterRoles().DeleteCollection(ctx, metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: "differential=" + ns})
		},
	})
}
