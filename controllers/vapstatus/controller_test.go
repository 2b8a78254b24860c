package vapstatus

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	arv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/client-go/kubernetes/fake"
	listers "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func policy(name string, generation, observed int64,
	validations ...arv1.Validation) *arv1.ValidatingAdmissionPolicy {
	return &arv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation},
		Spec: arv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &arv1.MatchResources{
				ResourceRules: []arv1.NamedRuleWithOperations{{
					RuleWithOperations: arv1.RuleWithOperations{
						Operations: []arv1.OperationType{"CREATE"},
						Rule: arv1.Rule{APIGroups: []string{"apps"},
							APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
					},
				}},
			},
			Validations: validations,
		},
		Status: arv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: observed},
	}
}

// fixedChecker answers the same warnings for every policy and counts calls.
type fixedChecker struct {
	warnings []arv1.ExpressionWarning
	calls    int
}

func (f *fixedChecker) Check(
	*arv1.ValidatingAdmissionPolicy) []arv1.ExpressionWarning {
	f.calls++
	return f.warnings
}

// applied returns the status of each apply the client received, as JSON,
// with the field manager and force each said.
func applied(t *testing.T, client *fake.Clientset) (statuses []string) {
	t.Helper()
	for _, a := range client.Actions() {
		p, ok := a.(k8stesting.PatchAction)
		if !ok {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		if a.GetSubresource() != "status" ||
			string(p.GetPatchType()) != "application/apply-patch+yaml" {
			t.Errorf("a %s patch of %q, want an apply of the status", p.GetPatchType(),
				a.GetSubresource())
		}
		var body struct {
			Status json.RawMessage `json:"status"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, string(body.Status))
	}
	return statuses
}

func TestSync(t *testing.T) {
	warning := arv1.ExpressionWarning{
		FieldRef: "spec.validations[0].expression", Warning: "apps/v1, Kind=Deployment: oops"}
	tests := []struct {
		name     string
		policy   *arv1.ValidatingAdmissionPolicy
		warnings []arv1.ExpressionWarning
		want     []string // the applied statuses
	}{
		{"a new policy: its warnings and generation", policy("p", 1, 0),
			[]arv1.ExpressionWarning{warning},
			[]string{`{"observedGeneration":1,"typeChecking":{"expressionWarnings":[` +
				`{"fieldRef":"spec.validations[0].expression",` +
				`"warning":"apps/v1, Kind=Deployment: oops"}]}}`}},
		{"no warning: an empty typeChecking", policy("p", 3, 2), nil,
			[]string{`{"observedGeneration":3,"typeChecking":{}}`}},
		{"observed already: nothing", policy("p", 2, 2), nil, nil},
		{"observed later than the cache: nothing", policy("p", 2, 3), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.PrependReactor("patch", "validatingadmissionpolicies",
				func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, tt.policy, nil
				})
			check := &fixedChecker{warnings: tt.warnings}
			c := &controller{client: client, checker: check,
				policies: listers.NewValidatingAdmissionPolicyLister(
					controllertest.ClusterIndexer(t, tt.policy))}
			if err := c.sync(controllertest.LogContext(t), "p"); err != nil {
				t.Fatal(err)
			}
			got := applied(t, client)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("applied\n%s\nwant\n%s", strings.Join(got, "\n"),
					strings.Join(tt.want, "\n"))
			}
			if check.calls != len(tt.want) {
				t.Errorf("checked %d times, want %d", check.calls, len(tt.want))
			}
			for _, a := range client.Actions() {
				if p, ok := a.(k8stesting.PatchActionImpl); ok {
					if p.PatchOptions.FieldManager != fieldManager || p.PatchOptions.Force == nil ||
						!*p.PatchOptions.Force {
						t.Errorf("applied as %q, force %v; want %q, forced",
							p.PatchOptions.FieldManager, p.PatchOptions.Force, fieldManager)
					}
				}
			}
		})
	}
}

func TestSyncErrors(t *testing.T) {
	empty := &controller{checker: &fixedChecker{},
		policies: listers.NewValidatingAdmissionPolicyLister(
			controllertest.ClusterIndexer[*arv1.ValidatingAdmissionPolicy](t))}
	if err := empty.sync(t.Context(), "gone"); err != nil {
		t.Errorf("sync of a gone policy = %v, want nil", err)
	}
	client := fake.NewClientset()
	client.PrependReactor("patch", "validatingadmissionpolicies",
		func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is away"))
		})
	c := &controller{client: client, checker: &fixedChecker{},
		policies: listers.NewValidatingAdmissionPolicyLister(
			controllertest.ClusterIndexer(t, policy("p", 1, 0)))}
	err := c.sync(t.Context(), "p")
	if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy p") {
		t.Errorf("sync = %v, want an error naming the policy (to be retried)", err)
	}
}

func TestOnlyUnobservedPoliciesAreQueued(t *testing.T) {
	for _, tt := range []struct {
		obj  any
		want bool
	}{
		{policy("p", 1, 0), true},
		{policy("p", 2, 1), true},
		{policy("p", 2, 2), false},
		{"not a policy", false},
	} {
		if got := unobserved(nil, tt.obj); got != tt.want {
			t.Errorf("unobserved(%v) = %v, want %v", tt.obj, got, tt.want)
		}
	}
}

// TestTypeChecking runs the API server library's type checker over this
// package's resolver, on the OpenAPI of a real API server (client-go's
// test documents): what the status says of a sound expression, an
// unknown field and a message expression.
func TestTypeChecking(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{appsv1.SchemeGroupVersion})
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	files := openapitest.NewEmbeddedFileClient()
	checker := &validating.TypeChecker{RestMapper: mapper,
		SchemaResolver: newOpenAPIResolver(func() openapi.Client { return files })}
	p := policy("p", 1, 0,
		arv1.Validation{Expression: "object.spec.replicas <= 5"},
		arv1.Validation{Expression: "object.spec.replicaCount <= 5",
			MessageExpression: "'too many: ' + string(object.spec.replicas)"},
		arv1.Validation{Expression: "true",
			MessageExpression: "object.spec.nope"})
	got := checker.Check(p)
	want := map[string]string{
		"spec.validations[1].expression":        "undefined field 'replicaCount'",
		"spec.validations[2].messageExpression": "undefined field 'nope'",
	}
	if len(got) != len(want) {
		t.Fatalf("warnings %+v, want on %v", got, want)
	}
	for _, w := range got {
		if !strings.Contains(w.Warning, want[w.FieldRef]) ||
			!strings.HasPrefix(w.Warning, "apps/v1, Kind=Deployment") {
			t.Errorf("warning on %s: %q, want one of apps/v1 Deployment saying %q",
				w.FieldRef, w.Warning, want[w.FieldRef])
		}
	}
}
