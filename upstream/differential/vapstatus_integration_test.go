//go:build integration

package differential_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/kubernetes"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	kubeopenapi "k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/ctrlhost/ctrlhost/controllers/vapstatus"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// vapstatus is a module of its own (k8s.io/apiserver, which the root
// module keeps out of its graph), so it is not in the one list.
func init() { pending = append(pending, vapstatus.Descriptor(vapstatus.NewOptions())) }

// TestVAPStatus: the status of policies over Deployments (and one with
// ConfigMap parameters) whose expressions type-check, name a field
// Deployments lack, or name one in a message expression or of the
// parameters; and of a policy updated, once its first status is written,
// to an expression that no longer type-checks.
func TestVAPStatus(t *testing.T) {
	type policyCase struct {
		name        string
		validations []admissionregistrationv1.Validation
		params      bool
	}
	cases := []policyCase{
		{name: "sound", validations: []admissionregistrationv1.Validation{
			{Expression: "object.spec.replicas <= 5"},
			{Expression: "object.spec.template.spec.containers.all(c, c.image != '')",
				MessageExpression: "'replicas: ' + string(object.spec.replicas)"}}},
		{name: "unknown-field", validations: []admissionregistrationv1.Validation{
			{Expression: "object.spec.replicas <= 5"},
			{Expression: "object.spec.replicaCount <= 5"},
			{Expression: "true", MessageExpression: "string(object.status.nope)"}}},
		{name: "params", params: true, validations: []admissionregistrationv1.Validation{
			{Expression: "object.spec.replicas <= int(params.data.max)"},
			{Expression: "object.spec.replicas <= params.spec.max"}}},
		{name: "updated", validations: []admissionregistrationv1.Validation{
			{Expression: "object.spec.replicas <= 5"}}},
	}
	policy := func(ns string, c policyCase) *admissionregistrationv1.ValidatingAdmissionPolicy {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + c.name,
				Labels: map[string]string{"differential": ns}},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
						RuleWithOperations: admissionregistrationv1.RuleWithOperations{
							Operations: []admissionregistrationv1.OperationType{
								admissionregistrationv1.Create},
							Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"},
								APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
						},
					}},
				},
				Validations: c.validations,
			},
		}
		if c.params {
			p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1",
				Kind: "ConfigMap"}
		}
		return p
	}
	list := func(ctx context.Context, cs kubernetes.Interface,
		ns string) ([]admissionregistrationv1.ValidatingAdmissionPolicy, error) {
		l, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx,
			metav1.ListOptions{LabelSelector: "differential=" + ns})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	res := compare(t, differential.Scenario{
		Name:       "validatingadmissionpolicy-status type-checks policies",
		Controller: vapstatus.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, c := range cases {
				if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(
					ctx, policy(ns, c), metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		// Once the updated policy's first status is written, its
		// expression names a field Deployments lack.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			p, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx,
				ns+"-updated", metav1.GetOptions{})
			if err != nil || p.Generation != 1 || p.Status.ObservedGeneration != 1 {
				return err
			}
			p.Spec.Validations[0].Expression = "object.spec.paused && object.spec.pause"
			_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, p,
				metav1.UpdateOptions{})
			return err
		},
		// The harness drops generations and observed generations: each
		// policy's pair is kept in a summary.
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			items, err := list(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			seen := map[string]string{}
			out := make([]runtime.Object, 0, len(items)+1)
			for i := range items {
				p := &items[i]
				p.Kind = "ValidatingAdmissionPolicy"
				seen[strings.TrimPrefix(p.Name, ns+"-")] = fmt.Sprintf(
					"generation %d, observed %d", p.Generation, p.Status.ObservedGeneration)
				out = append(out, p)
			}
			return append(out, &corev1.ConfigMap{
				TypeMeta: metav1.TypeMeta{Kind: "Generations"}, Data: seen}), nil
		},
		Settled: func(state []map[string]any) bool {
			for _, o := range state {
				if o["kind"] != "Generations" {
					continue
				}
				data, _ := o["data"].(map[string]any)
				done := 0
				for name, v := range data {
					s, _ := v.(string)
					want := "generation 1, observed 1"
					if name == "updated" {
						want = "generation 2, observed 2"
					}
					if s == want {
						done++
					}
				}
				return done == len(cases)
			}
			return false
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			return cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().DeleteCollection(
				ctx, metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: "differential=" + ns})
		},
	})
	// Agreement on nothing would prove nothing: the warnings are there.
	want := map[string]int{"<ns>-sound": 0, "<ns>-unknown-field": 2, "<ns>-params": 1,
		"<ns>-updated": 1}
	for _, o := range res.Native {
		if o["kind"] != "ValidatingAdmissionPolicy" {
			continue
		}
		status, _ := o["status"].(map[string]any)
		tc, _ := status["typeChecking"].(map[string]any)
		warnings, _ := tc["expressionWarnings"].([]any)
		if n, ok := want[nameOf(o)]; !ok || len(warnings) != n {
			t.Errorf("%s: %d warnings, want %d: %v", nameOf(o), len(warnings), n, warnings)
		}
		delete(want, nameOf(o))
	}
	if len(want) != 0 {
		t.Errorf("policies missing: %v", want)
	}
}

// TestVAPStatusSchemasAreKCMs: the native controller types expressions
// by the API server's OpenAPI; KCM types built-in kinds by the
// definitions compiled into it (and others by the OpenAPI). For every
// kind the API server serves and KCM compiled in, both give the same
// schema, descriptions and defaults aside: so the same warnings.
func TestVAPStatusSchemasAreKCMs(t *testing.T) {
	e := env(t)
	cs, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	compiled := resolver.NewDefinitionsSchemaResolver(kubeopenapi.GetOpenAPIDefinitions,
		k8sscheme.Scheme, apiextensionsscheme.Scheme)
	served := &resolver.ClientDiscoveryResolver{Discovery: cs.Discovery()}
	_, lists, err := cs.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			gvk := gv.WithKind(r.Kind)
			want, err := compiled.ResolveSchema(gvk)
			if errors.Is(err, resolver.ErrSchemaNotFound) {
				continue
			}
			if err != nil {
				t.Fatalf("%v: compiled: %v", gvk, err)
			}
			got, err := served.ResolveSchema(gvk)
			if err != nil {
				t.Errorf("%v: served: %v", gvk, err)
				continue
			}
			if d := schemaDiff("", typeOnly(t, got), typeOnly(t, want)); len(d) > 0 {
				t.Errorf("%v: the served schema differs from KCM's:\n%s", gvk,
					strings.Join(d[:min(len(d), 8)], "\n"))
			}
			compared++
		}
	}
	if compared < 50 {
		t.Errorf("compared %d kinds; the API server serves more", compared)
	}
	t.Logf("%d kinds compared", compared)
}

// schemaDiff lists the paths where a (served) and b (compiled) differ.
func schemaDiff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for k := range am {
			out = append(out, schemaDiff(path+"."+k, am[k], bm[k])...)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				out = append(out, schemaDiff(path+"."+k, nil, bm[k])...)
			}
		}
		return out
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) == string(jb) {
		return nil
	}
	return []string{fmt.Sprintf("%s: served %.200s, compiled %.200s", path, ja, jb)}
}

// untyped are the keys of a schema that do not type an expression: the
// compiled definitions keep, where a type's OpenAPI v2 form differs, that
// form in x-kubernetes-v2-schema, which the API server's v3 documents
// leave out; they name their kinds in x-kubernetes-group-version-kind,
// which the compiled definitions leave to the scheme.
var untyped = []string{"description", "default", "x-kubernetes-v2-schema",
	"x-kubernetes-group-version-kind"}

// typeOnly is a schema without what does not type an expression.
func typeOnly(t *testing.T, s *spec.Schema) any {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var strip func(v any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range untyped {
				delete(x, k)
			}
			for k, y := range x {
				x[k] = strip(y)
			}
		case []any:
			for i, y := range x {
				x[i] = strip(y)
			}
		}
		return v
	}
	return strip(m)
}
