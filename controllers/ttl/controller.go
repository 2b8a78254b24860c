package ttl

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workers is KCM's: it starts the controller with five, a number no flag
// changes.
const workers = 5

// step is one band of cluster sizes and the TTL that goes with it. The
// bands overlap: the size climbs to the next band once it exceeds max, and
// falls back once it drops below min, so a cluster whose size wavers near
// an edge does not flip every node's annotation back and forth.
type step struct {
	min, max   int
	ttlSeconds int
}

// steps are KCM's, smallest clusters first.
var steps = []step{
	{min: 0, max: 100, ttlSeconds: 0},
	{min: 90, max: 500, ttlSeconds: 15},
	{min: 450, max: 1000, ttlSeconds: 30},
	{min: 900, max: 2000, ttlSeconds: 60},
	{min: 1800, max: math.MaxInt32, ttlSeconds: 300},
}

// size counts the nodes the informer delivered and keeps the band they
// are in. As in KCM, each add or delete moves the band by one step at
// most, so the band depends on the order of events, not on the count alone.
type size struct {
	mu    sync.RWMutex
	nodes int
	step  int
}

// added counts one more node.
func (s *size) added() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes++
	if s.nodes > steps[s.step].max && s.step < len(steps)-1 {
		s.step++
	}
}

// deleted counts one node fewer.
func (s *size) deleted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes--
	if s.nodes < steps[s.step].min && s.step > 0 {
		s.step--
	}
}

// ttlSeconds is the TTL of the current band.
func (s *size) ttlSeconds() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return steps[s.step].ttlSeconds
}

// controller keeps the TTL annotation of every node at the cluster size's
// TTL; keys are node names.
type controller struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	size   size
	loop   *workloop.Loop
}

func newController(cc descriptor.Context) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Core().V1().Nodes()
	c := &controller{client: client, nodes: informer.Lister()}
	// The loop exists before the handler: a running informer (warm
	// standby) calls it at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	// Not Loop.Watch: the handlers also count the cluster's nodes, which set
	// the TTL every node gets.
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.nodeAdded,
		UpdateFunc: func(_, obj any) { c.nodeUpdated(obj) },
		DeleteFunc: c.nodeDeleted,
	})
	if err != nil {
		c.loop.ShutDown()
		return nil, fmt.Errorf("adding the node handler: %w", err)
	}
	c.loop.WaitFor(reg.HasSynced)
	return c, nil
}

// Run waits for the cache, then keeps the annotations until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Keeping nodes' TTL annotations", "annotation", Annotation)
	defer log.Info("Stopped keeping nodes' TTL annotations")
	return c.loop.RunWorkers(ctx, workers)
}

// nodeAdded counts the node before queueing it, so that its sync sees a
// band that includes it.
func (c *controller) nodeAdded(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	c.size.added()
	c.loop.Add(node.Name)
}

// nodeUpdated queues the node: every update is a chance to bring its
// annotation to the current band, which is how nodes other than a new one
// learn of a change of band (a kubelet updates its node's status at least
// every few minutes).
func (c *controller) nodeUpdated(obj any) {
	if node, ok := obj.(*corev1.Node); ok {
		c.loop.Add(node.Name)
	}
}

// nodeDeleted counts one node fewer; nothing is queued.
func (c *controller) nodeDeleted(obj any) {
	if _, ok := workloop.Object[*corev1.Node](obj); ok {
		c.size.deleted()
	}
}

// currentTTL is the node's annotation as a whole number, if it is one.
func currentTTL(node *corev1.Node) (int, bool) {
	v, ok := node.Annotations[Annotation]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// ttlPatch is the strategic-merge patch that sets the annotation alone.
func ttlPatch(seconds int) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{Annotation: strconv.Itoa(seconds)}}})
}

// sync patches the node's annotation when it is missing, not a number, or
// not the band's TTL.
func (c *controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("node", name)
	want := c.size.ttlSeconds()
	got, ok := currentTTL(node)
	if ok && got == want {
		return nil
	}
	if v, set := node.Annotations[Annotation]; set && !ok {
		log.Info("Replacing a TTL annotation that is not a whole number", "value", v)
	}
	patch, err := ttlPatch(want)
	if err != nil {
		return err
	}
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType,
		patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting the TTL annotation of node %s to %d: %w", name, want, err)
	}
	log.V(2).Info("Set the TTL annotation", "ttl", time.Duration(want)*time.Second)
	return nil
}
