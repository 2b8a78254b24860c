package garbagecollector

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// vertex is one node of the DOT rendering.
type vertex struct {
	uid                types.UID
	gvk                schema.GroupVersionKind
	namespace, name    string
	missing            bool
	beingDeleted       bool
	deletingDependents bool
	virtual            bool
}

type edge struct{ from, to types.UID }

func vertexOf(n *node) *vertex {
	id := n.identity()
	gv, _ := schema.ParseGroupVersion(id.APIVersion)
	return &vertex{
		uid: id.UID, gvk: gv.WithKind(id.Kind), namespace: id.Namespace, name: id.Name,
		beingDeleted: n.isBeingDeleted(), deletingDependents: n.isDeletingDependents(),
		virtual: !n.observed(),
	}
}

// missingVertex stands for an owner a dependent references that is not in
// the graph at all.
func missingVertex(o metav1.OwnerReference) *vertex {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return &vertex{uid: o.UID, gvk: gv.WithKind(o.Kind), name: o.Name, missing: true}
}

func (v *vertex) writeDOT(w io.Writer) {
	kind := v.gvk.Kind + "." + v.gvk.Version
	if v.gvk.Group != "" {
		kind += "." + v.gvk.Group
	}
	label := fmt.Sprintf("uid=%v\nnamespace=%v\n%v/%v\n", v.uid, v.namespace, kind, v.name)
	var conds []string
	for _, c := range []struct {
		on   bool
		name string
	}{{v.beingDeleted, "beingDeleted"}, {v.deletingDependents, "deletingDependents"},
		{v.virtual, "virtual"}, {v.missing, "missingFromGraph"}} {
		if c.on {
			conds = append(conds, c.name)
		}
	}
	if len(conds) > 0 {
		label += strings.Join(conds, ",") + "\n"
	}
	fmt.Fprintf(w, "  %q [\n", v.uid)
	for _, a := range [][2]string{
		{"label", label}, {"group", v.gvk.Group}, {"version", v.gvk.Version}, {"kind", v.gvk.Kind},
		{"namespace", v.namespace}, {"name", v.name}, {"uid", string(v.uid)},
		{"missing", fmt.Sprint(v.missing)}, {"beingDeleted", fmt.Sprint(v.beingDeleted)},
		{"deletingDependents", fmt.Sprint(v.deletingDependents)}, {"virtual", fmt.Sprint(v.virtual)},
	} {
		fmt.Fprintf(w, "    %s=%q\n", a[0], a[1])
	}
	fmt.Fprintf(w, "  ];\n")
}

// verticesAndEdges renders nodes (those with an owner or a dependent) and
// an edge from every dependent to each of its owners, sorted by uid.
func verticesAndEdges(nodes map[types.UID]*node) ([]*vertex, []edge) {
	byUID := map[types.UID]*vertex{}
	var vs []*vertex
	var es []edge
	for uid, n := range nodes {
		if n.dependentCount() == 0 && len(n.ownerRefs()) == 0 {
			continue
		}
		v := vertexOf(n)
		byUID[uid] = v
		vs = append(vs, v)
	}
	for uid, n := range nodes {
		for _, o := range n.ownerRefs() {
			if _, ok := byUID[o.UID]; !ok {
				v := missingVertex(o)
				byUID[o.UID] = v
				vs = append(vs, v)
			}
			es = append(es, edge{from: uid, to: o.UID})
		}
	}
	slices.SortStableFunc(
		vs,
		func(a, b *vertex) int { return strings.Compare(string(a.uid), string(b.uid)) },
	)
	slices.SortStableFunc(es, func(a, b edge) int {
		if c := strings.Compare(string(a.from), string(b.from)); c != 0 {
			return c
		}
		return strings.Compare(string(a.to), string(b.to))
	})
	return vs, es
}

// neighbourhood is the connected part of the graph around uids: their
// owners and dependents, transitively.
func neighbourhood(all map[types.UID]*node, uids []types.UID) map[types.UID]*node {
	out := map[types.UID]*node{}
	todo := slices.Clone(uids)
	for len(todo) > 0 {
		uid := todo[0]
		todo = todo[1:]
		if _, done := out[uid]; done {
			continue
		}
		n, ok := all[uid]
		if !ok {
			continue
		}
		out[uid] = n
		for _, o := range n.ownerRefs() {
			todo = append(todo, o.UID)
		}
		for _, d := range n.dependentList() {
			todo = append(todo, d.identity().UID)
		}
	}
	return out
}

func writeDOT(w io.Writer, vs []*vertex, es []edge) {
	io.WriteString(w, "strict digraph full {\n")
	if len(vs) > 0 {
		io.WriteString(w, "  // Node definitions.\n")
		for _, v := range vs {
			v.writeDOT(w)
		}
	}
	if len(es) > 0 {
		io.WriteString(w, "  // Edge definitions.\n")
		for _, e := range es {
			fmt.Fprintf(w, "  %q -> %q;\n", e.from, e.to)
		}
	}
	io.WriteString(w, "}\n")
}

// graphHandler serves /graph: the whole graph, or with ?uid=… (repeatable)
// the neighbourhood of those objects, as a Graphviz DOT document.
type graphHandler struct{ graph *uidIndex }

func (h graphHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/graph" {
		http.Error(w, "", http.StatusNotFound)
		return
	}
	nodes := h.graph.snapshot()
	if uids := req.URL.Query()["uid"]; len(uids) > 0 {
		want := make([]types.UID, 0, len(uids))
		for _, u := range uids {
			want = append(want, types.UID(u))
		}
		nodes = neighbourhood(nodes, want)
	}
	vs, es := verticesAndEdges(nodes)
	var b bytes.Buffer
	writeDOT(&b, vs, es)
	w.Header().Set("Content-Type", "text/vnd.graphviz")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
}
