//go:build integration

package differential_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/namespace"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// The namespace scenarios never delete the harness's namespace: each
// makes a child namespace of its own, labelled with the harness's, fills
// it, and deletes it from Act once the controller runs.
const (
	nsParentLabel   = "ctrlhost.io/differential-parent"
	nsHoldFinalizer = "example.com/hold"
)

func nsChildSelector(ns string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: nsParentLabel + "=" + ns}
}

// nsChildren lists the scenario's child namespaces (none once deleted).
func nsChildren(ctx context.Context, cs kubernetes.Interface, ns string) ([]corev1.Namespace, error) {
	l, err := cs.CoreV1().Namespaces().List(ctx, nsChildSelector(ns))
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// nsSetupChild makes the child namespace and its mixed content: a default
// ServiceAccount (which pods need), config maps (hold, when set, carries
// a finalizer nobody removes), a secret, a headless service, a pod (never
// scheduled: no scheduler runs), and a role.
func nsSetupChild(hold bool) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		child, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			GenerateName: "nschild-", Labels: map[string]string{nsParentLabel: ns},
		}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		c := child.Name
		meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: c} }
		creates := []func() error{
			func() error {
				_, err := cs.CoreV1().ServiceAccounts(c).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta("default")}, metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := cs.CoreV1().ServiceAccounts(c).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta("robot")}, metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := cs.CoreV1().ConfigMaps(c).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta("settings"), Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := cs.CoreV1().ConfigMaps(c).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta("more")}, metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := cs.CoreV1().Secrets(c).Create(ctx, &corev1.Secret{ObjectMeta: meta("creds"), StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
				return err
			},
			func() error {
				// Headless: a cluster IP would bring the API server's
				// allocator repair loop, whose events come when they like.
				_, err := cs.CoreV1().Services(c).Create(ctx, &corev1.Service{ObjectMeta: meta("web"), Spec: corev1.ServiceSpec{
					ClusterIP: corev1.ClusterIPNone,
					Selector:  map[string]string{"app": "web"},
					Ports:     []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
				}}, metav1.CreateOptions{})
				return err
			},
			func() error {
				p := pod("web", map[string]string{"app": "web"})
				_, err := cs.CoreV1().Pods(c).Create(ctx, p, metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := cs.RbacV1().Roles(c).Create(ctx, &rbacv1.Role{ObjectMeta: meta("reader"), Rules: []rbacv1.PolicyRule{{
					APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"},
				}}}, metav1.CreateOptions{})
				return err
			},
		}
		if hold {
			creates = append(creates, func() error {
				m := meta("held")
				m.Finalizers = []string{nsHoldFinalizer}
				_, err := cs.CoreV1().ConfigMaps(c).Create(ctx, &corev1.ConfigMap{ObjectMeta: m}, metav1.CreateOptions{})
				return err
			})
		}
		for _, create := range creates {
			if err := create(); err != nil {
				return fmt.Errorf("namespace %s: %w", c, err)
			}
		}
		return nil
	}
}

// nsDeleteChildren deletes the child namespaces not being deleted yet: once,
// since a deleted namespace keeps its deletionTimestamp until it is gone.
func nsDeleteChildren(ctx context.Context, cs kubernetes.Interface, ns string) error {
	kids, err := nsChildren(ctx, cs, ns)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if k.DeletionTimestamp != nil {
			continue
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, k.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// nsReleaseHeld removes the hold finalizer from the child namespaces' config
// maps.
func nsReleaseHeld(ctx context.Context, cs kubernetes.Interface, ns string) error {
	kids, err := nsChildren(ctx, cs, ns)
	if err != nil {
		return err
	}
	for _, k := range kids {
		cms, err := cs.CoreV1().ConfigMaps(k.Name).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, cm := range cms.Items {
			if !slices.Contains(cm.Finalizers, nsHoldFinalizer) {
				continue
			}
			_, err := cs.CoreV1().ConfigMaps(k.Name).Patch(ctx, cm.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// nsObserve returns the child namespaces (phase, finalizers, conditions
// with status, reason and message; a message naming the child namespace,
// whose name is generated, has it replaced by <child>), a summary of what
// is left in them (kind, name, being deleted, finalizers: enough to tell
// the two sides apart, without the fields the API server fills in
// differently each run), and the "kind reason" pairs of the events in
// them and in the harness's namespace.
func nsObserve(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	return nsObserveExtra(ctx, cs, ns, nil)
}

// nsObserveExtra is nsObserve with more content described by extra (given
// a child namespace's name), when set.
func nsObserveExtra(ctx context.Context, cs kubernetes.Interface, ns string, extra func(context.Context, string) ([]string, error)) ([]runtime.Object, error) {
	kids, err := nsChildren(ctx, cs, ns)
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	var left, reasons []string
	for i := range kids {
		k := &kids[i]
		k.Kind = "Namespace"
		// Messages may name the namespace (generated, so different on each
		// side): it becomes <child>.
		for j := range k.Status.Conditions {
			k.Status.Conditions[j].Message = strings.ReplaceAll(k.Status.Conditions[j].Message, k.Name, "<child>")
		}
		out = append(out, k)
		l, r, err := nsContent(ctx, cs, k.Name)
		if err != nil {
			return nil, err
		}
		left = append(left, l...)
		reasons = append(reasons, r...)
		if extra != nil {
			more, err := extra(ctx, k.Name)
			if err != nil {
				return nil, err
			}
			left = append(left, more...)
		}
	}
	_, r, err := nsContent(ctx, cs, ns)
	if err != nil {
		return nil, err
	}
	reasons = append(reasons, r...)
	slices.Sort(left)
	slices.Sort(reasons)
	out = append(out, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "Summary"},
		ObjectMeta: metav1.ObjectMeta{Name: "children"},
		Data: map[string]string{
			"namespaces": fmt.Sprint(len(kids)),
			"left":       strings.Join(left, "\n"),
			"events":     strings.Join(slices.Compact(reasons), "\n"),
		},
	})
	return out, nil
}

// nsContent describes the content of namespace c that the scenarios
// made, and lists its events' "kind reason" pairs.
func nsContent(ctx context.Context, cs kubernetes.Interface, c string) (left, reasons []string, err error) {
	describe := func(kind string, m metav1.ObjectMeta) {
		left = append(left, fmt.Sprintf("%s %s deleting=%v finalizers=%v", kind, m.Name, m.DeletionTimestamp != nil, m.Finalizers))
	}
	cms, err := cs.CoreV1().ConfigMaps(c).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, o := range cms.Items {
		describe("ConfigMap", o.ObjectMeta)
	}
	secrets, err := cs.CoreV1().Secrets(c).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, o := range secrets.Items {
		describe("Secret", o.ObjectMeta)
	}
	svcs, err := cs.CoreV1().Services(c).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, o := range svcs.Items {
		describe("Service", o.ObjectMeta)
	}
	pods, err := cs.CoreV1().Pods(c).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, o := range pods.Items {
		describe("Pod", o.ObjectMeta)
	}
	sas, err := cs.CoreV1().ServiceAccounts(c).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, o := range sas.Items {
		describe("ServiceAccount", o.ObjectMeta)
	}
	roles, err := cs.RbacV1().Roles(c).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	for _, o := range roles.Items {
		describe("Role", o.ObjectMeta)
	}
	reasons, err = differential.EventReasons(ctx, cs, c, nil)
	if err != nil {
		return nil, nil, err
	}
	return left, reasons, nil
}

// nsSummary reads a field of the Summary object of a normalised state.
func nsSummary(state []map[string]any, field string) string {
	for _, o := range state {
		if o["kind"] == "Summary" {
			d, _ := o["data"].(map[string]any)
			return fmt.Sprint(d[field])
		}
	}
	return ""
}

// nsCondition returns "Status Reason" of the first child namespace's
// condition t in a normalised state ("" when absent).
func nsCondition(state []map[string]any, t string) string {
	for _, o := range state {
		if o["kind"] != "Namespace" {
			continue
		}
		st, _ := o["status"].(map[string]any)
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == t {
				return fmt.Sprint(cm["status"], " ", cm["reason"])
			}
		}
	}
	return ""
}

// nsCleanup releases what holds the child namespaces, so that the
// next side's namespace controller can finish them.
func nsCleanup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if err := nsDeleteChildren(ctx, cs, ns); err != nil {
		return err
	}
	return nsReleaseHeld(ctx, cs, ns)
}

// TestNamespaceDeletionMixedContent: a deleted namespace with config maps,
// a secret, a service, a pod, service accounts and a role is emptied and
// goes; compared: the child namespaces left (none), what is left in them
// (nothing) and the event reasons.
func TestNamespaceDeletionMixedContent(t *testing.T) {
	compare(t, differential.Scenario{
		Name:       "namespace deletion with mixed content",
		Controller: namespace.Name,
		Setup:      nsSetupChild(false),
		Act:        nsDeleteChildren,
		Observe:    nsObserve,
		Settled:    func(s []map[string]any) bool { return nsSummary(s, "namespaces") == "0" },
		Cleanup:    nsCleanup,
	})
}

// TestNamespaceDeletionHeldByFinalizer: a config map with a finalizer
// nobody removes keeps the namespace Terminating; compared: the namespace
// (phase, spec.finalizers, every condition with status, reason and
// message: "configmaps. has 1 resource instances", "example.com/hold in 1
// resource instances"), what is left (the held config map only, being
// deleted) and the event reasons.
func TestNamespaceDeletionHeldByFinalizer(t *testing.T) {
	res := compare(t, differential.Scenario{
		Name:       "namespace deletion held by a finalizer",
		Controller: namespace.Name,
		Setup:      nsSetupChild(true),
		Act:        nsDeleteChildren,
		Observe:    nsObserve,
		Settled: func(s []map[string]any) bool {
			return nsCondition(s, string(corev1.NamespaceFinalizersRemaining)) == "True SomeFinalizersRemain" &&
				nsSummary(s, "left") == "ConfigMap held deleting=true finalizers=[example.com/hold]"
		},
		Cleanup: nsCleanup,
	})
	b, _ := json.MarshalIndent(res.Native, "", "  ")
	t.Logf("end state:\n%s", b)
}

// TestNamespaceDeletionFinalizerReleased: as above, but Act removes the
// finalizer once NamespaceFinalizersRemaining shows it; the controller's
// requeue after its estimate then empties and finalizes the namespace.
// Compared: no child namespace left, nothing in it, the event reasons.
func TestNamespaceDeletionFinalizerReleased(t *testing.T) {
	compare(t, differential.Scenario{
		Name:       "namespace deletion after a finalizer is released",
		Controller: namespace.Name,
		Setup:      nsSetupChild(true),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := nsDeleteChildren(ctx, cs, ns); err != nil {
				return err
			}
			kids, err := nsChildren(ctx, cs, ns)
			if err != nil {
				return err
			}
			for _, k := range kids {
				for _, c := range k.Status.Conditions {
					if c.Type == corev1.NamespaceFinalizersRemaining && c.Status == corev1.ConditionTrue {
						return nsReleaseHeld(ctx, cs, ns)
					}
				}
			}
			return nil
		},
		Observe: nsObserve,
		Settled: func(s []map[string]any) bool { return nsSummary(s, "namespaces") == "0" },
		Cleanup: nsCleanup,
	})
}

// nsWidgets is a namespaced custom resource of a group named after the
// harness's namespace, so that each side has its own.
func nsWidgets(ns string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: ns + ".example.com", Version: "v1", Resource: "widgets"}
}

// nsCreateWidgetCRD creates the widgets CRD and waits until discovery
// serves it (the namespace controllers find resources through discovery).
func nsCreateWidgetCRD(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface, ns string) error {
	w := nsWidgets(ns)
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": w.Resource + "." + w.Group},
		"spec": map[string]any{
			"group": w.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if _, err := dyn.Resource(nsCRDs).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		rl, err := cs.Discovery().ServerResourcesForGroupVersion(w.GroupVersion().String())
		if err != nil {
			return false, nil
		}
		for _, r := range rl.APIResources {
			if r.Name == w.Resource {
				return true, nil
			}
		}
		return false, nil
	})
}

var nsCRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestNamespaceDeletionCustomResources: custom resources are found through
// discovery and deleted with the rest; one with a finalizer holds the
// namespace. Compared: the namespace (conditions naming
// widgets.<ns>.example.com), what is left (the held widget only) and the
// event reasons.
func TestNamespaceDeletionCustomResources(t *testing.T) {
	dyn, err := dynamic.NewForConfig(env(t).Config())
	if err != nil {
		t.Fatal(err)
	}
	// w describes the child's widgets (the scenario's side is ns).
	w := func(ns string) func(ctx context.Context, child string) ([]string, error) {
		return func(ctx context.Context, child string) ([]string, error) {
			l, err := dyn.Resource(nsWidgets(ns)).Namespace(child).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var out []string
			for _, o := range l.Items {
				out = append(out, fmt.Sprintf("Widget %s deleting=%v finalizers=%v", o.GetName(), o.GetDeletionTimestamp() != nil, o.GetFinalizers()))
			}
			return out, nil
		}
	}
	compare(t, differential.Scenario{
		Name:       "namespace deletion with custom resources",
		Controller: namespace.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := nsCreateWidgetCRD(ctx, dyn, cs, ns); err != nil {
				return fmt.Errorf("widget CRD: %w", err)
			}
			if err := nsSetupChild(false)(ctx, cs, ns); err != nil {
				return err
			}
			kids, err := nsChildren(ctx, cs, ns)
			if err != nil {
				return err
			}
			for _, k := range kids {
				for name, finalizers := range map[string][]any{"free": nil, "held": {nsHoldFinalizer}} {
					md := map[string]any{"name": name}
					if finalizers != nil {
						md["finalizers"] = finalizers
					}
					obj := &unstructured.Unstructured{Object: map[string]any{
						"apiVersion": nsWidgets(ns).GroupVersion().String(), "kind": "Widget", "metadata": md,
					}}
					if _, err := dyn.Resource(nsWidgets(ns)).Namespace(k.Name).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
						return err
					}
				}
			}
			return nil
		},
		Act: nsDeleteChildren,
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			return nsObserveExtra(ctx, cs, ns, w(ns))
		},
		Settled: func(s []map[string]any) bool {
			return nsCondition(s, string(corev1.NamespaceFinalizersRemaining)) == "True SomeFinalizersRemain" &&
				nsSummary(s, "left") == "Widget held deleting=true finalizers=[example.com/hold]"
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := nsDeleteChildren(ctx, cs, ns); err != nil {
				return err
			}
			kids, err := nsChildren(ctx, cs, ns)
			if err != nil {
				return err
			}
			for _, k := range kids {
				_, err := dyn.Resource(nsWidgets(ns)).Namespace(k.Name).Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			w := nsWidgets(ns)
			err = dyn.Resource(nsCRDs).Delete(ctx, w.Resource+"."+w.Group, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		},
	})
}

var nsAPIServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// nsBrokenGroup is an aggregated API group, named after the harness's
// namespace, whose server does not exist: discovery of it fails.
func nsBrokenGroup(ns string) schema.GroupVersion {
	return schema.GroupVersion{Group: ns + ".broken.example.com", Version: "v1"}
}

// TestNamespaceDeletionPartialDiscovery: an aggregated API whose server is
// missing makes discovery fail for its group; the content of every other
// resource is still deleted, the failure is reported, and the namespace is
// not finalized (it could hold objects of the missing group). Compared: the
// namespace (NamespaceDeletionDiscoveryFailure True, DiscoveryFailed, with
// KCM's message naming the failing group), what is left (nothing) and the
// event reasons.
func TestNamespaceDeletionPartialDiscovery(t *testing.T) {
	dyn, err := dynamic.NewForConfig(env(t).Config())
	if err != nil {
		t.Fatal(err)
	}
	res := compare(t, differential.Scenario{
		Name:       "namespace deletion with partial discovery",
		Controller: namespace.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			gv := nsBrokenGroup(ns)
			svc := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
				"metadata": map[string]any{"name": gv.Version + "." + gv.Group},
				"spec": map[string]any{
					"group": gv.Group, "version": gv.Version,
					"service":               map[string]any{"namespace": ns, "name": "nowhere", "port": int64(443)},
					"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
				},
			}}
			if _, err := dyn.Resource(nsAPIServices).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("APIService: %w", err)
			}
			// Wait until discovery reports the group as failing.
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				_, err := cs.Discovery().ServerPreferredNamespacedResources()
				return err != nil, nil
			}); err != nil {
				return fmt.Errorf("waiting for discovery to fail for %s: %w", gv, err)
			}
			return nsSetupChild(false)(ctx, cs, ns)
		},
		Act:     nsDeleteChildren,
		Observe: nsObserve,
		Settled: func(s []map[string]any) bool {
			return nsCondition(s, string(corev1.NamespaceDeletionDiscoveryFailure)) == "True DiscoveryFailed" &&
				nsSummary(s, "left") == "" && nsSummary(s, "namespaces") == "1"
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			gv := nsBrokenGroup(ns)
			err := dyn.Resource(nsAPIServices).Delete(ctx, gv.Version+"."+gv.Group, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nsCleanup(ctx, cs, ns)
		},
	})
	t.Logf("discovery failure: %s", nsConditionMessage(res.Native, string(corev1.NamespaceDeletionDiscoveryFailure)))
}

// nsConditionMessage returns the message of the first child namespace's
// condition t in a normalised state.
func nsConditionMessage(state []map[string]any, t string) string {
	for _, o := range state {
		st, _ := o["status"].(map[string]any)
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			if cm, _ := c.(map[string]any); cm["type"] == t {
				return fmt.Sprint(cm["message"])
			}
		}
	}
	return ""
}

// TestNamespaceDeletionGracefulPod: a pod bound to a node is deleted
// gracefully and, with no kubelet, stays; while it is within its 10s grace
// period nothing else is deleted (the config maps stay) and the namespace
// is requeued after the estimate; past it, the pod still there is reported
// in NamespaceDeletionContentFailure ("unexpected items still remain ...
// for gvr: /v1, Resource=pods"). Compared: the namespace with its
// conditions (KCM leaves NamespaceContentRemaining at its "ok" variant
// while pods remain), what is left and the event reasons.
func TestNamespaceDeletionGracefulPod(t *testing.T) {
	res := compare(t, differential.Scenario{
		Name:       "namespace deletion with a pod terminating gracefully",
		Controller: namespace.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := nsSetupChild(false)(ctx, cs, ns); err != nil {
				return err
			}
			kids, err := nsChildren(ctx, cs, ns)
			if err != nil {
				return err
			}
			for _, k := range kids {
				p := pod("bound", nil)
				p.Spec.NodeName = "nowhere"
				p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
				if _, err := cs.CoreV1().Pods(k.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		Act:     nsDeleteChildren,
		Observe: nsObserve,
		Settled: func(s []map[string]any) bool {
			return nsCondition(s, string(corev1.NamespaceDeletionContentFailure)) == "True ContentDeletionFailed" &&
				strings.Contains(nsSummary(s, "left"), "Pod bound deleting=true")
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := nsCleanup(ctx, cs, ns); err != nil {
				return err
			}
			kids, err := nsChildren(ctx, cs, ns)
			if err != nil {
				return err
			}
			for _, k := range kids {
				err := cs.CoreV1().Pods(k.Name).Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		},
	})
	t.Logf("content failure: %s", nsConditionMessage(res.Native, string(corev1.NamespaceDeletionContentFailure)))
}
