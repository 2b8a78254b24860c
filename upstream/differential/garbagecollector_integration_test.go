//go:build integration

package differential_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/garbagecollector"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

func init() {
	moreNatives = append(moreNatives, func(*testenv.Env) descriptor.Descriptor {
		return garbagecollector.Descriptor(garbagecollector.NewOptions())
	})
}

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
	summary, err := eventSummary(ctx, cs, ns)
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

// TestGarbageCollectorBackgroundCascade: a three-level chain whose root is
// deleted (background) before the collector starts goes entirely; an
// unrelated ConfigMap stays. Compared: the ConfigMaps left and the event
// reasons (none expected).
func TestGarbageCollectorBackgroundCascade(t *testing.T) {
	compare(t, differential.Scenario{
		Name: "garbage collector deletes a chain in the background", Controller: garbagecollector.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			root, err := gcMake(ctx, cs, ns, "root", nil)
			if err != nil {
				return err
			}
			mid, err := gcMake(ctx, cs, ns, "mid", nil, gcRef(root, false))
			if err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "leaf", nil, gcRef(mid, false)); err != nil {
				return err
			}
			if _, err := gcMake(ctx, cs, ns, "bystander", nil); err != nil {
				return err
			}
			return gcDelete(ctx, cs, ns, "root", metav1.DeletePropagationBackground)
		},
		Observe: gcObserve,
		Settled: func(state []map[string]any) bool { return slices.Equal(gcNames(state), []string{"bystander"}) },
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
func TestGarbageCollectorForeground(t *testing.T) {
	const hold = "ctrlhost.io/test-hold"
	var mu sync.Mutex
	early := map[string]bool{} // namespace: an owner was gone before its dependents
	compare(t, differential.Scenario{
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
	})
}

// TestGarbageCollectorOrphan: the root is deleted with the orphan policy;
// its dependents lose their reference to it and stay, and the root goes.
// Compared: the ConfigMaps left, without owner references, and the event
// reasons.
func TestGarbageCollectorOrphan(t *testing.T) {
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
			if _, err := gcMake(ctx, cs, ns, "two-owners", nil, gcRef(root, false), gcRef(other, false)); err != nil {
				return err
			}
			return gcDelete(ctx, cs, ns, "root", metav1.DeletePropagationOrphan)
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
// The owner's namespace sorts before the scenario's, so the collector's
// first list shows the owner before the dependent on both sides (the
// event is only reported when the owner is known to the graph).
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
			return slices.Equal(gcNames(state), []string{"bystander"}) && eventsOf(state) == "ConfigMap OwnerRefInvalidNamespace"
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
