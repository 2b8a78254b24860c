//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/garbagecollector"
	"github.com/ctrlhost/ctrlhost/controllers/pvcprotection"
	"github.com/ctrlhost/ctrlhost/controllers/statefulset"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// stsLog records, per namespace, the order in which the scenario's
// kubelet saw StatefulSet pods appear and go: "+web-0", "-web-2", … It is
// compared as a Summary, so that the order, not only the end, must agree.
type stsLog struct {
	// departuresOnly logs only "-" entries: when a pod's replacement
	// comes relative to the next departure is poll timing.
	departuresOnly bool

	mu     sync.Mutex
	events map[string][]string
	seen   map[string]map[string]bool
}

func newSTSLog() *stsLog {
	return &stsLog{events: map[string][]string{}, seen: map[string]map[string]bool{}}
}

// watch is an Act step: it lists the pods and logs the changes.
func (l *stsLog) watch(ctx context.Context, cs kubernetes.Interface, ns string) error {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := l.seen[ns]
	if seen == nil {
		seen = map[string]bool{}
		l.seen[ns] = seen
	}
	now := map[string]bool{}
	var added []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		now[p.Name] = true
		if !seen[p.Name] {
			added = append(added, p.Name)
		}
	}
	var gone []string
	for name := range seen {
		if !now[name] {
			gone = append(gone, name)
		}
	}
	slices.Sort(added)
	slices.Sort(gone)
	for _, n := range gone {
		l.events[ns] = append(l.events[ns], "-"+n)
		delete(seen, n)
	}
	for _, n := range added {
		if l.departuresOnly {
			seen[n] = true
			continue
		}
		l.events[ns] = append(l.events[ns], "+"+n)
		seen[n] = true
	}
	return nil
}

func (l *stsLog) summary(ns string) runtime.Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pod-order"},
		Data: map[string]string{"order": strings.Join(l.events[ns], " ")}}
	s.Kind = "Summary"
	return s
}

// statefulSetObj is a StatefulSet of pause pods with one claim template.
// The pods are bound to a node that does not exist (no scheduler runs),
// so that their deletion is graceful, as on a node: each terminating pod
// is seen before the scenario's kubelet finishes it, and the order of
// deletions shows.
func statefulSetObj(name string, replicas int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	spec := pod("", nil).Spec
	spec.NodeName = "differential-statefulset-node"
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       spec,
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// stsKubelet runs pending pods ready and finishes graceful deletions.
func stsKubelet(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if err := finishTerminating(ctx, cs, ns); err != nil {
		return err
	}
	return runReady(ctx, cs, ns)
}

// observeStatefulSets returns the namespace's StatefulSets, revisions,
// pods and claims, its event summary and, with a log, the pod order.
func observeStatefulSets(log *stsLog) func(context.Context, kubernetes.Interface,
	string) ([]runtime.Object, error) {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
		var out []runtime.Object
		sets, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range sets.Items {
			sets.Items[i].Kind = "StatefulSet"
			out = append(out, &sets.Items[i])
		}
		crs, err := cs.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range crs.Items {
			crs.Items[i].Kind = "ControllerRevision"
			out = append(out, &crs.Items[i])
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range pods.Items {
			pods.Items[i].Kind = "Pod"
			out = append(out, &pods.Items[i])
		}
		pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range pvcs.Items {
			pvcs.Items[i].Kind = "PersistentVolumeClaim"
			out = append(out, &pvcs.Items[i])
		}
		summary, err := differential.EventSummary(ctx, cs, ns, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, summary)
		if log != nil {
			out = append(out, log.summary(ns))
		}
		return out, nil
	}
}

// stsStatus reads a field of the named StatefulSet's status in a
// normalised state ("0" when absent; "" without the set).
func stsStatus(state []map[string]any, name, field string) string {
	for _, o := range state {
		if o["kind"] != "StatefulSet" || nameOfState(o) != name {
			continue
		}
		st, _ := o["status"].(map[string]any)
		if v, ok := st[field]; ok {
			return fmt.Sprint(v)
		}
		return "0"
	}
	return ""
}

// stsCleanup deletes the namespace's sets, pods and claims (no
// controller is left to release the claims' protection finalizer).
func stsCleanup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if err := cs.AppsV1().StatefulSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{}); err != nil {
		return err
	}
	if err := deletePods(ctx, cs, ns); err != nil {
		return err
	}
	pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range pvcs.Items {
		c := &pvcs.Items[i]
		if len(c.Finalizers) > 0 {
			c.Finalizers = nil
			if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Update(ctx, c,
				metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, c.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// onceWhen runs step in a namespace once cond holds of the named set. The
// key act's function is called with is the namespace, or "<ns>/<label>"
// for one onceWhen doing several steps in a namespace.
type onceWhen struct {
	mu   sync.Mutex
	done map[string]bool
}

func (o *onceWhen) act(name string, cond func(*appsv1.StatefulSet) bool,
	step func(*appsv1.StatefulSet)) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, key string) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.done == nil {
			o.done = map[string]bool{}
		}
		if o.done[key] {
			return nil
		}
		ns, _, _ := strings.Cut(key, "/")
		set, err := cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || set.Status.ObservedGeneration != set.Generation || !cond(set) {
			return client(err)
		}
		step(set)
		if _, err := cs.AppsV1().StatefulSets(ns).Update(ctx, set,
			metav1.UpdateOptions{}); err != nil {
			return client(err)
		}
		o.done[key] = true
		return nil
	}
}

// client passes on errors other than a missing object or a conflict,
// which the next poll retries.
func client(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func readyAt(n int32) func(*appsv1.StatefulSet) bool {
	return func(s *appsv1.StatefulSet) bool {
		return s.Status.ReadyReplicas == n && s.Status.Replicas == n &&
			s.Status.UpdatedReplicas == n
	}
}

// TestStatefulSetOrderedScale: an OrderedReady StatefulSet of 3 makes its
// pods and claims one at a time, web-0 first, each once the one before it
// runs ready; scaled to 1 it deletes web-2, then web-1, keeping the claims
// (Retain). The pods' order of appearance and departure is compared.
func TestStatefulSetOrderedScale(t *testing.T) {
	log := newSTSLog()
	var scale onceWhen
	res := compare(t, differential.Scenario{
		Name: "statefulset scales in order", Controller: statefulset.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, statefulSetObj("web", 3),
				metav1.CreateOptions{})
			return err
		}),
		Act: acts(log.watch, stsKubelet, scale.act("web", readyAt(3),
			func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })),
		Observe: observeStatefulSets(log),
		Settled: func(state []map[string]any) bool {
			return count(state, "Pod") == 1 && stsStatus(state, "web", "replicas") == "1" &&
				stsStatus(state, "web", "readyReplicas") == "1" &&
				count(state, "PersistentVolumeClaim") == 3 &&
				strings.Contains(fmt.Sprint(state), "-web-1")
		},
		Cleanup: stsCleanup,
	})
	want := "+web-0 +web-1 +web-2 -web-2 -web-1"
	if got := fmt.Sprint(res.Native); !strings.Contains(got, "order:"+want) {
		t.Errorf("native side: pod order not %q", want)
	}
}

// TestStatefulSetParallelScale: a Parallel StatefulSet with
// ordinals.start 2 makes its pods at once (web-2…web-4) and scales down
// to 1 at once.
func TestStatefulSetParallelScale(t *testing.T) {
	var scale onceWhen
	compare(t, differential.Scenario{
		Name: "statefulset parallel with ordinals", Controller: statefulset.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			s := statefulSetObj("web", 3)
			s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
			s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 2}
			_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
			return err
		}),
		Act: acts(stsKubelet, scale.act("web", readyAt(3),
			func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })),
		Observe: observeStatefulSets(nil),
		Settled: func(state []map[string]any) bool {
			return count(state, "Pod") == 1 && stsStatus(state, "web", "readyReplicas") == "1" &&
				stsStatus(state, "web", "replicas") == "1"
		},
		Cleanup: stsCleanup,
	})
}

// TestStatefulSetPartitionedRollingUpdate: a template change under
// RollingUpdate with partition 1 replaces web-2 then web-1 and leaves
// web-0 at the old revision; lowering the partition to 0 then replaces
// web-0 and completes the update (currentRevision = updateRevision).
func TestStatefulSetPartitionedRollingUpdate(t *testing.T) {
	log := newSTSLog()
	log.departuresOnly = true
	var change, release onceWhen
	res := compare(t, differential.Scenario{
		Name: "statefulset rolling update with partition", Controller: statefulset.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			s := statefulSetObj("web", 3)
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{
				Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{
					Partition: ptr.To[int32](1)},
			}
			_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
			return err
		}),
		Act: acts(log.watch, stsKubelet,
			change.act("web", readyAt(3), func(s *appsv1.StatefulSet) {
				s.Spec.Template.Annotations = map[string]string{"rollout": "2"}
			}),
			release.act("web", func(s *appsv1.StatefulSet) bool {
				return s.Spec.Template.Annotations["rollout"] == "2" &&
					s.Status.UpdatedReplicas == 2 && s.Status.ReadyReplicas == 3
			}, func(s *appsv1.StatefulSet) {
				s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
			})),
		Observe: observeStatefulSets(log),
		Settled: func(state []map[string]any) bool {
			return count(state, "ControllerRevision") == 2 && count(state, "Pod") == 3 &&
				stsStatus(state, "web", "updatedReplicas") == "3" &&
				stsStatus(state, "web", "readyReplicas") == "3" &&
				stsStatus(state, "web", "currentReplicas") == "3" &&
				strings.Contains(fmt.Sprint(state), "partition:0")
		},
		Cleanup: stsCleanup,
	})
	want := "-web-2 -web-1 -web-0"
	if got := fmt.Sprint(res.Native); !strings.Contains(got, "order:"+want) {
		t.Errorf("native side: pod order not %q", want)
	}
}

// TestStatefulSetPVCRetention: four sets of 2, one per retention policy,
// scale to 1 and are then deleted, with the garbage collector and the
// claim protection controller running. whenScaled Delete hands the
// condemned pod's claim to the pod (the collector deletes it with the
// pod); whenDeleted Delete hands the kept claims to the set (deleted with
// it); Retain leaves claims without owners. Left: keep's two claims and
// scaled's first.
func TestStatefulSetPVCRetention(t *testing.T) {
	const (
		retain = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
		del    = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	)
	policies := []struct {
		set              string
		scaled, deleted  appsv1.PersistentVolumeClaimRetentionPolicyType
		keepsScaledClaim bool
	}{
		{"drop", del, del, false},
		{"keep", retain, retain, true},
		{"owned", retain, del, true},
		{"scaled", del, retain, false},
	}
	var scaleDown onceWhen
	var mu sync.Mutex
	deleted := map[string]bool{}
	// Once every set runs one ready pod and the claims of scaled-down pods
	// that should go are gone, delete the sets.
	deleteWhenScaled := func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		mu.Lock()
		defer mu.Unlock()
		if deleted[ns] {
			return nil
		}
		pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		claims := map[string]bool{}
		for _, c := range pvcs.Items {
			claims[c.Name] = true
		}
		for _, p := range policies {
			if claims["data-"+p.set+"-1"] != p.keepsScaledClaim || !claims["data-"+p.set+"-0"] {
				return nil
			}
			s, err := cs.AppsV1().StatefulSets(ns).Get(ctx, p.set, metav1.GetOptions{})
			if err != nil || s.Status.ReadyReplicas != 1 || s.Status.Replicas != 1 {
				return client(err)
			}
		}
		for _, p := range policies {
			if err := cs.AppsV1().StatefulSets(ns).Delete(ctx, p.set, metav1.DeleteOptions{
				PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
				return client(err)
			}
		}
		deleted[ns] = true
		return nil
	}
	// scaleAll scales each set to 1 once it runs 2 ready pods.
	scaleAll := func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		for _, p := range policies {
			err := scaleDown.act(p.set, readyAt(2), func(s *appsv1.StatefulSet) {
				s.Spec.Replicas = ptr.To[int32](1)
			})(ctx, cs, ns+"/"+p.set)
			if err != nil {
				return err
			}
		}
		return nil
	}
	res := compare(t, differential.Scenario{
		Name: "statefulset PVC retention", Controller: statefulset.Name,
		With: []string{garbagecollector.Name, pvcprotection.Name},
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, p := range policies {
				s := statefulSetObj(p.set, 2)
				s.Spec.PersistentVolumeClaimRetentionPolicy =
					&appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
						WhenScaled: p.scaled, WhenDeleted: p.deleted}
				if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, s,
					metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		}),
		Act:     acts(stsKubelet, scaleAll, deleteWhenScaled),
		Observe: observeStatefulSets(nil),
		Settled: func(state []map[string]any) bool {
			return count(state, "StatefulSet") == 0 && count(state, "Pod") == 0 &&
				count(state, "PersistentVolumeClaim") == 3
		},
		Cleanup: stsCleanup,
	})
	got := fmt.Sprint(res.Native)
	for _, name := range []string{"data-keep-0", "data-keep-1", "data-scaled-0"} {
		if !strings.Contains(got, "name:"+name+" ") {
			t.Errorf("native side: claim %s is gone", name)
		}
	}
}

// TestStatefulSetParallelMaxUnavailable: a Parallel set of 4 with
// maxUnavailable 2 rolls a new template out two pods at a time and ends
// with every pod updated and the update complete.
func TestStatefulSetParallelMaxUnavailable(t *testing.T) {
	var change onceWhen
	compare(t, differential.Scenario{
		Name:       "statefulset parallel rolling update with maxUnavailable",
		Controller: statefulset.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			s := statefulSetObj("web", 4)
			s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{
				Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{
					MaxUnavailable: ptr.To(intstr.FromInt32(2))},
			}
			_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
			return err
		}),
		Act: acts(stsKubelet, change.act("web", readyAt(4), func(s *appsv1.StatefulSet) {
			s.Spec.Template.Annotations = map[string]string{"rollout": "2"}
		})),
		Observe: observeStatefulSets(nil),
		Settled: func(state []map[string]any) bool {
			return count(state, "ControllerRevision") == 2 && count(state, "Pod") == 4 &&
				stsStatus(state, "web", "updatedReplicas") == "4" &&
				stsStatus(state, "web", "currentReplicas") == "4" &&
				stsStatus(state, "web", "readyReplicas") == "4"
		},
		Cleanup: stsCleanup,
	})
}

// TestStatefulSetHistoryAndMinReady: with minReadySeconds 2 and
// revisionHistoryLimit 1, two template changes, each once the previous
// one rolled out, leave two revisions (the current one and the newest old
// one), and pods count as available only once ready for two seconds.
func TestStatefulSetHistoryAndMinReady(t *testing.T) {
	var first, second onceWhen
	rolledOut := func(step string) func(*appsv1.StatefulSet) bool {
		return func(s *appsv1.StatefulSet) bool {
			return s.Spec.Template.Annotations["rollout"] == step &&
				s.Status.AvailableReplicas == 2 && s.Status.UpdatedReplicas == 2 &&
				s.Status.CurrentRevision == s.Status.UpdateRevision
		}
	}
	compare(t, differential.Scenario{
		Name: "statefulset history limit and minReadySeconds", Controller: statefulset.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			s := statefulSetObj("web", 2)
			s.Spec.MinReadySeconds = 2
			s.Spec.RevisionHistoryLimit = ptr.To[int32](1)
			_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
			return err
		}),
		Act: acts(stsKubelet,
			first.act("web", rolledOut(""), func(s *appsv1.StatefulSet) {
				s.Spec.Template.Annotations = map[string]string{"rollout": "2"}
			}),
			second.act("web", rolledOut("2"), func(s *appsv1.StatefulSet) {
				s.Spec.Template.Annotations = map[string]string{"rollout": "3"}
			})),
		Observe: observeStatefulSets(nil),
		Settled: func(state []map[string]any) bool {
			return count(state, "ControllerRevision") == 2 && count(state, "Pod") == 2 &&
				stsStatus(state, "web", "availableReplicas") == "2" &&
				stsStatus(state, "web", "updatedReplicas") == "2" &&
				strings.Contains(fmt.Sprint(state), "rollout:3")
		},
		Cleanup: stsCleanup,
	})
}

// TestStatefulSetAdoptsAndReplaces: a running orphan pod named web-0 that
// matches the selector is adopted and given its identity labels, then
// replaced for lacking the revision (RollingUpdate); an orphan named
// other-0 is left alone. A pod of the set that fails is replaced.
func TestStatefulSetAdoptsAndReplaces(t *testing.T) {
	var mu sync.Mutex
	failed := map[string]bool{}
	failOnce := func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		mu.Lock()
		defer mu.Unlock()
		if failed[ns] {
			return nil
		}
		s, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || !readyAt(2)(s) || s.Status.CurrentRevision != s.Status.UpdateRevision {
			return client(err)
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "web-1", metav1.GetOptions{})
		if err != nil {
			return client(err)
		}
		if err := setPhase(ctx, cs, p, corev1.PodFailed, 1); err != nil {
			return client(err)
		}
		failed[ns] = true
		return nil
	}
	compare(t, differential.Scenario{
		Name: "statefulset adopts an orphan and replaces pods", Controller: statefulset.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, name := range []string{"web-0", "other-0"} {
				p := pod(name, map[string]string{"app": "web"})
				p.Spec.NodeName = "differential-statefulset-node"
				created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					return err
				}
				if err := setPhase(ctx, cs, created, corev1.PodRunning, 0); err != nil {
					return err
				}
			}
			s := statefulSetObj("web", 2)
			s.Spec.VolumeClaimTemplates = nil // a pod's volumes cannot change
			_, err := cs.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
			return err
		}),
		Act:     acts(stsKubelet, failOnce),
		Observe: observeStatefulSets(nil),
		Settled: func(state []map[string]any) bool {
			return count(state, "Pod") == 3 && stsStatus(state, "web", "readyReplicas") == "2" &&
				stsStatus(state, "web", "updatedReplicas") == "2" &&
				strings.Contains(fmt.Sprint(state), "SuccessfulDelete")
		},
		Cleanup: stsCleanup,
	})
}
