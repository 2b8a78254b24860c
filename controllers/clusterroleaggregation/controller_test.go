package clusterroleaggregation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func role(name string, labels map[string]string,
	rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Rules: rules}
}

func aggregating(name string, rules []rbacv1.PolicyRule,
	selectors ...map[string]string) *rbacv1.ClusterRole {
	r := role(name, nil, rules...)
	r.AggregationRule = &rbacv1.AggregationRule{}
	for _, s := range selectors {
		r.AggregationRule.ClusterRoleSelectors = append(r.AggregationRule.ClusterRoleSelectors,
			metav1.LabelSelector{MatchLabels: s})
	}
	return r
}

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""},
		Resources: []string{resource}}
}

var (
	edit = map[string]string{"aggregate-to-edit": "true"}
	view = map[string]string{"aggregate-to-view": "true"}
)

// applied returns the rules of the apply sync sent, "" when it wrote
// nothing, and checks the apply's field manager and force.
func applied(t *testing.T, client *fake.Clientset) []rbacv1.PolicyRule {
	t.Helper()
	var out []rbacv1.PolicyRule
	for _, a := range client.Actions() {
		p, ok := a.(k8stesting.PatchAction)
		if !ok {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		if p.GetPatchType() != types.ApplyPatchType {
			t.Errorf("patch type %s, want server-side apply", p.GetPatchType())
		}
		var cr rbacv1.ClusterRole
		if err := json.Unmarshal(p.GetPatch(), &cr); err != nil {
			t.Fatal(err)
		}
		out = cr.Rules
		if cr.Rules == nil {
			out = []rbacv1.PolicyRule{}
		}
	}
	return out
}

func TestSync(t *testing.T) {
	get, list, del := rule("get", "pods"), rule("list", "pods"), rule("delete", "pods")
	tests := []struct {
		name  string
		roles []*rbacv1.ClusterRole
		key   string
		want  []rbacv1.PolicyRule // nil: nothing written
		err   string
	}{{
		name: "rules of the matching roles, in name order, each once",
		roles: []*rbacv1.ClusterRole{aggregating("agg", nil, edit),
			role("b", edit, list, get), role("a", edit, get), role("c", view, del)},
		key:  "agg",
		want: []rbacv1.PolicyRule{get, list},
	}, {
		name: "selector by selector",
		roles: []*rbacv1.ClusterRole{aggregating("agg", nil, view, edit),
			role("a", edit, get), role("z", view, del)},
		key:  "agg",
		want: []rbacv1.PolicyRule{del, get},
	}, {
		name: "the role itself is left out",
		roles: []*rbacv1.ClusterRole{func() *rbacv1.ClusterRole {
			r := aggregating("agg", []rbacv1.PolicyRule{del}, edit)
			r.Labels = edit
			return r
		}(), role("a", edit, get)},
		key:  "agg",
		want: []rbacv1.PolicyRule{get},
	}, {
		name: "already aggregated: nothing written",
		roles: []*rbacv1.ClusterRole{aggregating("agg", []rbacv1.PolicyRule{get}, edit),
			role("a", edit, get)},
		key: "agg",
	}, {
		name:  "nothing matches, no rules: nothing written (nil and empty alike)",
		roles: []*rbacv1.ClusterRole{aggregating("agg", nil, edit)},
		key:   "agg",
	}, {
		name:  "nothing matches any more: the rules go",
		roles: []*rbacv1.ClusterRole{aggregating("agg", []rbacv1.PolicyRule{get}, edit)},
		key:   "agg",
		want:  []rbacv1.PolicyRule{},
	}, {
		name:  "no aggregationRule: left alone",
		roles: []*rbacv1.ClusterRole{role("plain", nil, get), role("a", edit, list)},
		key:   "plain",
	}, {
		name: "gone",
		key:  "agg",
	}, {
		name: "an invalid selector is an error naming it",
		roles: []*rbacv1.ClusterRole{func() *rbacv1.ClusterRole {
			r := aggregating("agg", nil)
			r.AggregationRule.ClusterRoleSelectors = []metav1.LabelSelector{{
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "k", Operator: "Bogus"}}}}
			return r
		}()},
		key: "agg",
		err: "aggregationRule.clusterRoleSelectors[0]: ",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, r := range tt.roles {
				objs = append(objs, r)
			}
			client := fake.NewClientset(objs...)
			client.ClearActions()
			c := &controller{client: client,
				roles: rbaclisters.NewClusterRoleLister(
					controllertest.ClusterIndexer(t, tt.roles...))}
			err := c.sync(t.Context(), tt.key)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("sync = %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := applied(t, client)
			switch {
			case tt.want == nil && got != nil:
				t.Errorf("wrote %v, want nothing written", got)
			case tt.want != nil && !slices.EqualFunc(got, tt.want, rulesEqual):
				t.Errorf("applied rules %v, want %v", got, tt.want)
			}
		})
	}
}

func rulesEqual(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

func TestAnyChangeQueuesEveryAggregatedRole(t *testing.T) {
	roles := []*rbacv1.ClusterRole{aggregating("edit", nil, edit), aggregating("view", nil, view),
		role("plain", nil)}
	c := &controller{roles: rbaclisters.NewClusterRoleLister(
		controllertest.ClusterIndexer(t, roles...))}
	got := c.aggregated(role("whatever", nil))
	slices.Sort(got)
	if !slices.Equal(got, []string{"edit", "view"}) {
		t.Errorf("a change queues %v, want every aggregated role", got)
	}
}
