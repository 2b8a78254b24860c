package testenv

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// crdYAML is a valid CRD for <plural>.<group>, served in version v1.
func crdYAML(plural, group string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.` + group + `
spec:
  group: ` + group + `
  names: {plural: ` + plural + `, kind: Thing}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
`
}

// crdMap is a valid CRD for <plural>.<group>, served in version v1 (not
// v2).
func crdMap(plural, group string) map[string]any {
	schema := func() map[string]any {
		return map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}}
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"names": map[string]any{"plural": plural, "kind": "Thing"},
			"scope": "Namespaced",
			"versions": []any{
				map[string]any{"name": "v1", "served": true, "storage": true, "schema": schema()},
				map[string]any{"name": "v2", "served": false, "storage": false,
					"schema": schema()},
			},
		},
	}
}

// writeFiles writes name -> content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, content)
	}
}

func TestReadCRDFiles(t *testing.T) {
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		paths []string // relative to the directory of files
		want  []string // CRD names in order, with their labels' file and document
		errs  []string // substrings of the error, if one is expected
	}{{
		name:  "one file",
		files: map[string]string{"w.yaml": crdYAML("widgets", "example.com")},
		paths: []string{"w.yaml"},
		want:  []string{"widgets.example.com w.yaml: document 1"},
	}, {
		name: "multi-document with leading separator, empty and comment-only documents",
		files: map[string]string{"m.yaml": "# header\n---\n" + crdYAML("widgets", "example.com") +
			"---\n---   # nothing here\n# just a comment\n--- \n" +
			crdYAML("gadgets", "example.com") + "---\n"},
		paths: []string{"m.yaml"},
		want: []string{
			"widgets.example.com m.yaml: document 1",
			"gadgets.example.com m.yaml: document 4",
		},
	}, {
		name: "CRLF line ends",
		files: map[string]string{"w.yml": strings.ReplaceAll(
			crdYAML("a", "x.io")+"---\n"+crdYAML("b", "x.io"), "\n", "\r\n")},
		paths: []string{"w.yml"},
		want:  []string{"a.x.io w.yml: document 1", "b.x.io w.yml: document 2"},
	}, {
		name:  "JSON file",
		files: map[string]string{"w.json": mustJSON(t, crdMap("widgets", "example.com"))},
		paths: []string{"w.json"},
		want:  []string{"widgets.example.com w.json: document 1"},
	}, {
		name: "directory in name order, non-recursive, other extensions ignored",
		files: map[string]string{
			"crds/b.yaml":        crdYAML("bs", "x.io"),
			"crds/a.JSON":        mustJSON(t, crdMap("as", "x.io")),
			"crds/c.yml":         crdYAML("cs", "x.io"),
			"crds/README.md":     "not a CRD",
			"crds/kustomize.txt": deployment,
			"crds/sub/d.yaml":    crdYAML("ds", "x.io"),
		},
		paths: []string{"crds"},
		want: []string{
			"as.x.io crds/a.JSON: document 1",
			"bs.x.io crds/b.yaml: document 1",
			"cs.x.io crds/c.yml: document 1",
		},
	}, {
		name:  "a file of only empty documents is no CRD and no error",
		files: map[string]string{"e.yaml": "---\n# nothing\n---\n"},
		paths: []string{"e.yaml"},
	}, {
		name: "document that is not a CRD",
		files: map[string]string{"m.yaml": crdYAML("widgets", "example.com") + "---\n\n---\n" +
			deployment},
		paths: []string{"m.yaml"},
		errs:  []string{`m.yaml: document 3: kind is "Deployment", want CustomResourceDefinition`},
	}, {
		name:  "every bad file reported",
		files: map[string]string{"a.yaml": deployment, "b.yaml": "- 1\n- 2\n", "c.yaml": "a: [\n"},
		paths: []string{"a.yaml", "b.yaml", "c.yaml"},
		errs: []string{
			`a.yaml: document 1: kind is "Deployment"`,
			"b.yaml: document 1: is a JSON array, not an object",
			"c.yaml: document 1: ",
		},
	}, {
		name: "invalid CRDs",
		files: map[string]string{"bad.yaml": strings.Join([]string{
			"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n" +
				"metadata: {name: widgets.example.com}\n" +
				"spec: {group: example.com, versions: [{name: v1, served: true}]}\n",
			"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n" +
				"metadata: {name: widgets.example.com}\n" +
				"spec: {names: {plural: widgets}, versions: [{name: v1, served: true}]}\n",
			strings.Replace(crdYAML("widgets", "example.com"), "name: widgets.example.com",
				"name: widget.example.com", 1),
			strings.Replace(crdYAML("gizmos", "example.com"), "served: true", "served: false", 1),
			strings.Replace(crdYAML("olds", "example.com"), "apiextensions.k8s.io/v1",
				"apiextensions.k8s.io/v1beta1", 1),
			strings.Replace(crdYAML("anons", "example.com"), "  name: anons.example.com\n",
				"  labels: {a: b}\n", 1),
		}, "---\n")},
		paths: []string{"bad.yaml"},
		errs: []string{
			`bad.yaml: document 1: CRD "widgets.example.com": spec.names.plural must be set`,
			`bad.yaml: document 2: CRD "widgets.example.com": spec.group must be set`,
			`bad.yaml: document 3: CRD "widget.example.com": metadata.name must be ` +
				`"widgets.example.com" (<spec.names.plural>.<spec.group>), ` +
				`got "widget.example.com"`,
			`bad.yaml: document 4: CRD "gizmos.example.com": spec.versions must list ` +
				`at least one version with served: true`,
			`bad.yaml: document 5: CRD "olds.example.com": apiVersion is ` +
				`"apiextensions.k8s.io/v1beta1", want apiextensions.k8s.io/v1`,
			`bad.yaml: document 6: metadata.name must be set to "anons.example.com"`,
		},
	}, {
		name: "the same CRD twice",
		files: map[string]string{
			"a.yaml": crdYAML("widgets", "example.com"),
			"b.yaml": crdYAML("widgets", "example.com"),
		},
		paths: []string{"a.yaml", "b.yaml"},
		errs: []string{`b.yaml: document 1: CRD "widgets.example.com" ` +
			`is also given by a.yaml: document 1`},
	}, {
		name:  "missing path",
		paths: []string{"nope.yaml"},
		errs:  []string{"CRD path: stat nope.yaml: no such file or directory"},
	}, {
		name:  "empty path",
		paths: []string{""},
		errs:  []string{"a CRD path is empty"},
	}, {
		name:  "directory without CRD files",
		files: map[string]string{"crds/README.md": "x", "crds/sub/a.yaml": crdYAML("as", "x.io")},
		paths: []string{"crds"},
		errs:  []string{"CRD directory crds holds no .yaml, .yml or .json file"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			t.Chdir(dir)
			crds, err := readCRDFiles(tc.paths)
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("readCRDFiles succeeded with %d CRDs, want an error", len(crds))
				}
				for _, want := range tc.errs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error does not mention %q:\n%v", want, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range crds {
				got = append(got, c.name+" "+c.from)
				if c.obj.GetKind() != crdKind || len(c.served) == 0 {
					t.Errorf("%s: kind %q, served %v", c.name, c.obj.GetKind(), c.served)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("CRDs = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSplitYAML(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a: 1\n", []string{"a: 1\n"}},
		{"---\na: 1\n", []string{"a: 1\n"}},
		{"# c\n\n---\na: 1\n", []string{"a: 1\n"}},
		{"a: 1\n---\nb: 2", []string{"a: 1\n", "b: 2"}},
		{"a: 1\n---\n---\nb: 2\n---\n", []string{"a: 1\n", "", "b: 2\n", ""}},
		{"a: 1\n--- # next\nb: 2\n", []string{"a: 1\n", "b: 2\n"}},
		{"a: |\n  ---\n----\n---x\n", []string{"a: |\n  ---\n----\n---x\n"}},
	} {
		var got []string
		for _, d := range splitYAML([]byte(tc.in)) {
			got = append(got, string(d))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("splitYAML(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// typedCRD stands in for apiextensionsv1.CustomResourceDefinition: a typed
// value whose TypeMeta is empty, with status and server-set fields.
type typedCRD struct {
	Kind       string         `json:"kind,omitempty"`
	APIVersion string         `json:"apiVersion,omitempty"`
	Metadata   map[string]any `json:"metadata"`
	Spec       map[string]any `json:"spec"`
	Status     map[string]any `json:"status"`
}

func TestCRDFromValue(t *testing.T) {
	m := crdMap("widgets", "example.com")
	u := &unstructured.Unstructured{Object: crdMap("widgets", "example.com")}
	typed := typedCRD{
		Metadata: map[string]any{"name": "widgets.example.com", "resourceVersion": "7",
			"creationTimestamp": nil},
		Spec:   crdMap("widgets", "example.com")["spec"].(map[string]any),
		Status: map[string]any{"storedVersions": nil},
	}
	for _, tc := range []struct {
		name string
		v    any
		err  string
	}{
		{name: "map", v: m},
		{name: "*Unstructured", v: u},
		{name: "Unstructured", v: *u},
		{name: "typed with empty TypeMeta", v: typed},
		{name: "pointer to typed", v: &typed},
		{name: "json.RawMessage", v: json.RawMessage(mustJSON(t, m))},
		{name: "map with Go ints", v: map[string]any{"kind": crdKind, "apiVersion": crdAPIVersion,
			"metadata": map[string]any{"name": "widgets.example.com", "generation": 3},
			"spec":     m["spec"]}},
		{name: "nil", v: nil, err: "crds[0] is nil; pass a CRD"},
		{name: "nil *Unstructured", v: (*unstructured.Unstructured)(nil),
			err: "crds[0] is a nil *unstructured.Unstructured"},
		{name: "nil pointer", v: (*typedCRD)(nil),
			err: "crds[0] (*testenv.typedCRD) marshals to null"},
		{name: "string", v: "widgets.example.com",
			err: "crds[0] (string): is a JSON string, not an object"},
		{name: "channel", v: make(chan int), err: "crds[0] (chan int) does not marshal to JSON"},
		{name: "other kind", v: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"},
			err: `kind is "ConfigMap", want CustomResourceDefinition`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := crdFromValue(0, tc.v)
			if err == nil {
				err = validateCRDs([]*crdSource{c})
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.name != "widgets.example.com" || c.group != "example.com" ||
				c.plural != "widgets" || !slices.Equal(c.served, []string{"v1"}) {
				t.Errorf("got name %q group %q plural %q served %v",
					c.name, c.group, c.plural, c.served)
			}
			if c.obj.GetAPIVersion() != crdAPIVersion || c.obj.GetKind() != crdKind {
				t.Errorf("apiVersion %q kind %q", c.obj.GetAPIVersion(), c.obj.GetKind())
			}
			if _, ok := c.obj.Object["status"]; ok || c.obj.GetResourceVersion() != "" ||
				c.obj.GetGeneration() != 0 {
				t.Errorf("status or server-set metadata kept: %v", c.obj.Object)
			}
			_ = c.obj.DeepCopy() // panics on values that are not JSON's
		})
	}
	// The arguments are left alone.
	if _, ok := u.Object["apiVersion"]; !ok || typed.Metadata["resourceVersion"] != "7" {
		t.Errorf("arguments modified: %v %v", u.Object, typed.Metadata)
	}
}

// TestCRDArgumentsCheckedFirst: invalid arguments are reported, all at
// once, without a request; this Env has no API server to send one to.
func TestCRDArgumentsCheckedFirst(t *testing.T) {
	noPlural := crdMap("widgets", "example.com")
	delete(noPlural["spec"].(map[string]any)["names"].(map[string]any), "plural")
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func(e *Env) error
		errs []string
	}{{
		name: "InstallCRDs",
		call: func(e *Env) error {
			return e.InstallCRDs(ctx, crdMap("a", "x.io"), noPlural, nil, crdMap("a", "x.io"))
		},
		errs: []string{
			`crds[1]: CRD "widgets.example.com": spec.names.plural must be set`,
			"crds[2] is nil",
			`crds[3]: CRD "a.x.io" is also given by crds[0]`,
		},
	}, {
		name: "InstallCRDFiles",
		call: func(e *Env) error {
			return e.InstallCRDFiles(ctx, filepath.Join(t.TempDir(), "x"))
		},
		errs: []string{"CRD path: stat "},
	}, {
		name: "UninstallCRDs",
		call: func(e *Env) error {
			return e.UninstallCRDs(ctx, "widgets.example.com", "widgets", ".x", "")
		},
		errs: []string{
			`names[1] "widgets" is not a CRD name; want <plural>.<group>`,
			`names[2] ".x" is not`,
			`names[3] "" is not`,
		},
	}, {
		name: "after Stop",
		call: func(e *Env) error {
			e.stopped = true
			return e.InstallCRDs(ctx, crdMap("a", "x.io"))
		},
		errs: []string{"the Env is stopped"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(&Env{opts: Options{}.withDefaults()})
			if err == nil {
				t.Fatal("succeeded, want an error")
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q:\n%v", want, err)
				}
			}
		})
	}
	// Nothing to do is no error and no request.
	e := &Env{opts: Options{}.withDefaults()}
	if err := e.InstallCRDs(ctx); err != nil {
		t.Errorf("InstallCRDs(): %v", err)
	}
	if err := e.UninstallCRDs(ctx); err != nil {
		t.Errorf("UninstallCRDs(): %v", err)
	}
}

// TestStartChecksCRDPathsFirst: a bad Options.CRDPaths fails Start before
// any process is started or any file written.
func TestStartChecksCRDPathsFirst(t *testing.T) {
	clearBinEnv(t)
	bin := t.TempDir()
	marker := filepath.Join(t.TempDir(), "started")
	writeBin(t, bin, etcdBinary, "#!/bin/sh\ntouch "+marker+"\nexec sleep 600\n")
	writeBin(t, bin, apiserverBinary, fakeAPIServer(KubernetesVersion))
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	crds := t.TempDir()
	writeFile(t, filepath.Join(crds, "w.yaml"), crdYAML("widgets", "example.com")+
		"---\napiVersion: v1\nkind: ConfigMap\n")

	opts := Options{BinDir: bin, CRDPaths: []string{crds}, Logf: t.Logf}
	env, err := Start(context.Background(), opts)
	if err == nil {
		_ = env.Stop()
		t.Fatal("Start succeeded with a ConfigMap in CRDPaths")
	}
	want := filepath.Join(crds, "w.yaml") + `: document 2: kind is "ConfigMap"`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error does not mention %q:\n%v", want, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("etcd was started")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("Start left %v in TMPDIR", left)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
