package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	netutils "k8s.io/utils/net"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const (
	// workers is KCM's: thirty node updates at once.
	workers = 30
	// patchAttempts is how many times KCM tries to write a node's CIDRs
	// before it gives the allocation up.
	patchAttempts = 3
)

// The reasons of the controller's events, on the node, as in KCM.
const (
	ReasonCIDRNotAvailable     = "CIDRNotAvailable"
	reasonCIDRAssignmentFailed = "CIDRAssignmentFailed"
)

// controller allocates node CIDRs; keys are node names.
type controller struct {
	client   kubernetes.Interface
	nodes    corelisters.NodeLister
	synced   cache.InformerSynced
	sets     []*cidrSet // by cluster CIDR index
	recorder record.EventRecorder
	loop     *workloop.Loop
}

func newController(ctx context.Context, cc descriptor.Context,
	s settings) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	c := &controller{client: client, recorder: cc.EventRecorder}
	log := logr.FromContextOrDiscard(ctx)
	for i, cidr := range s.clusterCIDRs {
		set, err := newCIDRSet(cidr, s.maskSizes[i])
		if err != nil {
			return nil, fmt.Errorf("--cluster-cidr %s: %w", cidr, err)
		}
		c.sets = append(c.sets, set)
	}
	// Service addresses are never handed to pods: every node CIDR that
	// overlaps a Service CIDR is taken from the start.
	for _, svc := range s.serviceCIDRs {
		for _, set := range c.sets {
			if !overlaps(set.cluster, svc) {
				continue
			}
			if err := set.Occupy(svc); err != nil {
				log.Error(err, "Could not keep the Service CIDR out of the cluster CIDR",
					"serviceCIDR", svc, "clusterCIDR", set.cluster)
			}
		}
	}
	informer := cc.InformerFactory.Core().V1().Nodes()
	c.nodes = informer.Lister()
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	// One handler both releases and enqueues, so that a node deleted
	// before another is added frees its CIDRs before the other is synced.
	// Not Loop.Watch: a deletion releases the node's CIDRs in the handler; the
	// handlers feed the staleness guard themselves (Observe).
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueue(obj) },
		UpdateFunc: func(_, obj any) {
			c.enqueue(obj)
		},
		DeleteFunc: func(obj any) { c.release(log, obj) },
	})
	if err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	c.synced = reg.HasSynced
	c.loop.WaitFor(reg.HasSynced)
	return c, nil
}

func overlaps(a, b *net.IPNet) bool {
	return a.Contains(b.IP.Mask(a.Mask)) || b.Contains(a.IP.Mask(b.Mask))
}

func (c *controller) enqueue(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	c.loop.Observe(node)
	c.loop.Add(node.Name)
}

// release frees a deleted node's CIDRs.
func (c *controller) release(log logr.Logger, obj any) {
	c.loop.ObserveDelete(obj)
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	for i, s := range node.Spec.PodCIDRs {
		_, cidr, err := netutils.ParseCIDRSloppy(s)
		if err == nil && i >= len(c.sets) {
			err = fmt.Errorf("no cluster CIDR at index %d", i)
		}
		if err == nil {
			err = c.sets[i].Release(cidr)
		}
		if err != nil {
			log.Error(err, "Could not release the CIDR of a deleted node",
				"node", node.Name, "podCIDR", s)
			continue
		}
		log.V(4).Info("Released the CIDR of a deleted node", "node", node.Name, "podCIDR", s)
	}
}

// Run waits for the node cache, marks the CIDRs nodes hold used, then
// allocates until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		c.loop.ShutDown()
		return nil
	}
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.loop.ShutDown()
		return err
	}
	for _, node := range all {
		if err := c.occupy(node); err != nil {
			// KCM cannot start either: what a node holds would be lost.
			c.loop.ShutDown()
			return fmt.Errorf("marking the CIDRs nodes hold as used: %w", err)
		}
	}
	cidrs := make([]string, len(c.sets))
	for i, s := range c.sets {
		cidrs[i] = s.cluster.String()
	}
	log.Info("Allocating node CIDRs", "clusterCIDRs", cidrs, "nodes", len(all))
	defer log.Info("Stopped allocating node CIDRs")
	return c.loop.RunWorkers(ctx, workers)
}

// occupy marks node's CIDRs used.
func (c *controller) occupy(node *corev1.Node) error {
	for i, s := range node.Spec.PodCIDRs {
		_, cidr, err := netutils.ParseCIDRSloppy(s)
		if err != nil {
			return fmt.Errorf("node %s: podCIDRs[%d] %q: %w", node.Name, i, s, err)
		}
		if i >= len(c.sets) {
			return fmt.Errorf("node %s: podCIDRs[%d] %s has no cluster CIDR at that index "+
				"in --cluster-cidr", node.Name, i, s)
		}
		if err := c.sets[i].Occupy(cidr); err != nil {
			return fmt.Errorf("node %s: podCIDRs[%d]: %w", node.Name, i, err)
		}
	}
	return nil
}

// sync gives a node without CIDRs one from each cluster CIDR, or marks the
// CIDRs it has used.
func (c *controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil // released by the delete handler
	case err != nil:
		return err
	}
	if node.DeletionTimestamp != nil {
		return nil
	}
	if len(node.Spec.PodCIDRs) > 0 {
		return c.occupy(node)
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("node", name)
	taken := make([]*net.IPNet, 0, len(c.sets))
	for i, s := range c.sets {
		cidr, err := s.AllocateNext()
		if err != nil {
			c.event(node, ReasonCIDRNotAvailable)
			c.giveBack(log, taken)
			return fmt.Errorf("allocating a CIDR of cluster CIDR %d (%s) to node %s: %w",
				i, s.cluster, name, err)
		}
		taken = append(taken, cidr)
	}
	return c.assign(ctx, log, name, taken)
}

// giveBack releases CIDRs this controller allocated but did not write.
func (c *controller) giveBack(log logr.Logger, cidrs []*net.IPNet) {
	for i, cidr := range cidrs {
		if err := c.sets[i].Release(cidr); err != nil {
			log.Error(err, "Could not release an unused CIDR", "podCIDR", cidr)
		}
	}
}

// assign writes cidrs to the node, unless it has CIDRs by now.
func (c *controller) assign(ctx context.Context, log logr.Logger, name string,
	cidrs []*net.IPNet) error {
	node, err := c.nodes.Get(name)
	if err != nil {
		c.giveBack(log, cidrs)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	want := make([]string, len(cidrs))
	for i, cidr := range cidrs {
		want[i] = cidr.String()
	}
	if len(node.Spec.PodCIDRs) > 0 {
		if slices.Equal(node.Spec.PodCIDRs, want) {
			return nil
		}
		log.Info("The node has CIDRs already; releasing the ones just allocated",
			"podCIDRs", node.Spec.PodCIDRs)
		c.giveBack(log, cidrs)
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{
		"podCIDR": want[0], "podCIDRs": want}})
	if err != nil {
		c.giveBack(log, cidrs)
		return err
	}
	for range patchAttempts {
		var updated *corev1.Node
		updated, err = c.client.CoreV1().Nodes().Patch(ctx, name,
			types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			c.loop.Wrote(name, updated)
			log.Info("Set the node's pod CIDRs", "podCIDRs", want)
			return nil
		}
	}
	c.event(node, reasonCIDRAssignmentFailed)
	// After a timeout the write may have happened: the CIDRs stay taken
	// (a restart frees them if it did not), as in KCM.
	if !apierrors.IsServerTimeout(err) {
		c.giveBack(log, cidrs)
	}
	return fmt.Errorf("writing pod CIDRs %v to node %s: %w", want, name, err)
}

// event records KCM's node status change event.
func (c *controller) event(node *corev1.Node, reason string) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name,
		UID: node.UID}
	c.recorder.Eventf(ref, corev1.EventTypeNormal, reason, "Node %s status is now: %s",
		node.Name, reason)
}
