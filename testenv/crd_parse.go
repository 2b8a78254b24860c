package testenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

const (
	crdAPIVersion = "apiextensions.k8s.io/v1"
	crdKind       = "CustomResourceDefinition"
)

// crdSource is one CRD to install, with where it came from.
type crdSource struct {
	// label names the argument or file document in validation errors:
	// "crds[2]" or "config/crd/widgets.yaml: document 1".
	label string
	// from is the file document, or "" for an InstallCRDs argument; it is
	// added to errors that happen after validation.
	from string
	obj  *unstructured.Unstructured

	// Taken from obj by validate.
	name, group, plural string
	served              []string // versions with served: true
}

// crdFromValue turns an InstallCRDs argument into a crdSource. A missing
// apiVersion and kind are filled in, since typed objects built in Go
// usually leave TypeMeta empty.
func crdFromValue(i int, v any) (*crdSource, error) {
	label := fmt.Sprintf("crds[%d]", i)
	var content any
	switch o := v.(type) {
	case nil:
		return nil, fmt.Errorf("testenv: %s is nil; pass a CRD", label)
	case *unstructured.Unstructured:
		if o == nil {
			return nil, fmt.Errorf("testenv: %s is a nil *unstructured.Unstructured; "+
				"pass a CRD", label)
		}
		content = o.Object
	case unstructured.Unstructured:
		content = o.Object
	default:
		// Typed objects, map[string]any, json.RawMessage: whatever marshals
		// to the CRD's JSON.
		content = v
	}
	data, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("testenv: %s (%T) does not marshal to JSON: %w", label, v, err)
	}
	obj, err := jsonObject(data)
	if err != nil {
		return nil, fmt.Errorf("testenv: %s (%T): %w", label, v, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("testenv: %s (%T) marshals to null; pass a CRD", label, v)
	}
	if obj.GetAPIVersion() == "" && obj.GetKind() == "" {
		obj.SetAPIVersion(crdAPIVersion)
		obj.SetKind(crdKind)
	}
	return &crdSource{label: label, obj: obj}, nil
}

// jsonObject decodes data, which must be a JSON object or null, with whole
// numbers as int64 as the API machinery expects. It returns nil for null.
func jsonObject(data []byte) (*unstructured.Unstructured, error) {
	var v any
	if err := utiljson.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("decoding JSON: %w", err)
	}
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return &unstructured.Unstructured{Object: m}, nil
	default:
		return nil, fmt.Errorf("is a JSON %s, not an object", jsonKind(v))
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	default:
		return "number"
	}
}

// readCRDFiles reads the CRDs in paths (see InstallCRDFiles) and validates
// them, reporting every problem at once.
func readCRDFiles(paths []string) ([]*crdSource, error) {
	var files []string
	var errs []error
	for _, p := range paths {
		fs, err := crdFilesAt(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, fs...)
	}
	var crds []*crdSource
	for _, f := range files {
		cs, err := readCRDFile(f)
		errs = append(errs, err)
		crds = append(crds, cs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := validateCRDs(crds); err != nil {
		return nil, err
	}
	return crds, nil
}

// crdFilesAt returns path itself if it is a file, or the .yaml, .yml and
// .json files directly in it, in name order, if it is a directory.
func crdFilesAt(path string) ([]string, error) {
	if path == "" {
		return nil, errors.New("testenv: a CRD path is empty; name a file or directory")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("testenv: CRD path: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("testenv: CRD directory: %w", err)
	}
	var files []string
	for _, de := range entries {
		switch strings.ToLower(filepath.Ext(de.Name())) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		full := filepath.Join(path, de.Name())
		if fi, err := os.Stat(full); err != nil || fi.IsDir() {
			continue // a directory or dangling link with a CRD-like name
		}
		files = append(files, full)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("testenv: CRD directory %s holds no .yaml, .yml or .json file "+
			"(subdirectories are not searched; name them too)", path)
	}
	return files, nil
}

// readCRDFile parses the documents of one YAML or JSON file. Empty
// documents are skipped; every other one must be a v1
// CustomResourceDefinition.
func readCRDFile(path string) ([]*crdSource, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("testenv: reading CRD file: %w", err)
	}
	var crds []*crdSource
	var errs []error
	for i, doc := range splitYAML(data) {
		label := fmt.Sprintf("%s: document %d", path, i+1)
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("testenv: %s: %w", label, err))
			continue
		}
		obj, err := jsonObject(js)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("testenv: %s: %w", label, err))
			continue
		case obj == nil:
			continue // empty, or only comments
		case obj.GetKind() != crdKind:
			errs = append(errs, fmt.Errorf("testenv: %s: kind is %q, want %s "+
				"(only CRDs may be in CRD files)", label, obj.GetKind(), crdKind))
			continue
		}
		crds = append(crds, &crdSource{label: label, from: label, obj: obj})
	}
	return crds, errors.Join(errs...)
}

// splitYAML splits data into documents at lines that are "---", possibly
// followed by spaces and a comment. Documents are numbered as a reader
// would count them: what precedes a leading "---" is not a document when
// it holds nothing but blank lines and comments.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	for line := range bytes.Lines(data) {
		if isDocSeparator(line) {
			docs = append(docs, cur)
			cur = nil
			continue
		}
		cur = append(cur, line...)
	}
	docs = append(docs, cur)
	if len(docs) > 1 && onlyComments(docs[0]) {
		docs = docs[1:]
	}
	return docs
}

// isDocSeparator reports whether line is "---" alone, or followed by
// blanks and perhaps a comment.
func isDocSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("---"))
	switch {
	case !ok:
		return false
	case len(rest) == 0:
		return true
	case rest[0] != ' ' && rest[0] != '\t':
		return false
	}
	rest = bytes.TrimSpace(rest)
	return len(rest) == 0 || rest[0] == '#'
}

func onlyComments(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// validateCRDs checks each CRD and fills in its name, group, plural and
// served versions; it also refuses the same CRD twice. It reports every
// problem at once.
func validateCRDs(crds []*crdSource) error {
	var errs []error
	seen := crdSet{}
	for _, c := range crds {
		errs = append(errs, seen.add(c))
	}
	return errors.Join(errs...)
}

// crdSet holds the CRDs validated so far, by name.
type crdSet map[string]*crdSource

// add validates c and refuses it if the set has a CRD of the same name.
func (s crdSet) add(c *crdSource) error {
	if err := c.validate(); err != nil {
		return err
	}
	if prev, ok := s[c.name]; ok {
		return fmt.Errorf("testenv: %s: CRD %q is also given by %s; install each CRD once",
			c.label, c.name, prev.label)
	}
	s[c.name] = c
	return nil
}

// validate checks what Install needs to know and what the API server would
// otherwise reject less clearly, and readies the object for create or
// update: status and server-set metadata are dropped.
func (c *crdSource) validate() error {
	u := c.obj
	var problems []string
	if k := u.GetKind(); k != crdKind {
		problems = append(problems, fmt.Sprintf("kind is %q, want %s", k, crdKind))
	}
	switch av := u.GetAPIVersion(); {
	case av == "apiextensions.k8s.io/v1beta1":
		problems = append(problems, fmt.Sprintf("apiVersion is %q, want %s "+
			"(v1beta1 is not served since Kubernetes 1.22)", av, crdAPIVersion))
	case av != crdAPIVersion:
		problems = append(problems, fmt.Sprintf("apiVersion is %q, want %s", av, crdAPIVersion))
	}
	str := func(fields ...string) string {
		s, found, err := unstructured.NestedString(u.Object, fields...)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s must be a string: %v",
				strings.Join(fields, "."), err))
		}
		if !found {
			return ""
		}
		return s
	}
	c.name = str("metadata", "name")
	if len(problems) > 0 {
		return c.problemsError(problems) // not a CRD; its other fields mean little
	}
	c.group = str("spec", "group")
	c.plural = str("spec", "names", "plural")
	if c.group == "" {
		problems = append(problems, `spec.group must be set (the API group, e.g. "example.com")`)
	}
	if c.plural == "" {
		problems = append(problems, `spec.names.plural must be set `+
			`(the lower-case resource name in URLs, e.g. "widgets")`)
	}
	want := c.plural + "." + c.group
	switch {
	case c.name == "" && c.plural != "" && c.group != "":
		problems = append(problems, fmt.Sprintf("metadata.name must be set to %q "+
			"(<spec.names.plural>.<spec.group>)", want))
	case c.name == "":
		problems = append(problems,
			"metadata.name must be set to <spec.names.plural>.<spec.group>")
	case c.plural != "" && c.group != "" && c.name != want:
		problems = append(problems, fmt.Sprintf("metadata.name must be %q "+
			"(<spec.names.plural>.<spec.group>), got %q", want, c.name))
	}
	c.served = nil
	versions, _, err := unstructured.NestedSlice(u.Object, "spec", "versions")
	if err != nil {
		problems = append(problems, fmt.Sprintf("spec.versions must be a list: %v", err))
	}
	for i, v := range versions {
		m, ok := v.(map[string]any)
		name, _ := m["name"].(string)
		if !ok || name == "" {
			problems = append(problems, fmt.Sprintf("spec.versions[%d].name must be set", i))
			continue
		}
		if served, _ := m["served"].(bool); served {
			c.served = append(c.served, name)
		}
	}
	if err == nil && len(c.served) == 0 {
		problems = append(problems,
			"spec.versions must list at least one version with served: true")
	}

	if len(problems) > 0 {
		return c.problemsError(problems)
	}
	delete(u.Object, "status")
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation",
		"managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	return nil
}

func (c *crdSource) problemsError(problems []string) error {
	who := c.label
	if c.name != "" {
		who += fmt.Sprintf(": CRD %q", c.name)
	}
	return fmt.Errorf("testenv: %s: %s", who, strings.Join(problems, "; "))
}
