package vapstatus

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/openapi"
)

// doc is an OpenAPI v3 document of group g, version v1, with a kind
// Widget whose spec refers to WidgetSpec, which has the given fields.
func doc(g string, fields ...string) []byte {
	props := make([]string, 0, len(fields))
	for _, f := range fields {
		props = append(props, `"`+f+`":{"type":"string"}`)
	}
	return []byte(`{"components":{"schemas":{
		"x.Widget":{"type":"object",
			"x-kubernetes-group-version-kind":[
				{"group":"` + g + `","version":"v1","kind":"Widget"}],
			"properties":{"spec":{"allOf":[{"$ref":"#/components/schemas/x.WidgetSpec"}]}}},
		"x.WidgetSpec":{"type":"object","properties":{` + strings.Join(props, ",") + `}}}}}`)
}

// served is one group version's document as the server lists it.
type served struct {
	url     string
	body    []byte
	err     error
	fetches *int
}

func (s served) Schema(contentType string) ([]byte, error) {
	if contentType != "application/json" {
		return nil, errors.New("JSON only")
	}
	*s.fetches++
	return s.body, s.err
}

func (s served) ServerRelativeURL() string { return s.url }

// server answers Paths from its map, or err.
type server struct {
	paths map[string]openapi.GroupVersion
	err   error
}

func (s *server) Paths() (map[string]openapi.GroupVersion, error) { return s.paths, s.err }

func TestResolverFollowsTheServersDocuments(t *testing.T) {
	fetches := 0
	srv := &server{paths: map[string]openapi.GroupVersion{
		"apis/example.com/v1": served{"/openapi/v3/apis/example.com/v1?hash=A",
			doc("example.com", "size"), nil, &fetches},
		"api/v1": served{"/openapi/v3/api/v1?hash=C", doc(""), nil, &fetches},
	}}
	r := newOpenAPIResolver(func() openapi.Client { return srv })
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	specFields := func() []string {
		t.Helper()
		s, err := r.ResolveSchema(widget)
		if err != nil {
			t.Fatal(err)
		}
		spec := s.Properties["spec"]
		var out []string
		for f := range spec.Properties {
			out = append(out, f)
		}
		return out
	}
	if got := specFields(); strings.Join(got, ",") != "size" {
		t.Fatalf("spec fields %v, want [size] (the reference followed)", got)
	}
	specFields()
	if fetches != 1 {
		t.Errorf("%d fetches for two resolutions of one document version, want 1", fetches)
	}
	// The server publishes a new version of the document (a CRD changed).
	srv.paths["apis/example.com/v1"] = served{"/openapi/v3/apis/example.com/v1?hash=B",
		doc("example.com", "colour"), nil, &fetches}
	if got := specFields(); strings.Join(got, ",") != "colour" {
		t.Errorf("spec fields %v after the document changed, want [colour]", got)
	}
	if fetches != 2 {
		t.Errorf("%d fetches, want 2 (the new version fetched once)", fetches)
	}
	core := schema.GroupVersionKind{Version: "v1", Kind: "Widget"}
	if _, err := r.ResolveSchema(core); err != nil {
		t.Errorf("the core group's Widget: %v", err)
	}
}

func TestResolverErrors(t *testing.T) {
	fetches := 0
	srv := &server{paths: map[string]openapi.GroupVersion{
		"apis/example.com/v1": served{"a", doc("example.com"), nil, &fetches},
		"apis/broken.com/v1":  served{"b", []byte("{not json"), nil, &fetches},
		"apis/away.com/v1":    served{"c", nil, errors.New("503"), &fetches},
		"apis/bad.com/v1": served{"d", []byte(`{"components":{"schemas":{"x":` +
			`{"x-kubernetes-group-version-kind":"kind"}}}}`), nil, &fetches},
	}}
	r := newOpenAPIResolver(func() openapi.Client { return srv })
	for _, tt := range []struct {
		gvk      schema.GroupVersionKind
		notFound bool
		says     string
	}{
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}, true,
			"no schema of kind Gadget"},
		{schema.GroupVersionKind{Group: "other.com", Version: "v1", Kind: "Widget"}, true,
			"publishes no OpenAPI of other.com/v1"},
		{schema.GroupVersionKind{Group: "broken.com", Version: "v1", Kind: "Widget"}, false,
			"reading the OpenAPI of broken.com/v1"},
		{schema.GroupVersionKind{Group: "away.com", Version: "v1", Kind: "Widget"}, false,
			"fetching the OpenAPI of away.com/v1: 503"},
		{schema.GroupVersionKind{Group: "bad.com", Version: "v1", Kind: "Widget"}, false,
			"x-kubernetes-group-version-kind"},
	} {
		_, err := r.ResolveSchema(tt.gvk)
		if err == nil || errors.Is(err, resolver.ErrSchemaNotFound) != tt.notFound ||
			!strings.Contains(err.Error(), tt.says) {
			t.Errorf("%v: %v; want an error saying %q, not found: %v", tt.gvk, err, tt.says,
				tt.notFound)
		}
	}
	srv.err = errors.New("forbidden")
	_, err := r.ResolveSchema(schema.GroupVersionKind{Group: "example.com", Version: "v1",
		Kind: "Widget"})
	if err == nil || errors.Is(err, resolver.ErrSchemaNotFound) ||
		!strings.Contains(err.Error(), "forbidden") {
		t.Errorf("with the list of documents failing: %v", err)
	}
}
