//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

// TestServiceAccountCredentials: with UseServiceAccountCredentials a
// controller's writes are made as its own ServiceAccount: RBAC denies them
// until that ServiceAccount (not the manager's admin credential) is granted.
func TestServiceAccountCredentials(t *testing.T) {
	env := sharedEnv(t)
	cs := clientset(t, env.Config())
	ns := namespace(t, cs)
	const name = "sa-writer-controller"
	results := make(chan error, 100)
	writer := descriptor.New(name, func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		client, err := cc.ClientBuilder.Client(cc.Name)
		if err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "w-"}}, metav1.CreateOptions{})
				select {
				case results <- err:
				default:
				}
				if err == nil {
					<-ctx.Done()
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
			}
		}), nil
	})
	m, err := manager.NewBuilder("it-sa-creds").WithRESTConfig(env.Config()).
		WithOptions(manager.Options{Serving: serving.Options{SecurePort: -1}, UseServiceAccountCredentials: true}).
		Register(writer).Build()
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)

	first := <-results
	if !apierrors.IsForbidden(first) || !strings.Contains(first.Error(), "system:serviceaccount:kube-system:"+name) {
		t.Fatalf("first write = %v, want Forbidden for the controller's ServiceAccount", first)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "writer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "kube-system"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case err := <-results:
			if err == nil {
				return // granted to the ServiceAccount, the write goes through
			}
		case <-deadline:
			t.Fatal("the controller's write never succeeded after its ServiceAccount was granted")
		}
	}
}
