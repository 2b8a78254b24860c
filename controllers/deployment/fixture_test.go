package deployment

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

// epoch is the fake clocks' start.
var epoch = controllertest.Epoch

// fixture is a controller over a fake clientset whose informers are never
// started: refresh copies the fake API server's objects into the informers'
// stores, as watches would, and tests call sync directly.
type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	c        *controller
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock

	mu          sync.Mutex
	after       map[string]time.Duration
	rateLimited map[string]int
	created     int
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:           t,
		client:      fake.NewClientset(objs...),
		recorder:    record.NewFakeRecorder(1000),
		clock:       clocktesting.NewFakeClock(epoch),
		after:       map[string]time.Duration{},
		rateLimited: map[string]int{},
	}
	// The fake API server sets neither UIDs nor creation times; ReplicaSets
	// the controller creates get both, each a second after the last.
	f.client.PrependReactor(
		"create",
		"replicasets",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			rs := a.(clienttesting.CreateAction).GetObject().(*appsv1.ReplicaSet)
			f.mu.Lock()
			f.created++
			n := f.created
			f.mu.Unlock()
			rs.UID = types.UID("uid-" + rs.Name)
			rs.CreationTimestamp = metav1.NewTime(epoch.Add(time.Duration(1000+n) * time.Second))
			return false, nil, nil
		},
	)
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	c, err := newController(config{
		name:                "test-deployment",
		client:              f.client,
		deployments:         f.factory.Apps().V1().Deployments(),
		replicaSets:         f.factory.Apps().V1().ReplicaSets(),
		pods:                f.factory.Core().V1().Pods(),
		recorder:            f.recorder,
		workers:             1,
		clock:               f.clock,
		terminatingReplicas: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.loop.ShutDown)
	c.enqueueAfter = func(key string, d time.Duration) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.after[key] = d
	}
	c.enqueueRateLimited = func(key string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.rateLimited[key]++
	}
	f.c = c
	f.refresh()
	return f
}

// refresh replaces the informers' stores with the API server's objects,
// the pods with only the fields the controller declares it reads, as the
// host's informers hold them.
func (f *fixture) refresh() {
	f.t.Helper()
	controllertest.Mirror(
		f.t,
		f.client,
		f.factory.Apps().V1().Deployments().Informer().GetStore(),
		appsv1.SchemeGroupVersion.WithResource("deployments"),
	)
	controllertest.Mirror(
		f.t,
		f.client,
		f.factory.Apps().V1().ReplicaSets().Informer().GetStore(),
		appsv1.SchemeGroupVersion.WithResource("replicasets"),
	)
	pods := f.factory.Core().V1().Pods().Informer().GetStore()
	controllertest.Mirror(f.t, f.client, pods, corev1.SchemeGroupVersion.WithResource("pods"))
	var pruned []any
	for _, o := range pods.List() {
		p := o.(*corev1.Pod)
		pruned = append(pruned, controllertest.Pruned(f.t, Descriptor(Options{}), p)[0])
	}
	if err := pods.Replace(pruned, ""); err != nil {
		f.t.Fatal(err)
	}
}

// sync refreshes the caches and syncs ns/name once.
func (f *fixture) sync(name string) error {
	f.t.Helper()
	f.refresh()
	return f.c.sync(f.t.Context(), "ns/"+name)
}

// mustSync is sync that fails the test on an error.
func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
}

// runReplicaSets plays the ReplicaSet controller: every ReplicaSet's
// status reports spec.replicas pods, ready and available when available
// says so.
func (f *fixture) runReplicaSets(available func(*appsv1.ReplicaSet) bool) {
	f.t.Helper()
	for _, rs := range f.replicaSets() {
		n := replicasOf(rs)
		rs.Status.Replicas = n
		rs.Status.FullyLabeledReplicas = n
		rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = 0, 0
		if available == nil || available(rs) {
			rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = n, n
		}
		rs.Status.ObservedGeneration = rs.Generation
		rs.Status.Conditions = nil // a clean sync clears ReplicaFailure
		rs.Status.TerminatingReplicas = ptr.To[int32](0)
		if _, err := f.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(f.t.Context(), rs, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) deployment(name string) *appsv1.Deployment {
	f.t.Helper()
	d, err := f.client.AppsV1().Deployments("ns").Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// update writes d (as a user would) and bumps its generation when the spec
// changed, as the API server does.
func (f *fixture) update(d *appsv1.Deployment) {
	f.t.Helper()
	d.Generation++
	if _, err := f.client.AppsV1().Deployments(d.Namespace).Update(f.t.Context(), d, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// replicaSets returns the API server's ReplicaSets, oldest first.
func (f *fixture) replicaSets() []*appsv1.ReplicaSet {
	f.t.Helper()
	l, err := f.client.AppsV1().ReplicaSets("ns").List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*appsv1.ReplicaSet
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	slices.SortFunc(out, olderFirst)
	return out
}

// sizes renders the ReplicaSets' spec.replicas, oldest first, as "3/1".
func (f *fixture) sizes() string {
	var parts []string
	for _, rs := range f.replicaSets() {
		parts = append(parts, fmt.Sprint(replicasOf(rs)))
	}
	return strings.Join(parts, "/")
}

// events drains the recorder.
func (f *fixture) events() []string {
	return controllertest.Events(f.recorder)
}

// actions returns the recorded client actions as "verb resource[/sub]",
// reads left out.
func (f *fixture) writes() []string {
	return controllertest.Actions(f.client, "get", "list", "watch")
}

// Objects.

var webLabels = map[string]string{"app": "web"}

func webTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

// rolling returns a RollingUpdate Deployment "web" of replicas with the
// given surge and unavailability, image v1, a 600s progress deadline and a
// history limit of 10.
func rolling(replicas int32, surge, unavailable intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: webTemplate("v1"),
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       &surge,
					MaxUnavailable: &unavailable,
				},
			},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

func recreate(replicas int32) *appsv1.Deployment {
	d := rolling(replicas, intstr.FromInt32(0), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return d
}

// ownedRS returns a ReplicaSet as the controller would have made it for d
// with the given image, size and revision, fully available, created at
// epoch plus age seconds.
func ownedRS(
	d *appsv1.Deployment,
	image string,
	replicas int32,
	rev int,
	age int,
) *appsv1.ReplicaSet {
	tmpl := webTemplate(image)
	hash := podtemplate.Hash(&tmpl, nil)
	tmpl.Labels = withLabel(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	name := replicaSetName(d.Name, hash)
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second)),
			Labels:            tmpl.Labels,
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(d, deploymentKind)},
			Annotations: map[string]string{
				annotationRevision:        fmt.Sprint(rev),
				annotationDesiredReplicas: fmt.Sprint(desiredOf(d)),
				annotationMaxReplicas:     fmt.Sprint(desiredOf(d) + maxSurge(d)),
			},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: tmpl,
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:            replicas,
			ReadyReplicas:       replicas,
			AvailableReplicas:   replicas,
			TerminatingReplicas: ptr.To[int32](0),
		},
	}
}

func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) string {
	c := getCondition(d.Status, t)
	if c == nil {
		return "none"
	}
	return string(c.Status) + " " + c.Reason
}
