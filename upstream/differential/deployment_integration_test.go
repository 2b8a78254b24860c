//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// Every Deployment scenario runs each side's ReplicaSet controller too:
// the Deployment controller only sizes ReplicaSets.
var deployWith = []string{"replicaset-controller"}

const deployImage = "registry.k8s.io/pause:3.10"

// deployObj is a Deployment "web" of replicas pods of image, selecting
// app=web, with a RollingUpdate of maxSurge 1, maxUnavailable 0.
func deployObj(replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"team": "blue"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
			},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable},
			},
		},
	}
}

// deployCreate is a Setup that creates d (and the default ServiceAccount).
func deployCreate(d *appsv1.Deployment) func(context.Context, kubernetes.Interface, string) error {
	return withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		return err
	})
}

// deployObserve returns the Deployments, the ReplicaSets and a summary:
// the live pods per controlling ReplicaSet, the "kind reason" pairs of the
// namespace's events (sorted, de-duplicated: counts and timing are not
// deterministic) and the ScalingReplicaSet messages (likewise; they name
// ReplicaSets by hash and sizes, which both sides must agree on).
func deployObserve(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	var objs []runtime.Object
	ds, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range ds.Items {
		ds.Items[i].Kind = "Deployment"
		objs = append(objs, &ds.Items[i])
	}
	rss, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range rss.Items {
		rss.Items[i].Kind = "ReplicaSet"
		objs = append(objs, &rss.Items[i])
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	perRS := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		owner := "<none>"
		if ref := metav1.GetControllerOf(&p); ref != nil {
			owner = ref.Name
		}
		perRS[owner]++
	}
	var counts []string
	for name, n := range perRS {
		counts = append(counts, fmt.Sprintf("%s=%d", name, n))
	}
	slices.Sort(counts)
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var reasons, scaling []string
	for _, e := range evs.Items {
		reasons = append(reasons, e.InvolvedObject.Kind+" "+e.Reason)
		if e.Reason == "ScalingReplicaSet" {
			scaling = append(scaling, e.Message)
		}
	}
	slices.Sort(reasons)
	slices.Sort(scaling)
	summary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "summary"}, Data: map[string]string{
		"podsPerReplicaSet": strings.Join(counts, " "),
		"events":            strings.Join(slices.Compact(reasons), "\n"),
		"scaling":           strings.Join(slices.Compact(scaling), "\n"),
	}}
	summary.Kind = "Summary"
	return append(objs, summary), nil
}

// deployDone: the API server's web Deployment has rolled out image
// completely (its current generation observed, every replica updated and
// available, Progressing NewReplicaSetAvailable).
func deployDone(d *appsv1.Deployment, image string) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	return d.Spec.Template.Spec.Containers[0].Image == image && st.ObservedGeneration == d.Generation &&
		st.Replicas == want && st.UpdatedReplicas == want && st.AvailableReplicas == want &&
		deployCondReason(st.Conditions, appsv1.DeploymentProgressing) == "NewReplicaSetAvailable"
}

func deployCondReason(cs []appsv1.DeploymentCondition, t appsv1.DeploymentConditionType) string {
	for _, c := range cs {
		if c.Type == t {
			return c.Reason
		}
	}
	return ""
}

// deployEdit returns an Act step: when the web Deployment satisfies when,
// change applies edit to it and updates it. A step whose condition no
// longer holds after its edit runs once.
func deployEdit(when func(*appsv1.Deployment) bool, edit func(*appsv1.Deployment)) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || !when(d) {
			return err
		}
		edit(d)
		_, err = cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	}
}

// deployActs runs every step in order.
func deployActs(steps ...func(context.Context, kubernetes.Interface, string) error) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		for _, s := range steps {
			if err := s(ctx, cs, ns); err != nil {
				return err
			}
		}
		return nil
	}
}

// deployRollTo is an Act step that changes the template from image from
// to image to once from has rolled out.
func deployRollTo(from, to string) func(context.Context, kubernetes.Interface, string) error {
	return deployEdit(func(d *appsv1.Deployment) bool { return deployDone(d, from) },
		func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = to })
}

// readyImage marks the pending pods of image Running and Ready, as a
// kubelet would; pods of other images stay pending.
func readyImage(image string) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range l.Items {
			p := &l.Items[i]
			if p.DeletionTimestamp != nil || p.Status.Phase != "" && p.Status.Phase != corev1.PodPending || p.Spec.Containers[0].Image != image {
				continue
			}
			if err := setPhase(ctx, cs, p, corev1.PodRunning, 0); err != nil {
				return err
			}
		}
		return nil
	}
}

// The settled-state helpers read the normalised state.

func deployState(state []map[string]any, kind, name string) map[string]any {
	for _, o := range state {
		if o["kind"] == kind && nameOf2(o) == name {
			return o
		}
	}
	return nil
}

func nameOf2(o map[string]any) string {
	md, _ := o["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

// deployField digs a dotted path out of a normalised object; "" when absent.
func deployField(o map[string]any, path string) string {
	var cur any = o
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	if cur == nil {
		return ""
	}
	return fmt.Sprint(cur)
}

// deployProgressing is the normalised web Deployment's Progressing reason.
func deployProgressing(state []map[string]any) string {
	d := deployState(state, "Deployment", "web")
	conds, _ := d["status"].(map[string]any)["conditions"].([]any)
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Progressing" {
			return fmt.Sprint(m["reason"])
		}
	}
	return ""
}

// deployStatus renders the web Deployment's status counts as
// "replicas/updated/ready/available".
func deployStatus(state []map[string]any) string {
	d := deployState(state, "Deployment", "web")
	if d == nil {
		return ""
	}
	f := func(k string) string {
		if v := deployField(d, "status."+k); v != "" {
			return v
		}
		return "0"
	}
	return f("replicas") + "/" + f("updatedReplicas") + "/" + f("readyReplicas") + "/" + f("availableReplicas")
}

func deploySummary(state []map[string]any, key string) string {
	return deployField(deployState(state, "Summary", "summary"), "data."+key)
}

// deployCompare runs sc with Deployment defaults and checks what the
// native side ended with against want (status counts, Progressing reason,
// ReplicaSet count), so that a scenario that settles wrongly on both sides
// still fails.
func deployCompare(t *testing.T, sc differential.Scenario, status, progressing string, replicaSets int) {
	t.Helper()
	sc.Controller, sc.With, sc.Observe, sc.Cleanup = "deployment-controller", deployWith, deployObserve, deletePods
	res := compare(t, sc)
	if got := deployStatus(res.Native); got != status {
		t.Errorf("native status %s, want %s", got, status)
	}
	if got := deployProgressing(res.Native); got != progressing {
		t.Errorf("native Progressing %s, want %s", got, progressing)
	}
	if got := count(res.Native, "ReplicaSet"); got != replicaSets {
		t.Errorf("native ReplicaSets %d, want %d", got, replicaSets)
	}
	t.Logf("native pods per ReplicaSet: %s; events:\n%s", deploySummary(res.Native, "podsPerReplicaSet"), deploySummary(res.Native, "events"))
}

// TestDeploymentNew: a new Deployment of 3 rolls out to Available with
// Progressing NewReplicaSetAvailable.
func TestDeploymentNew(t *testing.T) {
	deployCompare(t, differential.Scenario{
		Name:  "deployment rolls out a new deployment",
		Setup: deployCreate(deployObj(3, deployImage)),
		Act:   runReady,
		Settled: func(s []map[string]any) bool {
			return deployStatus(s) == "3/3/3/3" && deployProgressing(s) == "NewReplicaSetAvailable"
		},
	}, "3/3/3/3", "NewReplicaSetAvailable", 1)
}

// TestDeploymentRollingUpdate: once revision 1 is out, the template
// changes; with maxSurge 1 and maxUnavailable 0 the new ReplicaSet ends at
// 3 and the old one at 0, revisions 1 and 2.
func TestDeploymentRollingUpdate(t *testing.T) {
	deployCompare(t, differential.Scenario{
		Name:  "deployment rolling update",
		Setup: deployCreate(deployObj(3, deployImage)),
		Act:   deployActs(runReady, deployRollTo(deployImage, "registry.k8s.io/pause:3.9")),
		Settled: func(s []map[string]any) bool {
			return deployStatus(s) == "3/3/3/3" && deployProgressing(s) == "NewReplicaSetAvailable" &&
				strings.Contains(fmt.Sprint(deployState(s, "Deployment", "web")["metadata"]), "deployment.kubernetes.io/revision:2") &&
				count(s, "ReplicaSet") == 2 && strings.Contains(deploySummary(s, "scaling"), "from 1 to 0")
		},
	}, "3/3/3/3", "NewReplicaSetAvailable", 2)
}

// TestDeploymentRecreate: a Recreate Deployment's template change scales
// the old ReplicaSet to 0 before the new one is made.
func TestDeploymentRecreate(t *testing.T) {
	d := deployObj(2, deployImage)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	deployCompare(t, differential.Scenario{
		Name:  "deployment recreate update",
		Setup: deployCreate(d),
		Act:   deployActs(runReady, deployRollTo(deployImage, "registry.k8s.io/pause:3.9")),
		Settled: func(s []map[string]any) bool {
			return deployStatus(s) == "2/2/2/2" && deployProgressing(s) == "NewReplicaSetAvailable" && count(s, "ReplicaSet") == 2
		},
	}, "2/2/2/2", "NewReplicaSetAvailable", 2)
}

// TestDeploymentPausedScale: a paused Deployment whose template changed is
// scaled from 3 to 5 on its old ReplicaSet; no new ReplicaSet appears and
// Progressing stays DeploymentPaused.
func TestDeploymentPausedScale(t *testing.T) {
	deployCompare(t, differential.Scenario{
		Name:  "deployment scaled while paused",
		Setup: deployCreate(deployObj(3, deployImage)),
		Act: deployActs(runReady,
			deployEdit(func(d *appsv1.Deployment) bool { return deployDone(d, deployImage) }, func(d *appsv1.Deployment) {
				d.Spec.Paused = true
				d.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/pause:3.9"
			}),
			deployEdit(func(d *appsv1.Deployment) bool {
				return d.Spec.Paused && *d.Spec.Replicas == 3 && d.Status.ObservedGeneration == d.Generation &&
					deployCondReason(d.Status.Conditions, appsv1.DeploymentProgressing) == "DeploymentPaused"
			}, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) })),
		Settled: func(s []map[string]any) bool {
			return deployStatus(s) == "5/0/5/5" && deployProgressing(s) == "DeploymentPaused"
		},
	}, "5/0/5/5", "DeploymentPaused", 1)
}

// TestDeploymentProportionalScale: a rollout stalls (the new image's pods
// never become ready) at old 3 / new 1; scaling to 6 then spreads the
// replicas in proportion: old 5, new 2.
func TestDeploymentProportionalScale(t *testing.T) {
	const v2 = "registry.k8s.io/pause:3.9"
	deployCompare(t, differential.Scenario{
		Name:  "deployment scaled during a rollout",
		Setup: deployCreate(deployObj(3, deployImage)),
		Act: deployActs(readyImage(deployImage), deployRollTo(deployImage, v2),
			deployEdit(func(d *appsv1.Deployment) bool {
				return d.Spec.Template.Spec.Containers[0].Image == v2 && *d.Spec.Replicas == 3 &&
					d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == 4 && d.Status.UpdatedReplicas == 1
			}, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](6) })),
		Settled: func(s []map[string]any) bool { return deployStatus(s) == "7/2/5/5" },
	}, "7/2/5/5", "ReplicaSetUpdated", 2)
}

// TestDeploymentHistoryLimit: revisionHistoryLimit 1 after three template
// changes, each made once the previous rollout finished: the newest
// ReplicaSet and one old one are left, revision 4.
func TestDeploymentHistoryLimit(t *testing.T) {
	d := deployObj(2, "registry.k8s.io/pause:3.7")
	d.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	deployCompare(t, differential.Scenario{
		Name:  "deployment revision history limit",
		Setup: deployCreate(d),
		Act: deployActs(runReady,
			deployRollTo("registry.k8s.io/pause:3.7", "registry.k8s.io/pause:3.8"),
			deployRollTo("registry.k8s.io/pause:3.8", "registry.k8s.io/pause:3.9"),
			deployRollTo("registry.k8s.io/pause:3.9", deployImage)),
		Settled: func(s []map[string]any) bool {
			web := deployState(s, "Deployment", "web")
			return deployStatus(s) == "2/2/2/2" && deployProgressing(s) == "NewReplicaSetAvailable" &&
				count(s, "ReplicaSet") == 2 && strings.Contains(fmt.Sprint(web["metadata"]), "revision:4")
		},
	}, "2/2/2/2", "NewReplicaSetAvailable", 2)
}

// TestDeploymentProgressDeadline: pods never become ready; after
// progressDeadlineSeconds (3) Progressing is False ProgressDeadlineExceeded.
func TestDeploymentProgressDeadline(t *testing.T) {
	d := deployObj(2, deployImage)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](3)
	deployCompare(t, differential.Scenario{
		Name:    "deployment progress deadline exceeded",
		Setup:   deployCreate(d),
		Settled: func(s []map[string]any) bool { return deployProgressing(s) == "ProgressDeadlineExceeded" },
	}, "2/2/0/0", "ProgressDeadlineExceeded", 1)
}

// TestDeploymentAdoptsOrphan: an orphan ReplicaSet with the Deployment's
// selector labels and template is adopted and becomes its new ReplicaSet
// (revision 1), scaled to 3; no other ReplicaSet is made.
func TestDeploymentAdoptsOrphan(t *testing.T) {
	d := deployObj(3, deployImage)
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-orphan", Labels: d.Spec.Template.Labels},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: d.Spec.Selector.DeepCopy(),
			Template: *d.Spec.Template.DeepCopy()},
	}
	deployCompare(t, differential.Scenario{
		Name: "deployment adopts an orphan replica set",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
			return err
		}),
		Act: runReady,
		Settled: func(s []map[string]any) bool {
			return deployStatus(s) == "3/3/3/3" && deployProgressing(s) == "NewReplicaSetAvailable" &&
				strings.Contains(fmt.Sprint(deployState(s, "ReplicaSet", "web-orphan")["metadata"]), "ownerReferences")
		},
	}, "3/3/3/3", "NewReplicaSetAvailable", 1)
}

// TestDeploymentMinReadySeconds: minReadySeconds is copied to the
// ReplicaSet; changing it later (no template change) updates the same
// ReplicaSet rather than making a new one.
func TestDeploymentMinReadySeconds(t *testing.T) {
	d := deployObj(2, deployImage)
	d.Spec.MinReadySeconds = 2
	deployCompare(t, differential.Scenario{
		Name:  "deployment minReadySeconds",
		Setup: deployCreate(d),
		Act: deployActs(runReady, deployEdit(func(d *appsv1.Deployment) bool {
			return d.Spec.MinReadySeconds == 2 && deployDone(d, deployImage)
		}, func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 1 })),
		Settled: func(s []map[string]any) bool {
			for _, o := range s {
				if o["kind"] == "ReplicaSet" && deployField(o, "spec.minReadySeconds") != "1" {
					return false
				}
			}
			return deployStatus(s) == "2/2/2/2" && deployProgressing(s) == "NewReplicaSetAvailable"
		},
	}, "2/2/2/2", "NewReplicaSetAvailable", 1)
}

// TestDeploymentPausedThenResumed: a Deployment created paused makes no
// ReplicaSet and reports Progressing Unknown DeploymentPaused; resumed, it
// rolls out.
func TestDeploymentPausedThenResumed(t *testing.T) {
	d := deployObj(2, deployImage)
	d.Spec.Paused = true
	deployCompare(t, differential.Scenario{
		Name:  "deployment created paused, then resumed",
		Setup: deployCreate(d),
		Act: deployActs(runReady, deployEdit(func(d *appsv1.Deployment) bool {
			return d.Spec.Paused && d.Status.ObservedGeneration == d.Generation &&
				deployCondReason(d.Status.Conditions, appsv1.DeploymentProgressing) == "DeploymentPaused"
		}, func(d *appsv1.Deployment) { d.Spec.Paused = false })),
		Settled: func(s []map[string]any) bool {
			return deployStatus(s) == "2/2/2/2" && deployProgressing(s) == "NewReplicaSetAvailable"
		},
	}, "2/2/2/2", "NewReplicaSetAvailable", 1)
}

// TestDeploymentRollbackAnnotation: after a rollout to revision 2, the
// deprecated rollback annotation (revision 1) puts the first template back:
// its ReplicaSet becomes revision 3 with revision-history 1, and the
// DeploymentRollback event is recorded.
func TestDeploymentRollbackAnnotation(t *testing.T) {
	const v2 = "registry.k8s.io/pause:3.9"
	revision := func(d *appsv1.Deployment) string { return d.Annotations["deployment.kubernetes.io/revision"] }
	deployCompare(t, differential.Scenario{
		Name:  "deployment rollback annotation",
		Setup: deployCreate(deployObj(2, deployImage)),
		Act: deployActs(runReady,
			deployEdit(func(d *appsv1.Deployment) bool { return revision(d) == "1" && deployDone(d, deployImage) },
				func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = v2 }),
			deployEdit(func(d *appsv1.Deployment) bool { return revision(d) == "2" && deployDone(d, v2) },
				func(d *appsv1.Deployment) { d.Annotations["deprecated.deployment.rollback.to"] = "1" })),
		Settled: func(s []map[string]any) bool {
			return deployStatus(s) == "2/2/2/2" && deployProgressing(s) == "NewReplicaSetAvailable" &&
				strings.Contains(fmt.Sprint(deployState(s, "Deployment", "web")["metadata"]), "revision:3") &&
				strings.Contains(deploySummary(s, "events"), "Deployment DeploymentRollback")
		},
	}, "2/2/2/2", "NewReplicaSetAvailable", 2)
}

// TestDeploymentHashCollision: a ReplicaSet that is not the Deployment's
// already has the name <deployment>-<hash>; both sides raise
// status.collisionCount to 1 and name the new ReplicaSet with the hash
// that includes it. (The squatter's name is computed with KCM's own
// ComputeHash over the template as the API server defaulted it.)
func TestDeploymentHashCollision(t *testing.T) {
	deployCompare(t, differential.Scenario{
		Name: "deployment hash collision",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			d, err := cs.AppsV1().Deployments(ns).Create(ctx, deployObj(2, deployImage), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			labels := map[string]string{"app": "squatter"}
			_, err = cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: "web-" + controller.ComputeHash(&d.Spec.Template, nil), Labels: labels},
				Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: deployImage}}}}},
			}, metav1.CreateOptions{})
			return err
		}),
		Act: runReady,
		Settled: func(s []map[string]any) bool {
			return deployStatus(s) == "2/2/2/2" && deployProgressing(s) == "NewReplicaSetAvailable" &&
				deployField(deployState(s, "Deployment", "web"), "status.collisionCount") == "1"
		},
	}, "2/2/2/2", "NewReplicaSetAvailable", 2)
}

// TestDeploymentReleasesReplicaSet: once revision 1 is out, its
// ReplicaSet's labels stop matching the selector: the Deployment releases
// it (its pods stay with it) and makes a new ReplicaSet; the hashed name is
// taken by the released one, so collisionCount goes to 1 on both sides.
func TestDeploymentReleasesReplicaSet(t *testing.T) {
	relabel := func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || d.Status.CollisionCount != nil || !deployDone(d, deployImage) {
			return err
		}
		l, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(l.Items) != 1 {
			return err
		}
		rs := &l.Items[0]
		rs.Labels = map[string]string{"app": "released"}
		_, err = cs.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
		return err
	}
	deployCompare(t, differential.Scenario{
		Name:  "deployment releases a replica set that stopped matching",
		Setup: deployCreate(deployObj(2, deployImage)),
		Act:   deployActs(runReady, relabel),
		Settled: func(s []map[string]any) bool {
			return deployStatus(s) == "2/2/2/2" && deployProgressing(s) == "NewReplicaSetAvailable" &&
				deployField(deployState(s, "Deployment", "web"), "status.collisionCount") == "1" && count(s, "ReplicaSet") == 2
		},
	}, "2/2/2/2", "NewReplicaSetAvailable", 2)
}
