package leadertest

import (
	"context"
	"testing"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func lease(name, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
	}
}

// The plain fake accepts a stale update: the reason this package exists.
func TestFakeDoesNotEnforce(t *testing.T) {
	for _, tc := range []struct {
		name string
		cs   *fake.Clientset
	}{
		{"NewSimpleClientset", fake.NewSimpleClientset()},
		{"NewClientset", fake.NewClientset()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			leases := tc.cs.CoordinationV1().Leases("kube-system")
			created, err := leases.Create(ctx, lease("l", "a"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// If these fail, client-go's fake changed: revisit whether
			// EnforceResourceVersion is still needed.
			if created.ResourceVersion != "" {
				t.Errorf("the fake now stamps resourceVersion %q", created.ResourceVersion)
			}
			stale := created.DeepCopy()
			stale.ResourceVersion = "12345"
			if _, err := leases.Update(ctx, stale, metav1.UpdateOptions{}); err != nil {
				t.Errorf("the fake now rejects a stale update: %v", err)
			}
		})
	}
}

func TestEnforceResourceVersion(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	EnforceResourceVersion(cs)
	leases := cs.CoordinationV1().Leases("kube-system")

	first, err := leases.Create(ctx, lease("l", "a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.ResourceVersion == "" {
		t.Fatal("create did not stamp a resourceVersion")
	}
	withRV := lease("m", "a")
	withRV.ResourceVersion = "7"
	if _, err := leases.Create(ctx, withRV, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("create with resourceVersion: %v, want BadRequest", err)
	}

	// Two writers read the same version; only the first update wins.
	a, b := first.DeepCopy(), first.DeepCopy()
	a.Spec.HolderIdentity = ptr.To("a2")
	b.Spec.HolderIdentity = ptr.To("b")
	updated, err := leases.Update(ctx, a, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("first update: %v", err)
	}
	if updated.ResourceVersion == first.ResourceVersion {
		t.Errorf("update kept resourceVersion %q", updated.ResourceVersion)
	}
	if _, err := leases.Update(ctx, b, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v, want Conflict", err)
	}
	got, err := leases.Get(ctx, "l", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.HolderIdentity != "a2" || got.ResourceVersion != updated.ResourceVersion {
		t.Errorf(
			"stored lease = holder %q rv %q, want a2 rv %q",
			*got.Spec.HolderIdentity,
			got.ResourceVersion,
			updated.ResourceVersion,
		)
	}

	unconditional := got.DeepCopy()
	unconditional.ResourceVersion = ""
	if _, err := leases.Update(ctx, unconditional, metav1.UpdateOptions{}); !apierrors.IsInvalid(
		err,
	) {
		t.Errorf("update without resourceVersion: %v, want Invalid", err)
	}
	if _, err := leases.Update(ctx, lease("missing", "a"), metav1.UpdateOptions{}); !apierrors.IsNotFound(
		err,
	) {
		t.Errorf("update of a missing lease: %v, want NotFound", err)
	}

	// A lease added straight to the tracker has no resourceVersion; updating
	// it with none works once and stamps one.
	if err := cs.Tracker().Add(lease("seeded", "a")); err != nil {
		t.Fatal(err)
	}
	seeded, err := leases.Get(ctx, "seeded", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if seeded, err = leases.Update(ctx, seeded, metav1.UpdateOptions{}); err != nil ||
		seeded.ResourceVersion == "" {
		t.Errorf("update of a seeded lease: rv %q, %v", seeded.GetResourceVersion(), err)
	}

	stalePre := metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To(first.ResourceVersion)},
	}
	if err := leases.Delete(ctx, "l", stalePre); !apierrors.IsConflict(err) {
		t.Errorf("delete with stale precondition: %v, want Conflict", err)
	}
	pre := metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To(updated.ResourceVersion)},
	}
	if err := leases.Delete(ctx, "l", pre); err != nil {
		t.Errorf("delete with current precondition: %v", err)
	}
	if err := leases.Delete(ctx, "seeded", metav1.DeleteOptions{}); err != nil {
		t.Errorf("unconditional delete: %v", err)
	}
}
