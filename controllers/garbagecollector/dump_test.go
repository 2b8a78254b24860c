package garbagecollector

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGraphHandler: /graph renders the graph as DOT (nodes with an owner
// or a dependent, an edge from each dependent to each owner, owners
// missing from the graph marked), ?uid= renders only the part connected
// to that object, and other paths are not found.
func TestGraphHandler(t *testing.T) {
	f := newFixture(t)
	f.add(cm("ns", "own", "o1"), cm("ns", "dep", "d1", owner("own", "o1", false)))
	f.add(cm("ns", "lonely", "l1"))
	f.add(cm("other", "x", "x1", owner("y", "y1", false)))
	f.gc.graph.remove("y1") // an owner reference to something the graph lacks

	get := func(target string) (int, string) {
		rec := httptest.NewRecorder()
		f.gc.DebuggingHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		return rec.Code, rec.Body.String()
	}
	wantFull := `strict digraph full {
  // Node definitions.
  "d1" [
    label="uid=d1\nnamespace=ns\nConfigMap.v1/dep\n"
    group=""
    version="v1"
    kind="ConfigMap"
    namespace="ns"
    name="dep"
    uid="d1"
    missing="false"
    beingDeleted="false"
    deletingDependents="false"
    virtual="false"
  ];
  "o1" [
    label="uid=o1\nnamespace=ns\nConfigMap.v1/own\n"
    group=""
    version="v1"
    kind="ConfigMap"
    namespace="ns"
    name="own"
    uid="o1"
    missing="false"
    beingDeleted="false"
    deletingDependents="false"
    virtual="false"
  ];
  "x1" [
    label="uid=x1\nnamespace=other\nConfigMap.v1/x\n"
    group=""
    version="v1"
    kind="ConfigMap"
    namespace="other"
    name="x"
    uid="x1"
    missing="false"
    beingDeleted="false"
    deletingDependents="false"
    virtual="false"
  ];
  "y1" [
    label="uid=y1\nnamespace=\nConfigMap.v1/y\nmissingFromGraph\n"
    group=""
    version="v1"
    kind="ConfigMap"
    namespace=""
    name="y"
    uid="y1"
    missing="true"
    beingDeleted="false"
    deletingDependents="false"
    virtual="false"
  ];
  // Edge definitions.
  "d1" -> "o1";
  "x1" -> "y1";
}
`
	if code, body := get("/graph"); code != http.StatusOK || body != wantFull {
		t.Errorf("/graph: %d\n%s\nwant\n%s", code, body, wantFull)
	}
	code, body := get("/graph?uid=o1")
	wantPart := `strict digraph full {
  // Node definitions.
  "d1" [`
	if code != http.StatusOK || len(body) < len(wantPart) || body[:len(wantPart)] != wantPart ||
		strings.Contains(
			body,
			`"x1"`,
		) || strings.Contains(body, `"l1"`) || !strings.Contains(body, `"d1" -> "o1";`) {
		t.Errorf("/graph?uid=o1: %d\n%s", code, body)
	}
	if code, _ := get("/other"); code != http.StatusNotFound {
		t.Errorf("/other: %d, want 404", code)
	}
	// A virtual owner is marked so.
	f.add(cm("ns", "v", "v1", owner("virt", "vo", false)))
	if _, body := get("/graph?uid=vo"); !strings.Contains(body, `virtual="true"`) {
		t.Errorf("virtual owner not marked:\n%s", body)
	}
}
