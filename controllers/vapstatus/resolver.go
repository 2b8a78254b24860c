package vapstatus

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// gvkExtension lists, on a schema of the API server's OpenAPI, the kinds
// it is the schema of.
const gvkExtension = "x-kubernetes-group-version-kind"

// schemaRefPrefix starts every reference between the schemas of one
// OpenAPI v3 document.
const schemaRefPrefix = "#/components/schemas/"

// openAPIResolver finds the schema of a kind in the API server's OpenAPI
// v3 documents (/openapi/v3/<group-version>), for built-in kinds and
// custom resources alike. It asks the server for its list of documents
// at every call, and keeps the last document of each group version it
// parsed: a document is parsed again only when the server's list names
// another version of it (its URL carries a hash of its content).
type openAPIResolver struct {
	// client returns the OpenAPI client to ask; it is called at each
	// resolution.
	client func() openapi.Client

	mu   sync.Mutex
	docs map[string]*openAPIDocument // by path, "apis/apps/v1"
}

var _ resolver.SchemaResolver = (*openAPIResolver)(nil)

// openAPIDocument is one parsed group-version document.
type openAPIDocument struct {
	url     string
	schemas map[string]*spec.Schema
	byKind  map[schema.GroupVersionKind]string // the name of each kind's schema
}

func newOpenAPIResolver(client func() openapi.Client) *openAPIResolver {
	return &openAPIResolver{client: client, docs: map[string]*openAPIDocument{}}
}

// ResolveSchema returns gvk's schema with every reference replaced by the
// schema it refers to. An error wraps resolver.ErrSchemaNotFound when the
// server publishes no schema of the kind.
func (r *openAPIResolver) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	doc, err := r.document(gvk.GroupVersion())
	if err != nil {
		return nil, err
	}
	root, ok := doc.byKind[gvk]
	if !ok {
		return nil, fmt.Errorf("the OpenAPI of %s has no schema of kind %s: %w",
			gvk.GroupVersion(), gvk.Kind, resolver.ErrSchemaNotFound)
	}
	return resolver.PopulateRefs(func(ref string) (*spec.Schema, bool) {
		s, ok := doc.schemas[strings.TrimPrefix(ref, schemaRefPrefix)]
		return s, ok
	}, root)
}

// document returns gv's document, parsed, fetching it when the server
// lists a version of it this resolver has not parsed.
func (r *openAPIResolver) document(gv schema.GroupVersion) (*openAPIDocument, error) {
	path := "apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		path = "api/" + gv.Version
	}
	paths, err := r.client().Paths()
	if err != nil {
		return nil, fmt.Errorf("listing the API server's OpenAPI v3 documents: %w", err)
	}
	remote, ok := paths[path]
	if !ok {
		return nil, fmt.Errorf("the API server publishes no OpenAPI of %s: %w",
			gv, resolver.ErrSchemaNotFound)
	}
	url := remote.ServerRelativeURL()
	r.mu.Lock()
	doc := r.docs[path]
	r.mu.Unlock()
	if doc != nil && doc.url == url {
		return doc, nil
	}
	b, err := remote.Schema("application/json")
	if err != nil {
		return nil, fmt.Errorf("fetching the OpenAPI of %s: %w", gv, err)
	}
	if doc, err = parseDocument(url, b); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI of %s: %w", gv, err)
	}
	r.mu.Lock()
	r.docs[path] = doc
	r.mu.Unlock()
	return doc, nil
}

// parseDocument reads an OpenAPI v3 document and indexes its schemas by
// the kinds they declare. When two schemas declare one kind, the first by
// name is its schema.
func parseDocument(url string, b []byte) (*openAPIDocument, error) {
	var raw struct {
		Components struct {
			Schemas map[string]*spec.Schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	doc := &openAPIDocument{url: url, schemas: raw.Components.Schemas,
		byKind: map[schema.GroupVersionKind]string{}}
	names := make([]string, 0, len(doc.schemas))
	for name, s := range doc.schemas {
		if s != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		var kinds []schema.GroupVersionKind
		if err := doc.schemas[name].Extensions.GetObject(gvkExtension, &kinds); err != nil {
			return nil, fmt.Errorf("schema %s: %s: %w", name, gvkExtension, err)
		}
		for _, k := range kinds {
			if _, taken := doc.byKind[k]; !taken {
				doc.byKind[k] = name
			}
		}
	}
	return doc, nil
}
