package shardgroup

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/ctrlhost/ctrlhost/shard"
)

// Clientset is a kubernetes.Interface whose lists and watches of the
// resources a sharded controller caches hold only the objects of a set of
// slots, each through a Filter (server-side ShardSelector, client-side
// check). It is meant for a slot's informer factory: the typed informers
// client-go builds over it cache only their slots. Everything else (other
// resources, every get and write) goes to the wrapped clientset as is.
//
// Filtered: pods, replicationcontrollers, serviceaccounts, configmaps,
// secrets, services, endpoints, events and namespaces (by name under
// shard.ByNamespace keying) in core/v1; replicasets, deployments, daemonsets,
// statefulsets and controllerrevisions in apps/v1; jobs and cronjobs in
// batch/v1. An informer of any other resource caches every slot's objects
// (Filtered tells which are filtered).
type Clientset struct {
	kubernetes.Interface
	space          shard.Space
	bySlot, byName *selection

	mu      sync.Mutex
	applied map[string]*counters // by resource
}

// NewClientset returns inner filtered to slots of space.
func NewClientset(inner kubernetes.Interface, space shard.Space, slots []int) (*Clientset, error) {
	bySlot, err := newSelection(space, slots, false)
	if err != nil {
		return nil, err
	}
	byName, err := newSelection(space, slots, true)
	if err != nil {
		return nil, err
	}
	return &Clientset{
		Interface: inner,
		space:     space,
		bySlot:    bySlot,
		byName:    byName,
		applied:   map[string]*counters{},
	}, nil
}

// IsWatchListSemanticsUnSupported passes on what the wrapped clientset
// says (a fake clientset cannot stream lists), so that informers over the
// Clientset list as they would over it.
func (c *Clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

// Filtered reports whether the Clientset filters resource (its plural
// name, e.g. "pods").
func Filtered(group, resource string) bool {
	switch group + "/" + resource {
	case "/pods",
		"/replicationcontrollers",
		"/serviceaccounts",
		"/configmaps",
		"/secrets",
		"/services",
		"/endpoints",
		"/events",
		"/namespaces",
		"apps/replicasets",
		"apps/deployments",
		"apps/daemonsets",
		"apps/statefulsets",
		"apps/controllerrevisions",
		"batch/jobs",
		"batch/cronjobs":
		return true
	}
	return false
}

// ServerApplied reports, for resource, what Filter.ServerApplied reports.
func (c *Clientset) ServerApplied(resource string) (applied, known bool) {
	return appliedState(c.status(resource).applied.Load())
}

// Dropped returns, for resource, how many objects the client had to drop
// (Filter.Dropped).
func (c *Clientset) Dropped(resource string) int64 { return c.status(resource).dropped.Load() }

func (c *Clientset) status(resource string) *counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.applied[resource]
	if !ok {
		s = new(counters)
		c.applied[resource] = s
	}
	return s
}

// typedLW is a typed client's list and watch.
type typedLW[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// filter returns the Filter of resource over lw.
func filter[L runtime.Object](c *Clientset, resource string, lw typedLW[L], byName bool) *Filter {
	sel := c.bySlot
	if byName {
		sel = c.byName
	}
	f := sel.over(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return lw.List(ctx, o)
		},
		WatchFuncWithContext: lw.Watch,
	})
	f.shared = c.status(resource)
	return f
}

func list[L runtime.Object](
	ctx context.Context,
	c *Clientset,
	resource string,
	lw typedLW[L],
	byName bool,
	o metav1.ListOptions,
) (L, error) {
	var zero L
	obj, err := filter(c, resource, lw, byName).ListWithContext(ctx, o)
	if err != nil {
		return zero, err
	}
	l, ok := obj.(L)
	if !ok {
		return zero, fmt.Errorf("shard: %s list is a %T", resource, obj)
	}
	return l, nil
}

func watchOf[L runtime.Object](
	ctx context.Context,
	c *Clientset,
	resource string,
	lw typedLW[L],
	byName bool,
	o metav1.ListOptions,
) (watch.Interface, error) {
	return filter(c, resource, lw, byName).WatchWithContext(ctx, o)
}

// CoreV1 filters core/v1's cached resources.
func (c *Clientset) CoreV1() corev1client.CoreV1Interface {
	return coreV1{c.Interface.CoreV1(), c}
}

// AppsV1 filters apps/v1's cached resources.
func (c *Clientset) AppsV1() appsv1client.AppsV1Interface {
	return appsV1{c.Interface.AppsV1(), c}
}

// BatchV1 filters batch/v1's cached resources.
func (c *Clientset) BatchV1() batchv1client.BatchV1Interface {
	return batchV1{c.Interface.BatchV1(), c}
}

type coreV1 struct {
	corev1client.CoreV1Interface
	c *Clientset
}

func (g coreV1) Pods(ns string) corev1client.PodInterface {
	return pods{g.CoreV1Interface.Pods(ns), g.c}
}
func (g coreV1) ReplicationControllers(ns string) corev1client.ReplicationControllerInterface {
	return rcs{g.CoreV1Interface.ReplicationControllers(ns), g.c}
}
func (g coreV1) ServiceAccounts(ns string) corev1client.ServiceAccountInterface {
	return serviceAccounts{g.CoreV1Interface.ServiceAccounts(ns), g.c}
}
func (g coreV1) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return configMaps{g.CoreV1Interface.ConfigMaps(ns), g.c}
}
func (g coreV1) Secrets(ns string) corev1client.SecretInterface {
	return secrets{g.CoreV1Interface.Secrets(ns), g.c}
}
func (g coreV1) Services(ns string) corev1client.ServiceInterface {
	return services{g.CoreV1Interface.Services(ns), g.c}
}
func (g coreV1) Endpoints(ns string) corev1client.EndpointsInterface {
	return endpoints{g.CoreV1Interface.Endpoints(ns), g.c}
}
func (g coreV1) Events(ns string) corev1client.EventInterface {
	return events{g.CoreV1Interface.Events(ns), g.c}
}
func (g coreV1) Namespaces() corev1client.NamespaceInterface {
	return namespaces{g.CoreV1Interface.Namespaces(), g.c}
}

type pods struct {
	corev1client.PodInterface
	c *Clientset
}

func (r pods) List(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	return list(ctx, r.c, "pods", r.PodInterface, false, o)
}
func (r pods) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "pods", r.PodInterface, false, o)
}

type rcs struct {
	corev1client.ReplicationControllerInterface
	c *Clientset
}

func (r rcs) List(
	ctx context.Context,
	o metav1.ListOptions,
) (*corev1.ReplicationControllerList, error) {
	return list(ctx, r.c, "replicationcontrollers", r.ReplicationControllerInterface, false, o)
}
func (r rcs) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "replicationcontrollers", r.ReplicationControllerInterface, false, o)
}

type serviceAccounts struct {
	corev1client.ServiceAccountInterface
	c *Clientset
}

func (r serviceAccounts) List(
	ctx context.Context,
	o metav1.ListOptions,
) (*corev1.ServiceAccountList, error) {
	return list(ctx, r.c, "serviceaccounts", r.ServiceAccountInterface, false, o)
}
func (r serviceAccounts) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "serviceaccounts", r.ServiceAccountInterface, false, o)
}

type configMaps struct {
	corev1client.ConfigMapInterface
	c *Clientset
}

func (r configMaps) List(ctx context.Context, o metav1.ListOptions) (*corev1.ConfigMapList, error) {
	return list(ctx, r.c, "configmaps", r.ConfigMapInterface, false, o)
}
func (r configMaps) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "configmaps", r.ConfigMapInterface, false, o)
}

type secrets struct {
	corev1client.SecretInterface
	c *Clientset
}

func (r secrets) List(ctx context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
	return list(ctx, r.c, "secrets", r.SecretInterface, false, o)
}
func (r secrets) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "secrets", r.SecretInterface, false, o)
}

type services struct {
	corev1client.ServiceInterface
	c *Clientset
}

func (r services) List(ctx context.Context, o metav1.ListOptions) (*corev1.ServiceList, error) {
	return list(ctx, r.c, "services", r.ServiceInterface, false, o)
}
func (r services) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "services", r.ServiceInterface, false, o)
}

type endpoints struct {
	corev1client.EndpointsInterface
	c *Clientset
}

func (r endpoints) List(ctx context.Context, o metav1.ListOptions) (*corev1.EndpointsList, error) {
	return list(ctx, r.c, "endpoints", r.EndpointsInterface, false, o)
}
func (r endpoints) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "endpoints", r.EndpointsInterface, false, o)
}

type events struct {
	corev1client.EventInterface
	c *Clientset
}

func (r events) List(ctx context.Context, o metav1.ListOptions) (*corev1.EventList, error) {
	return list(ctx, r.c, "events", r.EventInterface, false, o)
}
func (r events) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "events", r.EventInterface, false, o)
}

// namespaces are cluster-scoped: under shard.ByNamespace keying a Namespace's
// key is its name, which only the client can hash.
type namespaces struct {
	corev1client.NamespaceInterface
	c *Clientset
}

func (r namespaces) byName() bool { return r.c.space.Keying == shard.ByNamespace }

func (r namespaces) List(ctx context.Context, o metav1.ListOptions) (*corev1.NamespaceList, error) {
	if !r.byName() {
		return r.NamespaceInterface.List(ctx, o)
	}
	return list(ctx, r.c, "namespaces", r.NamespaceInterface, true, o)
}
func (r namespaces) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if !r.byName() {
		return r.NamespaceInterface.Watch(ctx, o)
	}
	return watchOf(ctx, r.c, "namespaces", r.NamespaceInterface, true, o)
}

type appsV1 struct {
	appsv1client.AppsV1Interface
	c *Clientset
}

func (g appsV1) ReplicaSets(ns string) appsv1client.ReplicaSetInterface {
	return replicaSets{g.AppsV1Interface.ReplicaSets(ns), g.c}
}
func (g appsV1) Deployments(ns string) appsv1client.DeploymentInterface {
	return deployments{g.AppsV1Interface.Deployments(ns), g.c}
}
func (g appsV1) DaemonSets(ns string) appsv1client.DaemonSetInterface {
	return daemonSets{g.AppsV1Interface.DaemonSets(ns), g.c}
}
func (g appsV1) StatefulSets(ns string) appsv1client.StatefulSetInterface {
	return statefulSets{g.AppsV1Interface.StatefulSets(ns), g.c}
}
func (g appsV1) ControllerRevisions(ns string) appsv1client.ControllerRevisionInterface {
	return revisions{g.AppsV1Interface.ControllerRevisions(ns), g.c}
}

type replicaSets struct {
	appsv1client.ReplicaSetInterface
	c *Clientset
}

func (r replicaSets) List(
	ctx context.Context,
	o metav1.ListOptions,
) (*appsv1.ReplicaSetList, error) {
	return list(ctx, r.c, "replicasets", r.ReplicaSetInterface, false, o)
}
func (r replicaSets) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "replicasets", r.ReplicaSetInterface, false, o)
}

type deployments struct {
	appsv1client.DeploymentInterface
	c *Clientset
}

func (r deployments) List(
	ctx context.Context,
	o metav1.ListOptions,
) (*appsv1.DeploymentList, error) {
	return list(ctx, r.c, "deployments", r.DeploymentInterface, false, o)
}
func (r deployments) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "deployments", r.DeploymentInterface, false, o)
}

type daemonSets struct {
	appsv1client.DaemonSetInterface
	c *Clientset
}

func (r daemonSets) List(ctx context.Context, o metav1.ListOptions) (*appsv1.DaemonSetList, error) {
	return list(ctx, r.c, "daemonsets", r.DaemonSetInterface, false, o)
}
func (r daemonSets) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "daemonsets", r.DaemonSetInterface, false, o)
}

type statefulSets struct {
	appsv1client.StatefulSetInterface
	c *Clientset
}

func (r statefulSets) List(
	ctx context.Context,
	o metav1.ListOptions,
) (*appsv1.StatefulSetList, error) {
	return list(ctx, r.c, "statefulsets", r.StatefulSetInterface, false, o)
}
func (r statefulSets) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "statefulsets", r.StatefulSetInterface, false, o)
}

type revisions struct {
	appsv1client.ControllerRevisionInterface
	c *Clientset
}

func (r revisions) List(
	ctx context.Context,
	o metav1.ListOptions,
) (*appsv1.ControllerRevisionList, error) {
	return list(ctx, r.c, "controllerrevisions", r.ControllerRevisionInterface, false, o)
}
func (r revisions) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "controllerrevisions", r.ControllerRevisionInterface, false, o)
}

type batchV1 struct {
	batchv1client.BatchV1Interface
	c *Clientset
}

func (g batchV1) Jobs(ns string) batchv1client.JobInterface {
	return jobs{g.BatchV1Interface.Jobs(ns), g.c}
}
func (g batchV1) CronJobs(ns string) batchv1client.CronJobInterface {
	return cronJobs{g.BatchV1Interface.CronJobs(ns), g.c}
}

type jobs struct {
	batchv1client.JobInterface
	c *Clientset
}

func (r jobs) List(ctx context.Context, o metav1.ListOptions) (*batchv1.JobList, error) {
	return list(ctx, r.c, "jobs", r.JobInterface, false, o)
}
func (r jobs) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "jobs", r.JobInterface, false, o)
}

type cronJobs struct {
	batchv1client.CronJobInterface
	c *Clientset
}

func (r cronJobs) List(ctx context.Context, o metav1.ListOptions) (*batchv1.CronJobList, error) {
	return list(ctx, r.c, "cronjobs", r.CronJobInterface, false, o)
}
func (r cronJobs) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, r.c, "cronjobs", r.CronJobInterface, false, o)
}
