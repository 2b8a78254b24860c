// Package rbac_test checks the RBAC manifests in this directory.
package rbac_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// manifest is host.yaml's objects, by kind.
type manifest struct {
	clusterRoles        []rbacv1.ClusterRole
	roles               []rbacv1.Role
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	roleBindings        []rbacv1.RoleBinding
}

func load(t *testing.T) manifest {
	t.Helper()
	data, err := os.ReadFile("host.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	for i, doc := range strings.Split(string(data), "\n---\n") {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if head.APIVersion != "rbac.authorization.k8s.io/v1" {
			t.Fatalf(
				"document %d: apiVersion %q, want rbac.authorization.k8s.io/v1",
				i,
				head.APIVersion,
			)
		}
		var target any
		switch head.Kind {
		case "ClusterRole":
			m.clusterRoles = append(m.clusterRoles, rbacv1.ClusterRole{})
			target = &m.clusterRoles[len(m.clusterRoles)-1]
		case "Role":
			m.roles = append(m.roles, rbacv1.Role{})
			target = &m.roles[len(m.roles)-1]
		case "ClusterRoleBinding":
			m.clusterRoleBindings = append(m.clusterRoleBindings, rbacv1.ClusterRoleBinding{})
			target = &m.clusterRoleBindings[len(m.clusterRoleBindings)-1]
		case "RoleBinding":
			m.roleBindings = append(m.roleBindings, rbacv1.RoleBinding{})
			target = &m.roleBindings[len(m.roleBindings)-1]
		default:
			t.Fatalf("document %d: unexpected kind %q", i, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatalf("document %d (%s): %v", i, head.Kind, err)
		}
	}
	return m
}

// allows reports whether some rule grants verb on group/resource.
func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) &&
			len(r.ResourceNames) == 0 {
			return true
		}
	}
	return false
}

func TestHostRBAC(t *testing.T) {
	m := load(t)
	if len(m.clusterRoles) != 1 || len(m.roles) != 1 {
		t.Fatalf(
			"want one ClusterRole and one Role, got %d and %d",
			len(m.clusterRoles),
			len(m.roles),
		)
	}
	cluster, ns := m.clusterRoles[0], m.roles[0]
	if ns.Namespace != "kube-system" {
		t.Errorf(
			"Role namespace = %q, want kube-system (the default lock and ServiceAccount namespace)",
			ns.Namespace,
		)
	}
	tests := []struct {
		why             string
		rules           []rbacv1.PolicyRule
		group, resource string
		verbs           []string
	}{
		{
			"delegated authentication",
			cluster.Rules,
			"authentication.k8s.io",
			"tokenreviews",
			[]string{"create"},
		},
		{
			"delegated authorization",
			cluster.Rules,
			"authorization.k8s.io",
			"subjectaccessreviews",
			[]string{"create"},
		},
		{"events (core)", cluster.Rules, "", "events", []string{"create", "patch"}},
		{
			"events (events.k8s.io)",
			cluster.Rules,
			"events.k8s.io",
			"events",
			[]string{"create", "patch"},
		},
		{
			"election, with list and watch for fast handoff",
			ns.Rules,
			"coordination.k8s.io",
			"leases",
			[]string{"get", "list", "watch", "create", "update"},
		},
		{
			"--use-service-account-credentials: ServiceAccounts",
			ns.Rules,
			"",
			"serviceaccounts",
			[]string{"get", "create"},
		},
		{
			"--use-service-account-credentials: tokens",
			ns.Rules,
			"",
			"serviceaccounts/token",
			[]string{"create"},
		},
	}
	for _, tt := range tests {
		for _, verb := range tt.verbs {
			if !allows(tt.rules, tt.group, tt.resource, verb) {
				t.Errorf("%s: no rule grants %s on %q %s", tt.why, verb, tt.group, tt.resource)
			}
		}
	}

	if len(m.clusterRoleBindings) != 1 || m.clusterRoleBindings[0].RoleRef.Name != cluster.Name ||
		m.clusterRoleBindings[0].RoleRef.Kind != "ClusterRole" {
		t.Errorf(
			"want one ClusterRoleBinding to ClusterRole %q, got %+v",
			cluster.Name,
			m.clusterRoleBindings,
		)
	}
	// The host's Role, and the API server's authentication reader (for
	// serving's client CA and front-proxy lookup).
	var bound []string
	for _, rb := range m.roleBindings {
		if rb.Namespace == "kube-system" && rb.RoleRef.Kind == "Role" {
			bound = append(bound, rb.RoleRef.Name)
		}
	}
	if want := []string{ns.Name, "extension-apiserver-authentication-reader"}; strings.Join(
		bound,
		",",
	) != strings.Join(
		want,
		",",
	) {
		t.Errorf("RoleBindings in kube-system to Roles %v, want %v", bound, want)
	}
}
