//go:build integration

package differential_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/garbagecollector"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// The garbage collector's scenarios use ConfigMaps as owners and
// dependents: no other controller acts on them, and both sides' collectors
// (which run cluster-wide) leave other namespaces' objects alone unless
// their owners go.

// gcRef is an owner reference to the ConfigMap owner.
func gcRef(owner *corev1.ConfigMap, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
	if block {
		r.BlockOwnerDeletion = ptr.To(true)
	}
	return r
}

// gcMake creates a ConfigMap with the given owner references and
// finalizers.
func gcMake(ctx context.Context, cs kubernetes.Interface, ns, name string, finalizers []string, refs ...metav1.OwnerReference) (*corev1.ConfigMap, error) {
	return cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, OwnerReferences: refs, Finalizers: finalizers,
	}}, metav1.CreateOptions{})
}

// gcDelete deletes a ConfigMap with a propagation policy.
func gcDelete(ctx context.Context, cs kubernetes.Interface, ns, name string, p metav1.DeletionPropagation) error {
	return cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &p})
}

// gcObserve returns the namespace's ConfigMaps (owner references and
// finalizers included) and the summary of its events.
func gcObserve(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for i := range l.Items {
		l.Items[i].Kind = "ConfigMap"
		out = append(out, &l.Items[i])
	}
	summary, err := differential.EventSummary(ctx, cs, ns, nil)
	if err != nil {
		return nil, err
	}
	return append(out, summary), nil
}

// gcNames lists the ConfigMaps of a normalised state, sorted.
func gcNames(state []map[string]any) []string {
	var out []string
	for _, o := range state {
		if o["kind"] == "ConfigMap" {
			out = append(out, nameOfState(o))
		}
	}
	slices.Sort(out)
	return out
}

// gcHas reports whether the named ConfigMap of a normalised state has an
// owner reference and whether it has finalizers.
func gcHas(state []map[string]any, name string) (refs, finalizers bool) {
	for _, o := range state {
		if o["kind"] == "ConfigMap" && nameOfState(o) == name {
			md, _ := o["metadata"].(map[string]any)
			_, refs = md["ownerReferences"]
			_, finalizers = md["finalizers"]
		}
	}
	return refs, finalizers
}

// gcUnfinalize clears the finalizers of the namespace's ConfigMaps, so
// that what a scenario left behind can go.
func gcUnfinalize(ctx context.Context, cs kubernetes.Interface, ns string) error {
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range l.Items {
		if len(c.Finalizers) == 0 {
			continue
		}
		_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, c.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// TestGarbageCollectorBackgroundCascade: a three-level chain (ConfigMap
// root, Secret mid, ConfigMap and Pod leaves) whose root is deleted
// (background) before the collector starts goes entirely, each level
// once its owner is gone; an unrelated ConfigMap stays. Compared: the
// ConfigMaps, Secrets and Pods left and the event reasons (none expected).
func TestGarbageCollectorBackgroundCascade(t *testing.T) {
	compare(t, differential.Scenario{
		Name: "garbage collector deletes a chain in the background", Controller: garbagecollector.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			root, err := gcMake(ctx, cs, ns, "root", nil)
			if err != nil {
				return err
			}
			mid, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Name: "mid", OwnerReferences: []metav1.OwnerReference{gcRef(root, false)},
			}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			midRef := metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: mid.Name, UID: mid.UID}
			if _, err := gcMake(ctx, cs, ns, "leaf", nil, midRef); err != nil {
				return err
			}
			p := pod("leaf-pod", nil)
			p.OwnerReferences = []metav1.OwnerReference{midRef}
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "bystander", nil); err != nil {
				return err
			}
			return gcDelete(ctx, cs, ns, "root", metav1.DeletePropagationBackground)
		}),
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			objs, err := gcObserve(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for i := range secrets.Items {
				secrets.Items[i].Kind = "Secret"
				objs = append(objs, &secrets.Items[i])
			}
			pods, err := podsIn(ctx, cs, ns)
			return append(objs, pods...), err
		},
		Settled: func(state []map[string]any) bool {
			return slices.Equal(gcNames(state), []string{"bystander"}) && count(state, "Secret") == 0 && count(state, "Pod") == 0
		},
		Cleanup: deletePods,
	})
}

// TestGarbageCollectorForeground: the root is deleted in the foreground.
// Its dependent "a" (which has a blocking dependent of its own) is deleted
// in the foreground too, after its dependent; its dependent "held" is
// deleted but kept by a finalizer of the test's, so the root must stay,
// with its foregroundDeletion finalizer, for as long as "held" exists.
// Compared: the ConfigMaps left (root and held, with finalizers and owner
// references), the event reasons, and whether any owner was seen gone
// while a dependent of it still existed (never, on both sides).
//
// Every dependent here blocks its owner. A non-blocking one would make the
// scenario nondeterministic on both sides: KCM queues an owner's
// dependents when it sees the deletion start, and one whose add event
// arrives after that (informers deliver their initial objects in no set
// order) is only deleted once the owner is gone, never while "held" keeps
// the owner.
func TestGarbageCollectorForeground(t *testing.T) {
	compare(t, gcForegroundScenario(t))
}

func gcForegroundScenario(t *testing.T) differential.Scenario {
	const hold = "ctrlhost.io/test-hold"
	var mu sync.Mutex
	early := map[string]bool{} // namespace: an owner was gone before its dependents
	return differential.Scenario{
		Name: "garbage collector deletes dependents before a foreground owner", Controller: garbagecollector.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			root, err := gcMake(ctx, cs, ns, "root", nil)
			if err != nil {
				return err
			}
			a, err := gcMake(ctx, cs, ns, "a", nil, gcRef(root, true))
			if err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "a-child", nil, gcRef(a, true)); err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "held", []string{hold}, gcRef(root, true)); err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "bystander", nil); err != nil {
				return err
			}
			return gcDelete(ctx, cs, ns, "root", metav1.DeletePropagationForeground)
		},
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			have := map[string]bool{}
			for _, c := range l.Items {
				have[c.Name] = true
			}
			mu.Lock()
			defer mu.Unlock()
			if (!have["root"] && (have["a"] || have["held"] || have["a-child"])) || (!have["a"] && have["a-child"]) {
				early[ns] = true
			}
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			objs, err := gcObserve(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			return append(objs, &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{Kind: "Order"},
				ObjectMeta: metav1.ObjectMeta{Name: "order"},
				Data:       map[string]string{"ownerGoneBeforeDependents": fmt.Sprint(early[ns])},
			}), nil
		},
		Settled: func(state []map[string]any) bool {
			_, rootFinalized := gcHas(state, "root")
			return slices.Equal(gcNames(state), []string{"bystander", "held", "root"}) && rootFinalized
		},
		Cleanup: gcUnfinalize,
	}
}

// TestGarbageCollectorOrphan: while the collector runs, the root is
// deleted (once) with the orphan policy; its dependents lose their
// reference to it (keeping their other one) and stay, and the root goes.
// Compared: the ConfigMaps left with their owner references, and the event
// reasons.
func TestGarbageCollectorOrphan(t *testing.T) {
	var mu sync.Mutex
	deleted := map[string]bool{} // namespace: root deleted
	compare(t, differential.Scenario{
		Name: "garbage collector orphans dependents", Controller: garbagecollector.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			root, err := gcMake(ctx, cs, ns, "root", nil)
			if err != nil {
				return err
			}
			other, err := gcMake(ctx, cs, ns, "other-owner", nil)
			if err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "only-root", nil, gcRef(root, true)); err != nil {
				return err
			}
			_, err = gcMake(ctx, cs, ns, "two-owners", nil, gcRef(root, false), gcRef(other, false))
			return err
		},
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			mu.Lock()
			defer mu.Unlock()
			if deleted[ns] {
				return nil
			}
			if err := gcDelete(ctx, cs, ns, "root", metav1.DeletePropagationOrphan); err != nil {
				return err
			}
			deleted[ns] = true
			return nil
		},
		Observe: gcObserve,
		Settled: func(state []map[string]any) bool {
			refs, _ := gcHas(state, "only-root")
			return slices.Equal(gcNames(state), []string{"only-root", "other-owner", "two-owners"}) && !refs &&
				strings.Count(fmt.Sprint(state), "root") == 1 // only-root's own name: no reference to root is left
		},
	})
}

// TestGarbageCollectorDangling: references to owners that never existed.
// A ConfigMap whose only owner is absent is deleted; one with an absent
// and an existing owner loses the absent reference and stays. Compared:
// the ConfigMaps left with their owner references, and the event reasons.
func TestGarbageCollectorDangling(t *testing.T) {
	ghost := func(name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: uuid.NewUUID()}
	}
	compare(t, differential.Scenario{
		Name: "garbage collector handles dangling owners", Controller: garbagecollector.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			owner, err := gcMake(ctx, cs, ns, "real", nil)
			if err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "all-absent", nil, ghost("ghost-1")); err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "one-absent", nil, ghost("ghost-2"), gcRef(owner, false)); err != nil {
				return err
			}
			return nil
		},
		Observe: gcObserve,
		Settled: func(state []map[string]any) bool {
			return slices.Equal(gcNames(state), []string{"one-absent", "real"}) && !strings.Contains(fmt.Sprint(state), "ghost-2")
		},
	})
}

// TestGarbageCollectorOwnerInOtherNamespace: a ConfigMap names as owner a
// ConfigMap (with its real uid) of another namespace. Owner references
// are namespace-local, so the collector reports OwnerRefInvalidNamespace
// on the dependent and, the owner being absent from the dependent's
// namespace, deletes it. Compared: the ConfigMaps left and the event
// reasons ("ConfigMap OwnerRefInvalidNamespace").
//
// The event is reported whichever of the two objects the collector sees
// first: with the owner known, when the dependent is added; otherwise when
// the owner's add replaces the virtual node the dependent's reference
// made (see TestInvalidNamespaceOwnerEvent in the package's unit tests).
func TestGarbageCollectorOwnerInOtherNamespace(t *testing.T) {
	other := func(ns string) string { return "a-gc-" + ns }
	compare(t, differential.Scenario{
		Name: "garbage collector reports an owner in another namespace", Controller: garbagecollector.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other(ns)}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			foreign, err := gcMake(ctx, cs, other(ns), "foreign", nil)
			if err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "stray", nil, gcRef(foreign, false)); err != nil {
				return err
			}
			_, err = gcMake(ctx, cs, ns, "bystander", nil)
			return err
		},
		Observe: gcObserve,
		Settled: func(state []map[string]any) bool {
			return slices.Equal(gcNames(state), []string{"bystander"}) && differential.EventsOf(state) == "ConfigMap OwnerRefInvalidNamespace"
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			err := cs.CoreV1().Namespaces().Delete(ctx, other(ns), metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		},
	})
}

// TestGarbageCollectorClusterScopedDependent: a Node (cluster-scoped)
// names a ConfigMap of the scenario's namespace as its owner. Such a
// reference can never hold; the collector reports OwnerRefInvalidNamespace
// on the Node (its events go to the "default" namespace) and leaves the
// Node alone. Compared: the Node with its owner reference, and the event
// reasons recorded for it.
func TestGarbageCollectorClusterScopedDependent(t *testing.T) {
	nodeName := func(ns string) string { return "gc-" + ns }
	compare(t, differential.Scenario{
		Name: "garbage collector reports a cluster-scoped dependent of a namespaced owner", Controller: garbagecollector.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			own, err := gcMake(ctx, cs, ns, "owner", nil)
			if err != nil {
				return err
			}
			_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: nodeName(ns), OwnerReferences: []metav1.OwnerReference{gcRef(own, false)},
			}}, metav1.CreateOptions{})
			return err
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			objs, err := gcObserve(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			n, err := cs.CoreV1().Nodes().Get(ctx, nodeName(ns), metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			n.Kind = "Node"
			evs, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + nodeName(ns),
			})
			if err != nil {
				return nil, err
			}
			var reasons []string
			for _, e := range evs.Items {
				reasons = append(reasons, e.InvolvedObject.Kind+" "+e.Reason)
			}
			slices.Sort(reasons)
			return append(objs, n, &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{Kind: "NodeEventSummary"},
				ObjectMeta: metav1.ObjectMeta{Name: "node-events"},
				Data:       map[string]string{"reasons": strings.Join(slices.Compact(reasons), "\n")},
			}), nil
		},
		Settled: func(state []map[string]any) bool {
			return strings.Contains(fmt.Sprint(state), "Node OwnerRefInvalidNamespace")
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			err := cs.CoreV1().Nodes().Delete(ctx, nodeName(ns), metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		},
	})
}

// gcCRD is a namespaced custom resource "widgets" of a group named after
// the namespace.
func gcCRD(ns string) (group string, body []byte) {
	group = ns + ".gc.ctrlhost.io"
	return group, []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.` + group + `"},
"spec":{"group":"` + group + `","scope":"Namespaced",
"names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
"versions":[{"name":"v1","served":true,"storage":true,
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
}

// gcWidget is a Widget named name with the given owner references.
func gcWidget(group, name string, refs ...metav1.OwnerReference) []byte {
	w := map[string]any{
		"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "ownerReferences": refs},
	}
	b, _ := json.Marshal(w)
	return b
}

// TestGarbageCollectorNewResource: once the collector runs (it has deleted
// a canary ConfigMap whose owner is absent), a CustomResourceDefinition
// appears; the collector's next discovery round
// (every 30 s) watches its resource (through a metadata informer, there
// being no typed one), and then collects its objects: a Widget whose only
// owner is absent is deleted; one with an absent and an existing owner
// loses the absent reference through a JSON merge patch (custom resources
// take no strategic merge patch). Compared: the Widgets left with their
// owner references, and the event reasons.
func TestGarbageCollectorNewResource(t *testing.T) {
	var mu sync.Mutex
	made := map[string]bool{} // namespace: the widgets exist
	compare(t, differential.Scenario{
		Name: "garbage collector watches a resource that appears", Controller: garbagecollector.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := gcMake(ctx, cs, ns, "owner", nil); err != nil {
				return err
			}
			_, err := gcMake(ctx, cs, ns, "canary", nil, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "ghost", UID: uuid.NewUUID()})
			return err
		},
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			mu.Lock()
			defer mu.Unlock()
			if made[ns] {
				return nil
			}
			// The collector has discovered and synced once the canary
			// (whose owner is absent) is gone: only then does the resource
			// appear, so that a later discovery round must find it.
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "canary", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return err
			}
			rc := cs.Discovery().RESTClient()
			group, crd := gcCRD(ns)
			err := rc.Post().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").Body(crd).Do(ctx).Error()
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			owner, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ghost := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "ghost", UID: uuid.NewUUID()}
			path := "/apis/" + group + "/v1/namespaces/" + ns + "/widgets"
			for name, refs := range map[string][]metav1.OwnerReference{
				"all-absent": {ghost}, "one-absent": {ghost, gcRef(owner, false)},
			} {
				err := rc.Post().AbsPath(path).Body(gcWidget(group, name, refs...)).Do(ctx).Error()
				if err != nil && !apierrors.IsAlreadyExists(err) {
					return err // the resource is not served yet: next poll
				}
			}
			made[ns] = true
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			objs, err := gcObserve(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			group, _ := gcCRD(ns)
			raw, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/" + group + "/v1/namespaces/" + ns + "/widgets").Do(ctx).Raw()
			if err != nil {
				return objs, nil // not served yet
			}
			var l unstructured.UnstructuredList
			if err := l.UnmarshalJSON(raw); err != nil {
				return nil, err
			}
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
			return objs, nil
		},
		Settled: func(state []map[string]any) bool {
			var widgets []string
			for _, o := range state {
				if o["kind"] == "Widget" {
					widgets = append(widgets, nameOfState(o))
				}
			}
			return slices.Equal(widgets, []string{"one-absent"}) && !strings.Contains(fmt.Sprint(state), "ghost") &&
				slices.Equal(gcNames(state), []string{"owner"})
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			group, _ := gcCRD(ns)
			err := cs.Discovery().RESTClient().Delete().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets." + group).Do(ctx).Error()
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		},
	})
}
