package deployment

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// TestEventHandlers: which Deployments each informer event wakes.
func TestEventHandlers(t *testing.T) {
	web := rolling(2, intstr.FromInt32(1), intstr.FromInt32(0))
	other := rolling(2, intstr.FromInt32(1), intstr.FromInt32(0))
	other.Name, other.UID = "other", "uid-other"
	other.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	re := recreate(2)
	re.Name, re.UID = "re", "uid-re"
	re.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "re"}}

	owned := ownedRS(web, "v1", 2, 1, 0)
	orphan := ownedRS(web, "v9", 0, 1, 0)
	orphan.OwnerReferences = nil
	ofOther := ownedRS(other, "v1", 2, 1, 0)
	ofRecreate := ownedRS(re, "v1", 2, 1, 0)
	stale := ownedRS(web, "v1", 2, 1, 0)
	stale.OwnerReferences[0].UID = "uid-of-a-deleted-web"
	relabelled := orphan.DeepCopy()
	relabelled.Labels = map[string]string{"app": "other"}
	relabelled.ResourceVersion = "2"
	// A deleted pod as the pod informer holds it: pruned to what the
	// controller declares it reads.
	podOf := func(rs *appsv1.ReplicaSet) *corev1.Pod {
		ref := metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
		return controllertest.Pruned(t, Descriptor(Options{}), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: rs.Labels,
				OwnerReferences: []metav1.OwnerReference{*ref}}})[0]
	}
	withRV := func(rs *appsv1.ReplicaSet, rv string) *appsv1.ReplicaSet {
		rs = rs.DeepCopy()
		rs.ResourceVersion = rv
		return rs
	}
	tests := []struct {
		name  string
		event func(c *controller)
		want  []string
	}{
		{"deployment added", func(c *controller) { c.addDeployment(web, false) },
			[]string{"ns/web"}},
		{"deployment deleted (tombstone)", func(c *controller) {
			c.deleteDeployment(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: web})
		}, []string{"ns/web"}},
		{"owned ReplicaSet added", func(c *controller) { c.addReplicaSet(owned, false) },
			[]string{"ns/web"}},
		{"ReplicaSet of a deleted namesake", func(c *controller) { c.addReplicaSet(stale, false) },
			nil},
		{"orphan added wakes the selecting Deployment",
			func(c *controller) { c.addReplicaSet(orphan, false) }, []string{"ns/web"}},
		{
			"orphan relabelled wakes the newly selecting one",
			func(c *controller) { c.updateReplicaSet(withRV(orphan, "1"), relabelled) },
			[]string{"ns/other"},
		},
		{
			"resync (same resourceVersion) wakes nobody",
			func(c *controller) { c.updateReplicaSet(withRV(owned, "1"), withRV(owned, "1")) },
			nil,
		},
		{"controller changed wakes old and new owner", func(c *controller) {
			c.updateReplicaSet(withRV(owned, "1"), withRV(ofOther, "2"))
		}, []string{"ns/web", "ns/other"}},
		{
			"owned ReplicaSet deleted",
			func(c *controller) { c.deleteReplicaSet(owned) },
			[]string{"ns/web"},
		},
		{"orphan deleted wakes nobody", func(c *controller) { c.deleteReplicaSet(orphan) }, nil},
		{
			"pod of a Recreate Deployment deleted",
			func(c *controller) { c.deletePod(podOf(ofRecreate)) },
			[]string{"ns/re"},
		},
		{
			"pod of a RollingUpdate Deployment deleted",
			func(c *controller) { c.deletePod(podOf(owned)) },
			nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, web, other, re, owned, ofOther, ofRecreate)
			var got []string
			f.c.enqueueKey = func(key string) { got = append(got, key) }
			tt.event(f.c)
			if !slices.Equal(got, tt.want) {
				t.Errorf("enqueued %v, want %v", got, tt.want)
			}
		})
	}
}
