package fakeapi

import (
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// path is a parsed resource path.
type path struct {
	res       Resource
	ns, name  string
	sub       string
	namespace bool // the path named a namespace
}

// parsePath parses /api/v1/... and /apis/<group>/<version>/... paths.
func parsePath(p string, byPath map[string]Resource) (path, error) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	var group, version string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, version, parts = parts[1], parts[2], parts[3:]
	default:
		return path{}, apierrors.NewNotFound(schema.GroupResource{}, p)
	}
	lookup := func(resource string) (Resource, bool) {
		r, ok := byPath[group+"/"+version+"/"+resource]
		return r, ok
	}
	var out path
	if len(parts) >= 3 && parts[0] == "namespaces" {
		if r, ok := lookup(parts[2]); ok && r.Namespaced {
			out.res, out.ns, out.namespace, parts = r, parts[1], true, parts[3:]
			return finish(out, parts, p)
		}
	}
	r, ok := lookup(parts[0])
	if !ok {
		return path{}, apierrors.NewNotFound(
			schema.GroupResource{Group: group, Resource: parts[0]},
			p,
		)
	}
	out.res = r
	return finish(out, parts[1:], p)
}

func finish(out path, rest []string, p string) (path, error) {
	switch len(rest) {
	case 0:
	case 1:
		out.name = rest[0]
	case 2:
		out.name, out.sub = rest[0], rest[1]
	default:
		return path{}, apierrors.NewNotFound(out.res.GVR.GroupResource(), p)
	}
	if out.sub != "" && out.sub != "status" && !slices.Contains(out.res.Subresources, out.sub) {
		return path{}, apierrors.NewNotFound(out.res.GVR.GroupResource(), out.name+"/"+out.sub)
	}
	return out, nil
}

// discovery serves /api, /apis and the group-version resource lists, so
// that discovery clients and REST mappers work; it reports whether it
// answered.
func (s *Server) discovery(w http.ResponseWriter, req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	p := strings.Trim(req.URL.Path, "/")
	_, resources := s.lookup()
	groups := map[string][]string{} // group → versions
	for gvr := range resources {
		if !slices.Contains(groups[gvr.Group], gvr.Version) {
			groups[gvr.Group] = append(groups[gvr.Group], gvr.Version)
		}
	}
	switch {
	case p == "api":
		writeJSON(w, http.StatusOK, &metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions", APIVersion: "v1"}, Versions: groups[""]})
		return true
	case p == "apis":
		list := &metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		}
		names := make([]string, 0, len(groups))
		for g := range groups {
			if g != "" {
				names = append(names, g)
			}
		}
		slices.Sort(names)
		for _, g := range names {
			list.Groups = append(list.Groups, apiGroup(g, groups[g]))
		}
		writeJSON(w, http.StatusOK, list)
		return true
	}
	parts := strings.Split(p, "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) == 2 && parts[0] == "api":
		gv = schema.GroupVersion{Version: parts[1]}
	case len(parts) == 2 && parts[0] == "apis":
		vs, ok := groups[parts[1]]
		if !ok {
			return false
		}
		g := apiGroup(parts[1], vs)
		writeJSON(w, http.StatusOK, &g)
		return true
	case len(parts) == 3 && parts[0] == "apis":
		gv = schema.GroupVersion{Group: parts[1], Version: parts[2]}
	default:
		return false
	}
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
	}
	for gvr, r := range resources {
		if gvr.GroupVersion() != gv {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: gvr.Resource, Namespaced: r.Namespaced, Kind: r.Kind,
			Verbs: metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch",
				"update", "watch"},
		})
		if r.Status {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: gvr.Resource + "/status", Namespaced: r.Namespaced, Kind: r.Kind,
				Verbs: metav1.Verbs{"get", "patch", "update"}})
		}
		for _, sub := range r.Subresources {
			verbs := metav1.Verbs{"create"}
			if sub == "finalize" {
				verbs = metav1.Verbs{"update"}
			}
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: gvr.Resource + "/" + sub, Namespaced: r.Namespaced, Verbs: verbs})
		}
	}
	if len(list.APIResources) == 0 {
		return false
	}
	slices.SortFunc(
		list.APIResources,
		func(a, b metav1.APIResource) int { return strings.Compare(a.Name, b.Name) },
	)
	writeJSON(w, http.StatusOK, list)
	return true
}

func apiGroup(name string, versions []string) metav1.APIGroup {
	g := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: name}
	vs := slices.Sorted(slices.Values(versions))
	for _, v := range vs {
		g.Versions = append(
			g.Versions,
			metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v},
		)
	}
	g.PreferredVersion = g.Versions[len(g.Versions)-1]
	return g
}
