package apiresources

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var lists = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{
			Name:       "pods",
			Namespaced: true,
			Verbs:      []string{"create", "delete", "get", "list", "watch"},
		},
		{Name: "pods/status", Namespaced: true, Verbs: []string{"get", "patch", "update"}},
		{Name: "nodes", Verbs: []string{"create", "delete", "list", "watch"}},
		{Name: "bindings", Namespaced: true, Verbs: []string{"create"}},
	}},
	{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Namespaced: true, Verbs: []string{"delete", "list", "watch"}},
	}},
	{
		GroupVersion: "not/a/version",
		APIResources: []metav1.APIResource{{Name: "x", Verbs: []string{"delete"}}},
	},
	nil,
}

func TestFilter(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	deploys := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	bindings := schema.GroupVersionResource{Version: "v1", Resource: "bindings"}
	for _, tc := range []struct {
		name  string
		scope Scope
		verbs []string
		want  []schema.GroupVersionResource
	}{
		{"deletable, all scopes", All, []string{"delete", "list", "watch"}, []schema.GroupVersionResource{pods, nodes, deploys}},
		{"deletable namespaced", Namespaced, []string{"delete"}, []schema.GroupVersionResource{pods, deploys}},
		{"quotable", Namespaced, []string{"create", "list", "watch", "delete"}, []schema.GroupVersionResource{pods}},
		{"no verbs asked: every resource in scope, no subresource", Namespaced, nil, []schema.GroupVersionResource{pods, deploys, bindings}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Filter(lists, tc.scope, tc.verbs...)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if _, ok := got[w]; !ok {
					t.Errorf("missing %v in %v", w, got)
				}
			}
		})
	}
}

type fakeDiscovery struct {
	discovery.ServerResourcesInterface
	lists []*metav1.APIResourceList
	err   error
}

func (f fakeDiscovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return f.lists, f.err
}

func TestPreferredKeepsAPartialAnswer(t *testing.T) {
	failed := &discovery.ErrGroupDiscoveryFailed{
		Groups: map[schema.GroupVersion]error{
			{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("503"),
		},
	}
	got, err := Preferred(fakeDiscovery{lists: lists, err: failed}, All, "delete", "list", "watch")
	if !discovery.IsGroupDiscoveryFailedError(err) {
		t.Fatalf("err = %v, want the group discovery failure", err)
	}
	if len(got) != 3 {
		t.Errorf("got %v, want the three resources the other groups gave", got)
	}
}

func TestPreferredFailsOnOtherErrors(t *testing.T) {
	got, err := Preferred(
		fakeDiscovery{lists: lists, err: errors.New("connection refused")},
		All,
		"delete",
	)
	if err == nil || got != nil {
		t.Fatalf("got %v, %v; want nil and an error", got, err)
	}
	if _, err := Preferred(nil, All); err == nil {
		t.Fatal("a nil client gave no error")
	}
}
