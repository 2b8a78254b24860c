package servicecidr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1apply "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const (
	// workers is KCM's: five.
	workers = 5
	// maxRetries is KCM's: a ServiceCIDR whose sync failed this many
	// times in a row is dropped until its next event.
	maxRetries = 15
	// deletionGrace is how long after its deletion a ServiceCIDR nothing
	// blocks keeps its finalizer, KCM's 10s: time for every API server's
	// allocator to stop allocating from it.
	deletionGrace = 10 * time.Second
	// fieldManager is KCM's, for the status it applies.
	fieldManager = "service-cidr-controller"
)

// The Ready condition's texts and the warning event, as KCM writes them.
const (
	messageReady       = "Kubernetes Service CIDR is ready"
	messageTerminating = "There are still IPAddresses referencing the ServiceCIDR, " +
		"please remove them or create a new ServiceCIDR"
	eventReadyFailed   = "KubernetesServiceCIDRError"
	messageReadyFailed = "The ServiceCIDR Status can not be set to Ready=True"
)

// controller keeps ServiceCIDRs' finalizer and Ready condition; keys are
// ServiceCIDR names.
type controller struct {
	client   kubernetes.Interface
	cidrs    networkinglisters.ServiceCIDRLister
	ips      networkinglisters.IPAddressLister
	recorder record.EventRecorder
	clock    clock.PassiveClock
	loop     *workloop.Loop
}

func newController(cc descriptor.Context) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	cidrInformer := cc.InformerFactory.Networking().V1().ServiceCIDRs()
	ipInformer := cc.InformerFactory.Networking().V1().IPAddresses()
	c := &controller{
		client:   client,
		cidrs:    cidrInformer.Lister(),
		ips:      ipInformer.Lister(),
		recorder: cc.EventRecorder,
		clock:    clock.RealClock{},
	}
	// The loop exists before the handlers: a running informer (warm
	// standby) calls them at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{MaxRetries: maxRetries,
		Metrics: cc.Metrics})
	if err := c.watch(cidrInformer.Informer(), ipInformer.Informer()); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// watch adds the handlers and makes the loop wait for both caches.
func (c *controller) watch(cidrInformer, ipInformer cache.SharedIndexInformer) error {
	// Not Loop.Watch: an added ServiceCIDR also queues every cached one that
	// shares an address with it (cidrAdded), whose deletion it may unblock.
	cidrReg, err := cidrInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			for _, name := range c.cidrAdded(obj) {
				c.loop.Add(name)
			}
		},
		UpdateFunc: func(_, obj any) { c.enqueueKey(obj) },
		DeleteFunc: c.enqueueKey,
	})
	if err != nil {
		return fmt.Errorf("adding the ServiceCIDR handler: %w", err)
	}
	ipChanged := func(obj any) {
		for _, name := range c.holdersOf(obj) {
			c.loop.Add(name)
		}
	}
	// Not Loop.Watch: an IPAddress queues every CIDR that holds it
	// (holdersOf), not a key of its own kind.
	ipReg, err := ipInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    ipChanged,
		DeleteFunc: ipChanged,
	})
	if err != nil {
		return fmt.Errorf("adding the IPAddress handler: %w", err)
	}
	c.loop.WaitFor(cidrReg.HasSynced, ipReg.HasSynced)
	return nil
}

// Run waits for the caches, then keeps ServiceCIDRs until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Keeping ServiceCIDRs", "finalizer", Finalizer, "workers", workers)
	defer log.Info("Stopped keeping ServiceCIDRs")
	return c.loop.RunWorkers(ctx, workers)
}

func (c *controller) enqueueKey(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.loop.Add(key)
	}
}

// cidrAdded: a new ServiceCIDR, and every cached one sharing an address
// with it, whose deletion it may unblock.
func (c *controller) cidrAdded(obj any) []string {
	sc, ok := obj.(*networkingv1.ServiceCIDR)
	if !ok {
		return nil
	}
	out := []string{sc.Name}
	for _, cidr := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(cidr); err == nil {
			for _, name := range names(overlapping(c.cidrs, p)) {
				if !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
		}
	}
	return out
}

// holdersOf: for an IPAddress the API server's allocator made (a
// tombstone's last state included), the ServiceCIDRs that could have
// allocated it, whose deletion it may block or, gone, unblock.
func (c *controller) holdersOf(obj any) []string {
	ip, ok := workloop.Object[*networkingv1.IPAddress](obj)
	if !ok || ip.Labels[networkingv1.LabelManagedBy] != allocatorName {
		return nil
	}
	addr, err := netip.ParseAddr(ip.Name)
	if err != nil {
		return nil
	}
	return names(holding(c.cidrs, addr))
}

// sync keeps one ServiceCIDR: one not being deleted gets the finalizer and
// Ready=True; one being deleted keeps the finalizer, with Ready=False
// (Terminating), while an address only it could have allocated is
// allocated, and loses it deletionGrace after its deletion once none is.
func (c *controller) sync(ctx context.Context, name string) error {
	sc, err := c.cidrs.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("serviceCIDR", name)
	if sc.DeletionTimestamp != nil {
		free, err := c.deletable(ctx, sc)
		if err != nil {
			return err
		}
		if !free {
			return c.setReady(ctx, sc, metav1.ConditionFalse,
				networkingv1.ServiceCIDRReasonTerminating, messageTerminating)
		}
		if wait := deletionGrace - c.clock.Since(sc.DeletionTimestamp.Time); wait > 0 {
			return workloop.RequeueAfter(wait)
		}
		if !slices.Contains(sc.Finalizers, Finalizer) {
			return nil
		}
		if err := c.patchFinalizers(ctx, name, map[string]any{
			"$deleteFromPrimitiveList/finalizers": []string{Finalizer}}); err != nil {
			return err
		}
		log.V(4).Info("Removed the finalizer")
		return nil
	}
	if !slices.Contains(sc.Finalizers, Finalizer) {
		if err := c.patchFinalizers(ctx, name,
			map[string]any{"finalizers": []string{Finalizer}}); err != nil {
			return err
		}
		log.V(4).Info("Added the finalizer")
	}
	if err := c.setReady(ctx, sc, metav1.ConditionTrue, "", messageReady); err != nil {
		log.Info("Could not set the Ready condition", "err", err.Error())
		c.recorder.Event(sc, corev1.EventTypeWarning, eventReadyFailed, messageReadyFailed)
		return err
	}
	return nil
}

// deletable: another ServiceCIDR covers each of sc's ranges, or no address
// the API server allocated is one only sc could have allocated.
func (c *controller) deletable(ctx context.Context, sc *networkingv1.ServiceCIDR) (bool, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("serviceCIDR", sc.Name)
	covered := true
	for _, cidr := range sc.Spec.CIDRs {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			continue
		}
		if by := covering(c.cidrs, p); len(by) == 0 || len(by) == 1 && by[0].Name == sc.Name {
			covered = false
		}
	}
	if covered {
		log.Info("The ServiceCIDR being deleted is covered by others: releasing it")
		return true, nil
	}
	for _, cidr := range sc.Spec.CIDRs {
		ips, err := c.ips.List(labels.SelectorFromSet(labels.Set{
			networkingv1.LabelIPAddressFamily: string(family(cidr)),
			networkingv1.LabelManagedBy:       allocatorName,
		}))
		if err != nil {
			return false, err
		}
		for _, ip := range ips {
			addr, err := netip.ParseAddr(ip.Name)
			if err != nil {
				log.Info("Skipping an IPAddress whose name is no address", "ipAddress", ip.Name)
				continue
			}
			if by := holding(c.cidrs, addr); len(by) == 1 && by[0].Name == sc.Name {
				log.Info("The ServiceCIDR being deleted still holds an address",
					"ipAddress", addr.String())
				return false, nil
			}
		}
	}
	log.Info("The ServiceCIDR being deleted holds no address: releasing it")
	return true, nil
}

// patchFinalizers applies a strategic merge patch of metadata; a
// ServiceCIDR gone in the meantime is no error.
func (c *controller) patchFinalizers(ctx context.Context, name string, meta map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = c.client.NetworkingV1().ServiceCIDRs().Patch(ctx, name,
		types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching the finalizers of ServiceCIDR %s: %w", name, err)
	}
	return nil
}

// setReady applies the Ready condition unless it already has this status,
// reason and message; the transition time is now.
func (c *controller) setReady(ctx context.Context, sc *networkingv1.ServiceCIDR,
	status metav1.ConditionStatus, reason, message string) error {
	if cur := apimeta.FindStatusCondition(sc.Status.Conditions,
		networkingv1.ServiceCIDRConditionReady); cur != nil &&
		cur.Status == status && cur.Reason == reason && cur.Message == message {
		return nil
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Writing the Ready condition",
		"serviceCIDR", sc.Name, "status", status, "reason", reason)
	apply := networkingv1apply.ServiceCIDR(sc.Name).WithStatus(
		networkingv1apply.ServiceCIDRStatus().WithConditions(metav1apply.Condition().
			WithType(networkingv1.ServiceCIDRConditionReady).
			WithStatus(status).
			WithReason(reason).
			WithMessage(message).
			WithLastTransitionTime(metav1.NewTime(c.clock.Now()))))
	if _, err := c.client.NetworkingV1().ServiceCIDRs().ApplyStatus(ctx, apply,
		metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("applying the Ready condition of ServiceCIDR %s: %w", sc.Name, err)
	}
	return nil
}
