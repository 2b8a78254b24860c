//go:build integration && unix

package cluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	pollfor "github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// A witness passes a replica's requests on as the replica's own: a client
// certificate's user and groups by impersonation, a bearer token as it
// came, so that the API server authorizes them and not the witness's
// administrator. It records each write with its answer, and lets watches
// stream.
func TestWitnessPassesRequestsOnAsTheirSender(t *testing.T) {
	ctx := t.Context()
	env, err := testenv.Start(ctx, testenv.Options{Users: []testenv.User{{Name: "bob"}},
		Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	var writes []Write
	var mu sync.Mutex
	w, err := newWitness("r1", env.Config(), &writes, &mu)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.close(); err != nil {
			t.Error(err)
		}
	})
	admin := kubernetes.NewForConfigOrDie(env.Config())

	// alice, by client certificate, through the witness.
	conf := t.TempDir() + "/alice.kubeconfig"
	if err := env.WriteClientCertKubeconfig(conf, "alice", "team"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server, cl.CertificateAuthorityData = w.url(), w.caPEM
	}
	if err := clientcmd.WriteToFile(*cfg, conf); err != nil {
		t.Fatal(err)
	}
	aliceCfg, err := clientcmd.BuildConfigFromFlags("", conf)
	if err != nil {
		t.Fatal(err)
	}
	alice := kubernetes.NewForConfigOrDie(aliceCfg)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	_, err = alice.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !containsAll(err.Error(), `"alice"`) {
		t.Fatalf("alice without RBAC: %v, want forbidden for user alice", err)
	}
	// Her group may: the group came through too.
	if _, err := admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			Verbs: []string{"create", "watch", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "team"},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role",
			Name: "configmaps"},
		Subjects: []rbacv1.Subject{{Kind: "Group", Name: "team"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC's cache takes the binding in within a moment.
	var watcher watch.Interface
	pollfor.Within(30*time.Second).UntilContext(t, "alice may watch ConfigMaps",
		func(context.Context) (bool, error) {
			// On the test's context: the poll's ends when it returns.
			watcher, err = alice.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{
				FieldSelector: "metadata.name=x"})
			return err == nil, err
		})
	defer watcher.Stop()
	if _, err := alice.CoreV1().ConfigMaps("default").Create(ctx, cm,
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("alice's group bound to a Role that lets it create: %v", err)
	}
	select {
	case ev := <-watcher.ResultChan():
		if ev.Type != watch.Added {
			t.Errorf("the watch through the witness saw %s first: %v", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watch through the witness saw nothing in 30 s")
	}

	// bob, by bearer token, through the witness: his own identity.
	token, err := env.Token("bob")
	if err != nil {
		t.Fatal(err)
	}
	bobCfg := rest.AnonymousClientConfig(aliceCfg)
	bobCfg.BearerToken = token
	bob := kubernetes.NewForConfigOrDie(bobCfg)
	err = bob.CoreV1().ConfigMaps("default").Delete(ctx, "x", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) || !containsAll(err.Error(), `"bob"`) {
		t.Fatalf("bob: %v, want forbidden for user bob", err)
	}

	mu.Lock()
	got := writes
	mu.Unlock()
	want := []struct {
		method string
		code   int
	}{{"POST", 403}, {"POST", 201}, {"DELETE", 403}}
	if len(got) != len(want) {
		t.Fatalf("writes %+v, want %d", got, len(want))
	}
	for i, wr := range got {
		path := "/api/v1/namespaces/default/configmaps"
		if wr.Method == "DELETE" {
			path += "/x"
		}
		if wr.Replica != "r1" || wr.Method != want[i].method || wr.Code != want[i].code ||
			wr.Path != path {
			t.Errorf("write %d: %+v, want %s answered %d", i, wr, want[i].method, want[i].code)
		}
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
