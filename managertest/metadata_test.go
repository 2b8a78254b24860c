package managertest_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/managertest"
)

// TestMetadataDeleteOptions checks that the metadata client's deletes hand
// their DeleteOptions to the fake clientset's reactors and honour
// preconditions as the API server does: a mismatch is a 409 Conflict and
// deletes nothing.
func TestMetadataDeleteOptions(t *testing.T) {
	background := metav1.DeletePropagationBackground
	uid := func(s string) *types.UID { u := types.UID(s); return &u }
	rv := func(s string) *string { return &s }
	const wantUID, wantRV = "uid-a", "7"
	tests := []struct {
		name         string
		collection   bool
		opts         metav1.DeleteOptions
		wantConflict bool
	}{
		{name: "propagation policy", opts: metav1.DeleteOptions{PropagationPolicy: &background}},
		{name: "propagation policy, collection", collection: true,
			opts: metav1.DeleteOptions{PropagationPolicy: &background}},
		{name: "matching preconditions", opts: metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: uid(wantUID), ResourceVersion: rv(wantRV)}}},
		{name: "uid mismatch", wantConflict: true, opts: metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: uid("uid-other")}}},
		{name: "resourceVersion mismatch", wantConflict: true, opts: metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: rv("6")}}},
		{name: "resourceVersion mismatch, collection", collection: true, wantConflict: true,
			opts: metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{ResourceVersion: rv("6")},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			p := pod("a", nil)
			p.UID, p.ResourceVersion = wantUID, wantRV
			client := fake.NewClientset(p)
			var seen []metav1.DeleteOptions
			client.PrependReactor("delete", "pods",
				func(a clienttesting.Action) (bool, runtime.Object, error) {
					seen = append(seen, a.(clienttesting.DeleteAction).GetDeleteOptions())
					return false, nil, nil
				})
			pods := managertest.NewMetadataClient(client).Resource(podsGVR).Namespace("default")

			var err error
			if tt.collection {
				err = pods.DeleteCollection(ctx, tt.opts, metav1.ListOptions{})
			} else {
				err = pods.Delete(ctx, "a", tt.opts)
			}
			_, getErr := client.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
			if tt.wantConflict {
				if !apierrors.IsConflict(err) {
					t.Errorf("delete = %v, want a Conflict", err)
				}
				if getErr != nil {
					t.Errorf("pod gone after a conflicting delete: %v", getErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("delete: %v", err)
			}
			if !apierrors.IsNotFound(getErr) {
				t.Errorf("Get after delete = %v, want NotFound", getErr)
			}
			if len(seen) != 1 {
				t.Fatalf("the reactor saw %d deletes, want 1", len(seen))
			}
			got := seen[0]
			if tt.opts.PropagationPolicy != nil &&
				(got.PropagationPolicy == nil || *got.PropagationPolicy != background) {
				t.Errorf(
					"reactor saw PropagationPolicy %v, want %s",
					got.PropagationPolicy,
					background,
				)
			}
			if tt.opts.Preconditions != nil && (got.Preconditions == nil ||
				*got.Preconditions.UID != wantUID || *got.Preconditions.ResourceVersion != wantRV) {
				t.Errorf(
					"reactor saw Preconditions %+v, want %+v",
					got.Preconditions,
					tt.opts.Preconditions,
				)
			}
		})
	}
}
