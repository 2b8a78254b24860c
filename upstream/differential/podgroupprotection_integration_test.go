//go:build integration

package differential_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/podgroupprotection"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// pgKept names the ConfigMap the scenario makes once it has seen the
// PodGroups with an active pod still there, protected, after the
// controller released those without one.
const pgKept = "podgroups-kept-while-used"

// TestPodGroupProtection: on an API server of its own that serves
// scheduling.k8s.io/v1beta1 with GenericWorkload on, and that gate on for
// both sides (KCM and ctrlhost leave the controller off by default):
// admission gives every PodGroup the finalizer and a live one keeps it; a
// deleted PodGroup no pod names, or only a terminated one, goes; one a
// pending pod names stays until the pod is deleted, and another until its
// pod fails.
func TestPodGroupProtection(t *testing.T) {
	ctx := t.Context()
	r, _ := gatedRunner(t, podgroupprotection.FeatureGenericWorkload,
		podgroupprotection.FeatureSpecs(), "scheduling.k8s.io/v1beta1")

	podGroup := func(name string) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.
				PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}}}
	}
	member := func(name, pg string) *corev1.Pod {
		p := pod(name, nil)
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(pg)}
		return p
	}
	// protected: there, being deleted, with the finalizer.
	protected := func(ctx context.Context, cs kubernetes.Interface, ns, name string) (bool,
		error) {
		pg, err := cs.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && pg.DeletionTimestamp != nil &&
			slices.Contains(pg.Finalizers, podgroupprotection.Finalizer), err
	}
	gone := func(ctx context.Context, cs kubernetes.Interface, ns, name string) (bool, error) {
		_, err := cs.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	sc := differential.Scenario{
		Name:       "podgroup-protection keeps PodGroups pods name",
		Controller: podgroupprotection.Name,
		// live: not deleted. free: deleted, no pod. spent: deleted, its pod
		// succeeded. used: deleted, its pod pending until deleted. held:
		// deleted, its pod pending until it fails.
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface,
			ns string) error {
			pgs := cs.SchedulingV1beta1().PodGroups(ns)
			for _, name := range []string{"live", "free", "spent", "used", "held"} {
				if _, err := pgs.Create(ctx, podGroup(name), metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			for name, pg := range map[string]string{"done": "spent", "user": "used",
				"worker": "held"} {
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, member(name, pg),
					metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			if err := pgSetPhase(ctx, cs, ns, "done", corev1.PodSucceeded); err != nil {
				return err
			}
			for _, name := range []string{"free", "spent", "used", "held"} {
				if err := pgs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					return err
				}
			}
			return nil
		}),
		// Once free and spent are gone: if used and held are still
		// protected, say so; once said, the pending pods go and fail.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			cms := cs.CoreV1().ConfigMaps(ns)
			_, err := cms.Get(ctx, pgKept, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				for _, name := range []string{"free", "spent"} {
					if ok, err := gone(ctx, cs, ns, name); !ok || err != nil {
						return err
					}
				}
				for _, name := range []string{"used", "held"} {
					if ok, err := protected(ctx, cs, ns, name); !ok || err != nil {
						return err
					}
				}
				_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					Name: pgKept, Labels: map[string]string{"differential": ns}}},
					metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			err = cs.CoreV1().Pods(ns).Delete(ctx, "user", metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return pgSetPhase(ctx, cs, ns, "worker", corev1.PodFailed)
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			pgs, err := cs.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx,
				metav1.ListOptions{LabelSelector: "differential=" + ns})
			if err != nil {
				return nil, err
			}
			out, err := podsIn(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			for i := range pgs.Items {
				pgs.Items[i].Kind = "PodGroup"
				out = append(out, &pgs.Items[i])
			}
			for i := range cms.Items {
				cms.Items[i].Kind = "ConfigMap"
				out = append(out, &cms.Items[i])
			}
			return out, nil
		},
		// live alone, protected; the succeeded and the failed pod; the mark.
		Settled: func(state []map[string]any) bool {
			return count(state, "PodGroup") == 1 && count(state, "Pod") == 2 &&
				count(state, "ConfigMap") == 1
		},
		// No controller is left to take live's finalizer off.
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			pgs := cs.SchedulingV1beta1().PodGroups(ns)
			l, err := pgs.List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range l.Items {
				pg := &l.Items[i]
				pg.Finalizers = nil
				if _, err := pgs.Update(ctx, pg, metav1.UpdateOptions{}); err != nil &&
					!apierrors.IsNotFound(err) {
					return err
				}
				if err := pgs.Delete(ctx, pg.Name, metav1.DeleteOptions{}); err != nil &&
					!apierrors.IsNotFound(err) {
					return err
				}
			}
			return deletePods(ctx, cs, ns)
		},
	}
	start := time.Now()
	res, err := r.Run(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	// Both agree; check what they agree on.
	var got []string
	for _, o := range res.Native {
		md, _ := o["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		if o["kind"] == "PodGroup" {
			f, _ := md["finalizers"].([]any)
			if len(f) != 1 || f[0] != podgroupprotection.Finalizer ||
				md["deletionTimestamp"] != nil {
				t.Errorf("PodGroup %s: finalizers %v, deletionTimestamp %v; want only %s, live",
					name, f, md["deletionTimestamp"], podgroupprotection.Finalizer)
			}
		}
		got = append(got, o["kind"].(string)+" "+name)
	}
	slices.Sort(got)
	want := []string{"ConfigMap " + pgKept, "Pod done", "Pod worker", "PodGroup live"}
	if !slices.Equal(got, want) {
		t.Errorf("native side ended with %q, want %q", got, want)
	}
}

// pgSetPhase sets the pod's phase (there is no kubelet), unless it has it.
func pgSetPhase(ctx context.Context, cs kubernetes.Interface, ns, name string,
	phase corev1.PodPhase) error {
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || p.Status.Phase == phase {
		return err
	}
	p.Status.Phase = phase
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}
