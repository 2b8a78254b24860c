package clusterroleaggregation_test

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/clusterroleaggregation"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := clusterroleaggregation.Descriptor(clusterroleaggregation.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{
		Name: "clusterrole-aggregation-controller", Alias: "clusterrole-aggregation",
	})
	o := clusterroleaggregation.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
	if _, sharded := d.IsSharded(); sharded {
		t.Error("sharded; cluster-scoped roles that feed one another have no key space to split")
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		clusterroleaggregation.Descriptor(clusterroleaggregation.NewOptions()))
}

// TestManagerAggregatesAndFollowsChanges: under a Manager, an aggregated
// role gets its matching roles' rules, and a new matching role's rules are
// added.
func TestManagerAggregatesAndFollowsChanges(t *testing.T) {
	label := map[string]string{"aggregate-to-mine": "true"}
	agg := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		AggregationRule: &rbacv1.AggregationRule{
			ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: label}}}}
	pods := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pods", Labels: label},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""},
			Resources: []string{"pods"}}}}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{
			clusterroleaggregation.Descriptor(clusterroleaggregation.NewOptions())},
		agg, pods).Start()
	rulesOf := func() []rbacv1.PolicyRule {
		r, err := h.Client.RbacV1().ClusterRoles().Get(t.Context(), "mine", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Rules
	}
	managertest.Eventually(t, "the aggregated role's rules",
		func() bool { return len(rulesOf()) == 1 })
	secrets := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secrets", Labels: label},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""},
			Resources: []string{"secrets"}}}}
	if _, err := h.Client.RbacV1().ClusterRoles().Create(t.Context(), secrets,
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the new role's rules added",
		func() bool { return len(rulesOf()) == 2 })
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
