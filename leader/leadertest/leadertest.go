// Package leadertest helps tests that run leader election against a fake
// clientset.
package leadertest

import (
	"errors"
	"strconv"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var leases = coordinationv1.SchemeGroupVersion.WithResource("leases")

// EnforceResourceVersion makes the fake clientset treat Leases the way the
// API server does, so that several electors sharing it compete fairly. The
// fake's object tracker neither stamps a resourceVersion on the objects it
// stores nor checks the one an Update carries, so every Update wins and two
// electors can both believe they acquired the lease.
//
// With it, creating a Lease stamps a resourceVersion (a counter shared by all
// Leases of this clientset; a create that carries one is a BadRequest); an
// Update whose resourceVersion differs from the stored one fails with a
// Conflict (without one, with Invalid, as Leases forbid unconditional
// updates), and a successful one stamps a new resourceVersion; a Delete with
// a resourceVersion precondition fails with a Conflict when it is stale.
// Leases added through the tracker directly keep whatever resourceVersion
// they carry. Call it before the clientset is used; the reactors go in front
// of any installed earlier.
func EnforceResourceVersion(cs *fake.Clientset) {
	var mu sync.Mutex
	var last int64
	next := func() string {
		last++
		return strconv.FormatInt(last, 10)
	}
	// store gives m a fresh resourceVersion, writes it (the tracker's
	// Create or Update) and answers with what was stored. Callers hold mu.
	store := func(m metav1.Object, ns string, write func() error) (bool, runtime.Object, error) {
		m.SetResourceVersion(next())
		if err := write(); err != nil {
			return true, nil, err
		}
		stored, err := cs.Tracker().Get(leases, ns, m.GetName())
		return true, stored, err
	}

	cs.PrependReactor(
		"create",
		"leases",
		func(action k8stesting.Action) (bool, runtime.Object, error) {
			a, ok := action.(k8stesting.CreateAction)
			if !ok || a.GetSubresource() != "" {
				return false, nil, nil
			}
			obj := a.GetObject().DeepCopyObject()
			m, err := meta.Accessor(obj)
			if err != nil {
				return true, nil, err
			}
			if m.GetResourceVersion() != "" {
				return true, nil, apierrors.NewBadRequest(
					"resourceVersion should not be set on objects to be created",
				)
			}
			mu.Lock()
			defer mu.Unlock()
			return store(
				m,
				a.GetNamespace(),
				func() error { return cs.Tracker().Create(leases, obj, a.GetNamespace()) },
			)
		},
	)

	cs.PrependReactor(
		"update",
		"leases",
		func(action k8stesting.Action) (bool, runtime.Object, error) {
			a, ok := action.(k8stesting.UpdateAction)
			if !ok || a.GetSubresource() != "" {
				return false, nil, nil
			}
			obj := a.GetObject().DeepCopyObject()
			m, err := meta.Accessor(obj)
			if err != nil {
				return true, nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			current, err := cs.Tracker().Get(leases, a.GetNamespace(), m.GetName())
			if err != nil {
				return true, nil, err
			}
			cm, err := meta.Accessor(current)
			if err != nil {
				return true, nil, err
			}
			switch have, want := m.GetResourceVersion(), cm.GetResourceVersion(); {
			case have == want:
			case have == "":
				return true, nil, apierrors.NewInvalid(
					coordinationv1.SchemeGroupVersion.WithKind("Lease").GroupKind(),
					m.GetName(),
					field.ErrorList{
						field.Invalid(
							field.NewPath("metadata", "resourceVersion"),
							have,
							"must be specified for an update",
						),
					},
				)
			default:
				return true, nil, conflict(m.GetName())
			}
			return store(
				m,
				a.GetNamespace(),
				func() error { return cs.Tracker().Update(leases, obj, a.GetNamespace()) },
			)
		},
	)

	cs.PrependReactor(
		"delete",
		"leases",
		func(action k8stesting.Action) (bool, runtime.Object, error) {
			a, ok := action.(k8stesting.DeleteAction)
			if !ok || a.GetSubresource() != "" {
				return false, nil, nil
			}
			pre := a.GetDeleteOptions().Preconditions
			if pre == nil || pre.ResourceVersion == nil {
				return false, nil, nil
			}
			mu.Lock()
			defer mu.Unlock()
			current, err := cs.Tracker().Get(leases, a.GetNamespace(), a.GetName())
			if err != nil {
				return true, nil, err
			}
			cm, err := meta.Accessor(current)
			if err != nil {
				return true, nil, err
			}
			if *pre.ResourceVersion != cm.GetResourceVersion() {
				return true, nil, conflict(a.GetName())
			}
			return true, nil, cs.Tracker().Delete(leases, a.GetNamespace(), a.GetName())
		},
	)
}

var errStale = errors.New(
	"the object has been modified; please apply your changes to the latest version and try again",
)

func conflict(name string) error {
	return apierrors.NewConflict(leases.GroupResource(), name, errStale)
}
