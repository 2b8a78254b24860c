//go:build integration

package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ctrlhost/ctrlhost/testenv"
)

// waitTimeout bounds every wait for the API server to reflect a change.
const waitTimeout = 10 * time.Second

// startEnv starts a dedicated Env, stopped when the test ends.
func startEnv(t *testing.T, opts testenv.Options) *testenv.Env {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	env, err := testenv.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("testenv.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return env
}

func clientset(t testing.TB, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespace creates a namespace with a generated name in env.
func namespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// processAlive reports whether pid names a process that has not exited
// (a zombie counts as exited).
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// assertStopped checks that the Env's processes and directory are gone.
func assertStopped(t *testing.T, dir string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("process %d still alive after Stop", pid)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s still there after Stop (stat: %v)", dir, err)
	}
}

func TestStartStop(t *testing.T) {
	env := startEnv(t, testenv.Options{})
	dir, apiPID, etcdPID := env.Dir(), env.APIServerPID(), env.EtcdPID()

	for _, u := range []string{env.APIServerURL(), env.EtcdURL()} {
		if !strings.Contains(u, "://127.0.0.1:") {
			t.Errorf("URL %s is not on 127.0.0.1", u)
		}
	}

	cs := clientset(t, env.Config())
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.GitVersion != serverVersion() {
		t.Errorf("server version %s, want %s", v.GitVersion, serverVersion())
	}

	// The kubeconfig works for clientcmd, as it would for kubectl.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	kcfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("loading the kubeconfig: %v", err)
	}
	if _, err := clientset(t, kcfg).CoreV1().Namespaces().Get(t.Context(), "kube-system", metav1.GetOptions{}); err != nil {
		t.Fatalf("get kube-system through the kubeconfig: %v", err)
	}

	if err := env.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertStopped(t, dir, apiPID, etcdPID)
	if err := env.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if log := env.APIServerLog(); log == "" {
		t.Error("APIServerLog is empty after Stop")
	}
}

func TestInformerSeesConfigMap(t *testing.T) {
	env := sharedEnv(t)
	cs := clientset(t, env.Config())
	ns := namespace(t, cs)

	ctx, cancel := context.WithCancel(t.Context())
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	defer factory.Shutdown() // runs after cancel, waits for the informer goroutines
	defer cancel()

	seen := make(chan struct{})
	var once sync.Once
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == "watched" {
				once.Do(func() { close(seen) })
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	syncCtx, syncCancel := context.WithTimeout(ctx, waitTimeout)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-syncCtx.Done():
		t.Fatal("the informer did not see the ConfigMap")
	}
}

func TestLeaseConflict(t *testing.T) {
	env := sharedEnv(t)
	leases := clientset(t, env.Config()).CoordinationV1().Leases(namespace(t, clientset(t, env.Config())))
	ctx := t.Context()

	holder := "a"
	created, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lock"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	first := created.DeepCopy()
	next := "b"
	first.Spec.HolderIdentity = &next
	updated, err := leases.Update(ctx, first, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if updated.ResourceVersion == created.ResourceVersion {
		t.Errorf("update kept resourceVersion %s", updated.ResourceVersion)
	}

	stale := created.DeepCopy() // still carries the first resourceVersion
	other := "c"
	stale.Spec.HolderIdentity = &other
	if _, err := leases.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: %v, want a Conflict", err)
	}
	got, err := leases.Get(ctx, "lock", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.HolderIdentity != next {
		t.Errorf("holder = %s after the conflicting update, want %s", *got.Spec.HolderIdentity, next)
	}
}

func TestRBACForUser(t *testing.T) {
	env := sharedEnv(t)
	admin := clientset(t, env.Config())
	ns := namespace(t, admin)

	userCfg, err := env.UserConfig(rbacUser)
	if err != nil {
		t.Fatal(err)
	}
	user := clientset(t, userCfg)
	if _, err := user.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing pods without bindings: %v, want Forbidden", err)
	}

	// Not the built-in "view": it is aggregated, and without a controller
	// manager to aggregate them its rules stay empty. A Role in this test's
	// own namespace, so that nothing leaks into other tests (or reruns).
	role, err := admin.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the role: %v", err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: rbacUser}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the binding: %v", err)
	}
	// The authorizer learns of the binding through its informer: poll.
	var lastErr error
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, lastErr = user.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return lastErr == nil, nil
	})
	if err != nil {
		t.Fatalf("listing pods after the binding: %v (last error: %v)", err, lastErr)
	}

	if _, err := env.UserConfig("no-such-user"); err == nil || !strings.Contains(err.Error(), rbacUser) {
		t.Errorf("UserConfig for an unknown user: %v, want an error listing the known users", err)
	}
}

func TestTwoEnvsAreIndependent(t *testing.T) {
	one := sharedEnv(t)
	two := startEnv(t, testenv.Options{
		Authorization: testenv.AuthorizationAlwaysAllow,
		Users:         []testenv.User{{Name: nobody}},
	})
	if one.APIServerURL() == two.APIServerURL() || one.EtcdURL() == two.EtcdURL() || one.Dir() == two.Dir() {
		t.Fatalf("envs share an address or directory: %s %s %s / %s %s %s",
			one.APIServerURL(), one.EtcdURL(), one.Dir(), two.APIServerURL(), two.EtcdURL(), two.Dir())
	}
	csOne, csTwo := clientset(t, one.Config()), clientset(t, two.Config())

	ns := namespace(t, csTwo)
	if _, err := csTwo.CoreV1().ConfigMaps(ns).Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-two"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := csOne.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s of env two seen in env one: %v", ns, err)
	}
	if _, err := csOne.CoreV1().ConfigMaps(ns).Get(t.Context(), "only-in-two", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap of env two seen in env one: %v", err)
	}

	// Same user name, different tokens and authorizers: allowed in two
	// (AlwaysAllow), forbidden in one (RBAC), and two's token means nothing
	// to one.
	nobodyTwo, err := two.UserConfig(nobody)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clientset(t, nobodyTwo).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("listing pods as %s with AlwaysAllow: %v", nobody, err)
	}
	nobodyOne, err := one.UserConfig(nobody)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clientset(t, nobodyOne).CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing pods as %s with RBAC: %v, want Forbidden", nobody, err)
	}
	crossed := rest.CopyConfig(nobodyOne)
	crossed.BearerToken = nobodyTwo.BearerToken
	if _, err := clientset(t, crossed).CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("env two's token against env one: %v, want Unauthorized", err)
	}
}

func TestStopAfterAPIServerKilled(t *testing.T) {
	env := startEnv(t, testenv.Options{})
	dir, apiPID, etcdPID := env.Dir(), env.APIServerPID(), env.EtcdPID()

	if err := syscall.Kill(apiPID, syscall.SIGKILL); err != nil {
		t.Fatalf("killing kube-apiserver: %v", err)
	}
	if err := env.Stop(); err != nil {
		t.Fatalf("Stop after the apiserver was killed: %v", err)
	}
	assertStopped(t, dir, apiPID, etcdPID)
}
