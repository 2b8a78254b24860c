package contract

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Row is one promise of the API server, and the code that checks it.
type Row struct {
	// Name is topic/what: unique, stable, the subtest's name.
	Name string
	// Promise is what a controller may rely on, in one sentence.
	Promise string
	// NotModelled, when set, marks a row the in-memory API does not model:
	// it answers the row's request with an error holding this text.
	NotModelled string
	// Sim marks a row the simulation (test/sim) relies on.
	Sim bool
	// Run checks the promise against e's server; nil when it holds.
	Run func(ctx context.Context, e *Env) error
}

// CustomResource is a custom resource a Target serves, as a
// CustomResourceDefinition would: namespaced, one version, its schema open.
type CustomResource struct {
	Group, Version, Plural, Kind string
	// Status: the resource has a status subresource.
	Status bool
}

// GVR is the resource's group, version and resource.
func (c CustomResource) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: c.Group, Version: c.Version, Resource: c.Plural}
}

// APIVersion is the group and version, as objects name them.
func (c CustomResource) APIVersion() string { return c.Group + "/" + c.Version }

// The custom resources every run serves before its first row.
var (
	// Widgets have a status subresource.
	Widgets = CustomResource{Group: "contract.ctrlhost.dev", Version: "v1", Plural: "widgets",
		Kind: "Widget", Status: true}
	// Gadgets have none: status is data like any other.
	Gadgets = CustomResource{Group: "contract.ctrlhost.dev", Version: "v1", Plural: "gadgets",
		Kind: "Gadget"}
)

// Target is a server the table runs against.
type Target struct {
	// Name names the server in failures.
	Name string
	// InMemory: the in-memory API, where rows marked NotModelled must
	// fail with their mark.
	InMemory bool
	// Config reaches the server as an administrator.
	Config *rest.Config
	// Restart restarts the server as an API server restart does: open
	// watches end and the event history before it is gone.
	Restart func(ctx context.Context) error
	// Serve serves a custom resource (a CustomResourceDefinition
	// established and in discovery) and Unserve stops serving it (the
	// definition deleted, and its objects with it).
	Serve   func(ctx context.Context, r CustomResource) error
	Unserve func(ctx context.Context, r CustomResource) error
}

// Env is what a row runs with.
type Env struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Namespace exists, and is the row's alone.
	Namespace string
	Target    *Target
}

// RowTimeout bounds one row.
const RowTimeout = 30 * time.Second

// Rows is the table, in the order it runs and is shown.
func Rows() []Row {
	var rows []Row
	for _, group := range [][]Row{createRows, updateRows, generationRows, statusRows,
		patchRows, applyRows, deleteRows, dryRunRows, listRows, watchRows, namespaceRows,
		hostRows} {
		rows = append(rows, group...)
	}
	return rows
}

// Run runs every row against target, each as a subtest of t.
func Run(t *testing.T, target *Target) {
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(target.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(target.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []CustomResource{Widgets, Gadgets} {
		if err := target.Serve(ctx, r); err != nil {
			t.Fatalf("%s: serving %s: %v", target.Name, r.Plural, err)
		}
	}
	seen := map[string]bool{}
	for i, row := range Rows() {
		if seen[row.Name] {
			t.Fatalf("two rows are named %q", row.Name)
		}
		seen[row.Name] = true
		t.Run(row.Name, func(t *testing.T) {
			ns := fmt.Sprintf("contract-%03d", i)
			e := &Env{Kube: kube, Dynamic: dyn, Namespace: ns, Target: target}
			rowCtx, cancel := context.WithTimeout(ctx, RowTimeout)
			defer cancel()
			_, err := kube.CoreV1().Namespaces().Create(rowCtx,
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("creating the row's namespace: %v", err)
			}
			err = row.Run(rowCtx, e)
			switch {
			case !target.InMemory || row.NotModelled == "":
				if err != nil {
					t.Errorf("%s: %s\n\tpromise: %s", target.Name, err, row.Promise)
				}
			case err == nil:
				t.Errorf("%s: the row holds, but it is marked NotModelled %q: drop the mark",
					target.Name, row.NotModelled)
			case !strings.Contains(err.Error(), row.NotModelled):
				t.Errorf("%s: the row is marked NotModelled %q, but it failed otherwise: %v",
					target.Name, row.NotModelled, err)
			}
		})
	}
}

// Definition is the CustomResourceDefinition that serves c, as JSON-shaped
// data: one served and stored version whose schema keeps every field.
func (c CustomResource) Definition() map[string]any {
	version := map[string]any{
		"name": c.Version, "served": true, "storage": true,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "x-kubernetes-preserve-unknown-fields": true,
		}},
	}
	if c.Status {
		version["subresources"] = map[string]any{"status": map[string]any{}}
	}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": c.Plural + "." + c.Group},
		"spec": map[string]any{
			"group": c.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": c.Plural, "singular": strings.ToLower(c.Kind),
				"kind": c.Kind, "listKind": c.Kind + "List"},
			"versions": []any{version},
		},
	}
}
