package namespace

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// TestDeleteOrderAndFinalize: one pass over a namespace whose content all
// goes at once deletes pods first, then every other deletable resource in
// order, each by collection where discovery lists deletecollection, else
// listed and deleted one by one; it then removes the kubernetes finalizer
// through the finalize subresource and leaves the "ok" conditions.
func TestDeleteOrderAndFinalize(t *testing.T) {
	f := newFixture(t, namespace(time.Minute),
		obj(configMaps, "cm"), obj(secrets, "s"), pod("p", 30, false),
		obj(widgets, "w1"), obj(widgets, "w2"), obj(gadgets, "g"))
	if err := f.d.delete(controllertest.LogContext(t), "ns"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	want := []string{
		"deletecollection pods", "list pods",
		"deletecollection configmaps", "list configmaps",
		"deletecollection secrets", "list secrets",
		// gadgets: no deletecollection, no list: nothing to find.
		"list widgets", "delete widgets/w1", "delete widgets/w2", "list widgets",
	}
	if !slices.Equal(f.meta.calls, want) {
		t.Errorf("calls\n %q\nwant\n %q", f.meta.calls, want)
	}
	if got := f.meta.left(); !slices.Equal(got, []string{"gadgets/g"}) {
		t.Errorf("left %v, want only the gadget nobody can list", got)
	}
	if got := f.finalizeCalls(); len(got) != 1 || len(got[0]) != 0 {
		t.Errorf("finalize calls %v, want one with no finalizers", got)
	}
	ns := f.ns(t)
	if ns.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("phase %q, want Terminating", ns.Status.Phase)
	}
	if got := conditions(ns); !slices.Equal(got, okConds) {
		t.Errorf("conditions\n %q\nwant\n %q", got, okConds)
	}
}

// TestPass covers one pass each: what it returns, what it leaves in the
// conditions, whether it finalizes.
func TestPass(t *testing.T) {
	boom := apierrors.NewInternalError(errors.New("boom"))
	tests := []struct {
		name        string
		ns          *corev1.Namespace
		objs        []object
		lists       []*metav1.APIResourceList // nil: resources()
		discoverErr error
		errs        map[string]error
		wantEstim   int64 // a *contentRemainingError with this estimate
		wantErr     string
		wantConds   []string // nil: none set
		wantFinal   [][]corev1.FinalizerName
		wantLeft    []string
	}{
		{
			name:     "not being deleted: untouched",
			ns:       namespace(0, func(ns *corev1.Namespace) { ns.DeletionTimestamp = nil }),
			objs:     []object{obj(configMaps, "cm")},
			wantLeft: []string{"configmaps/cm"},
		},
		{name: "gone: nothing to do"},
		{
			name:     "no finalizers left: only marked Terminating",
			ns:       namespace(0, func(ns *corev1.Namespace) { ns.Spec.Finalizers = nil }),
			objs:     []object{obj(configMaps, "cm")},
			wantLeft: []string{"configmaps/cm"},
		},
		{
			name: "other finalizers are kept, sorted, once",
			ns: namespace(0, func(ns *corev1.Namespace) {
				ns.Spec.Finalizers = []corev1.FinalizerName{
					"z.example/f",
					corev1.FinalizerKubernetes,
					"a.example/f",
					"z.example/f",
				}
			}),
			wantConds: okConds,
			wantFinal: [][]corev1.FinalizerName{{"a.example/f", "z.example/f"}},
		},
		{name: "pod within its grace period: nothing else deleted, requeued by the estimate",
			ns: namespace(
				10 * time.Second,
			), objs: []object{pod("p", 30, true), obj(configMaps, "cm")},
			wantEstim: 30, wantConds: okConds, wantLeft: []string{"pods/p", "configmaps/cm"}},
		{name: "terminal pods do not count in the estimate", ns: namespace(10 * time.Second),
			objs: []object{
				pod("p", 30, false),
			}, wantConds: okConds, wantFinal: [][]corev1.FinalizerName{{}}},
		{name: "pod past its grace period and still there: unexpected",
			ns: namespace(time.Minute), objs: []object{pod("p", 30, true), obj(configMaps, "cm")},
			wantErr: "failed to delete pods for namespace: ns, err: unexpected items still remain in namespace: ns for gvr: /v1, Resource=pods",
			wantConds: withConds(
				"NamespaceDeletionContentFailure True ContentDeletionFailed: Failed to delete all resource types, 1 remaining: unexpected items still remain in namespace: ns for gvr: /v1, Resource=pods",
			),
			wantLeft: []string{"pods/p", "configmaps/cm"}},
		{name: "finalizers hold content: remaining, estimated 15s",
			ns: namespace(
				time.Minute,
			), objs: []object{obj(configMaps, "cm", "example.com/block"), obj(widgets, "w", "example.com/block", "example.com/other"), obj(secrets, "s")},
			wantEstim: finalizerSeconds,
			wantConds: withConds(
				"NamespaceContentRemaining True SomeResourcesRemain: Some resources are remaining: configmaps. has 1 resource instances, widgets.example.com has 1 resource instances",
				"NamespaceFinalizersRemaining True SomeFinalizersRemain: Some content in the namespace has finalizers remaining: example.com/block in 2 resource instances, example.com/other in 1 resource instances",
			),
			wantLeft: []string{"configmaps/cm", "widgets/w"}},
		{name: "one resource failing does not stop the others",
			ns: namespace(
				time.Minute,
			), objs: []object{obj(configMaps, "cm"), obj(secrets, "s"), obj(widgets, "w")},
			errs:    map[string]error{"deletecollection configmaps": boom},
			wantErr: "Internal error occurred: boom",
			wantConds: withConds(
				"NamespaceDeletionContentFailure True ContentDeletionFailed: Failed to delete all resource types, 1 remaining: Internal error occurred: boom",
			),
			wantLeft: []string{"configmaps/cm"}},
		{name: "deletecollection not allowed after all: deleted one by one",
			ns: namespace(time.Minute), objs: []object{obj(secrets, "s")},
			errs: map[string]error{
				"deletecollection secrets": apierrors.NewMethodNotSupported(
					secrets.GroupResource(),
					"deletecollection",
				),
			},
			wantConds: okConds, wantFinal: [][]corev1.FinalizerName{{}}},
		{name: "partial discovery: the rest is deleted, the failure reported, not finalized",
			ns: namespace(time.Minute), objs: []object{obj(configMaps, "cm")},
			discoverErr: &discovery.ErrGroupDiscoveryFailed{
				Groups: map[schema.GroupVersion]error{
					{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("down"),
				},
			},
			wantErr: "unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: down",
			wantConds: withConds(
				"NamespaceDeletionDiscoveryFailure True DiscoveryFailed: Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: down",
			)},
		{name: "discovery failed altogether",
			ns: namespace(time.Minute), objs: []object{obj(configMaps, "cm")},
			lists: []*metav1.APIResourceList{}, discoverErr: errors.New("connection refused"),
			wantErr: "connection refused",
			wantConds: withConds(
				"NamespaceDeletionDiscoveryFailure True DiscoveryFailed: connection refused",
			),
			wantLeft: []string{"configmaps/cm"}},
		{name: "a group version that does not parse: nothing deleted",
			ns: namespace(time.Minute), objs: []object{obj(configMaps, "cm")},
			lists: append(
				resources(),
				&metav1.APIResourceList{
					GroupVersion: "a/b/c",
					APIResources: []metav1.APIResource{
						{Name: "xs", Namespaced: true, Verbs: allVerbs},
					},
				},
			),
			wantErr: "unexpected GroupVersion string: a/b/c",
			wantConds: withConds(
				"NamespaceDeletionGroupVersionParsingFailure True GroupVersionParsingFailed: unexpected GroupVersion string: a/b/c",
			),
			wantLeft: []string{"configmaps/cm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.ns, tt.objs...)
			if tt.lists != nil {
				f.lists = tt.lists
			}
			f.discoverErr = tt.discoverErr
			for k, v := range tt.errs {
				f.meta.errs[k] = v
			}
			err := f.d.delete(controllertest.LogContext(t), "ns")
			var rem *contentRemainingError
			switch {
			case tt.wantEstim != 0:
				if !errors.As(err, &rem) || rem.estimate != tt.wantEstim {
					t.Errorf("error %v, want content remaining for %ds", err, tt.wantEstim)
				}
			case tt.wantErr != "":
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("error %v, want %q", err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("error %v, want none", err)
			}
			if got := f.finalizeCalls(); !slices.EqualFunc(got, tt.wantFinal, slices.Equal) {
				t.Errorf("finalize calls %v, want %v", got, tt.wantFinal)
			}
			if got := f.meta.left(); !slices.Equal(got, tt.wantLeft) {
				t.Errorf("left %v, want %v", got, tt.wantLeft)
			}
			if tt.ns == nil {
				return
			}
			ns := f.ns(t)
			if got := conditions(ns); !slices.Equal(got, tt.wantConds) {
				t.Errorf("conditions\n %q\nwant\n %q", got, tt.wantConds)
			}
			if tt.ns.DeletionTimestamp != nil && ns.Status.Phase != corev1.NamespaceTerminating {
				t.Errorf("phase %q, want Terminating", ns.Status.Phase)
			}
		})
	}
}

// TestConditionsAcrossPasses: a finalizer holds a config map; the pass
// reports it; once the finalizer is gone the next pass sets the conditions
// back to "ok" (new lastTransitionTime only where the status changed) and
// finalizes.
func TestConditionsAcrossPasses(t *testing.T) {
	f := newFixture(
		t,
		namespace(time.Minute),
		obj(configMaps, "cm", "example.com/block"),
		obj(secrets, "s"),
	)
	ctx := controllertest.LogContext(t)
	var rem *contentRemainingError
	if err := f.d.delete(ctx, "ns"); !errors.As(err, &rem) || rem.estimate != 15 {
		t.Fatalf("first pass: %v, want content remaining for 15s", err)
	}
	first := f.ns(t)
	if got := len(f.finalizeCalls()); got != 0 {
		t.Fatalf("finalized %d times while content remains", got)
	}
	// A pass that changes nothing writes nothing.
	writes := controllertest.CountActions(f.client, "update", "namespaces")
	if err := f.d.delete(ctx, "ns"); !errors.As(err, &rem) {
		t.Fatalf("second pass: %v, want content remaining", err)
	}
	if got := controllertest.CountActions(f.client, "update", "namespaces"); got != writes {
		t.Errorf("an unchanged pass wrote the namespace %d times", got-writes)
	}

	f.clock.Step(time.Minute)
	f.meta.removeFinalizers(configMaps, "cm")
	if err := f.d.delete(ctx, "ns"); err != nil {
		t.Fatalf("third pass: %v", err)
	}
	if got := f.finalizeCalls(); len(got) != 1 {
		t.Fatalf("finalize calls %v, want one", got)
	}
	last := f.ns(t)
	if got := conditions(last); !slices.Equal(got, okConds) {
		t.Errorf("conditions\n %q\nwant\n %q", got, okConds)
	}
	for i, c := range last.Status.Conditions {
		was := first.Status.Conditions[i]
		changed := c.Status != was.Status
		if moved := !c.LastTransitionTime.Equal(&was.LastTransitionTime); moved != changed {
			t.Errorf(
				"%s: lastTransitionTime %v -> %v with status %s -> %s",
				c.Type,
				was.LastTransitionTime,
				c.LastTransitionTime,
				was.Status,
				c.Status,
			)
		}
	}
}

// TestConflictsRetried: a status update that conflicts is retried on a
// fresh copy; a namespace replaced meanwhile (new UID) is an error.
func TestConflictsRetried(t *testing.T) {
	for _, replaced := range []bool{false, true} {
		f := newFixture(t, namespace(time.Minute))
		conflicts := 0
		f.client.PrependReactor(
			"update",
			"namespaces",
			func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" || conflicts > 0 {
					return false, nil, nil
				}
				conflicts++
				if replaced {
					ns := namespace(time.Minute)
					ns.UID = "uid-other"
					if err := f.client.Tracker().Update(namespacesResource, ns, ""); err != nil {
						t.Fatal(err)
					}
				}
				return true, nil, apierrors.NewConflict(
					corev1.Resource("namespaces"),
					"ns",
					errors.New("changed"),
				)
			},
		)
		err := f.d.delete(controllertest.LogContext(t), "ns")
		switch {
		case replaced && (err == nil || err.Error() != "namespace uid has changed across retries"):
			t.Errorf("replaced: error %v, want the uid change", err)
		case !replaced && err != nil:
			t.Errorf("error %v, want the conflict retried", err)
		case !replaced && len(f.finalizeCalls()) != 1:
			t.Errorf("finalize calls %v, want one", f.finalizeCalls())
		}
	}
}
