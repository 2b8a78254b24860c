package daemonset

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

// statusUpdateRetries is how many times a conflicting status write is
// retried on a fresh read before the sync fails (KCM's value).
const statusUpdateRetries = 1

// counts are the status fields a sync computes.
type counts struct {
	desired, current, misscheduled, ready, updated, available, unavailable int32
}

// calculateCounts derives the status counts of ds from its pods by node:
// per node that should run a pod, the oldest of its pods decides ready,
// available and updated; a node with pods that should not run one counts as
// misscheduled.
func calculateCounts(
	ds *appsv1.DaemonSet,
	nodes []*corev1.Node,
	byNode map[string][]*corev1.Pod,
	hash string,
	e eligibility,
	now time.Time,
) counts {
	var s counts
	gen := templateGeneration(ds)
	for _, n := range nodes {
		shouldRun, _ := e.check(n)
		pods := byNode[n.Name]
		if !shouldRun {
			if len(pods) > 0 {
				s.misscheduled++
			}
			continue
		}
		s.desired++
		if len(pods) == 0 {
			continue
		}
		s.current++
		sort.Sort(oldestFirst(pods))
		p := pods[0]
		if podstate.IsReady(p) {
			s.ready++
			if podstate.IsAvailable(p, ds.Spec.MinReadySeconds, now) {
				s.available++
			}
		}
		if isUpdated(p, hash, gen) {
			s.updated++
		}
	}
	s.unavailable = s.desired - s.available
	return s
}

// updateStatus writes ds's status counts (and observedGeneration, when
// observed) unless they are already there, and requeues ds for the moment
// a ready pod may become available.
func (c *controller) updateStatus(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	nodes []*corev1.Node,
	hash string,
	observed bool,
) error {
	byNode, err := c.podsByNode(ctx, ds, false)
	if err != nil {
		return err
	}
	s := calculateCounts(
		ds,
		nodes,
		byNode,
		hash,
		newEligibility(ds, c.comparisonTaints),
		c.clock.Now(),
	)
	if err := c.storeStatus(ctx, ds, s, observed); err != nil {
		return fmt.Errorf("error storing status for daemon set %s: %w", keyOf(ds), err)
	}
	if ds.Spec.MinReadySeconds > 0 && s.ready != s.available {
		// A last line of defence against clock skew: look again then.
		c.enqueueAfter(keyOf(ds), time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	return nil
}

func (c *controller) storeStatus(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	s counts,
	observed bool,
) error {
	st := ds.Status
	if st.DesiredNumberScheduled == s.desired && st.CurrentNumberScheduled == s.current &&
		st.NumberMisscheduled == s.misscheduled && st.NumberReady == s.ready &&
		st.UpdatedNumberScheduled == s.updated && st.NumberAvailable == s.available &&
		st.NumberUnavailable == s.unavailable && st.ObservedGeneration >= ds.Generation {
		return nil
	}
	client := c.client.AppsV1().DaemonSets(ds.Namespace)
	toUpdate := ds.DeepCopy()
	for i := 0; ; i++ {
		if observed {
			toUpdate.Status.ObservedGeneration = ds.Generation
		}
		toUpdate.Status.DesiredNumberScheduled = s.desired
		toUpdate.Status.CurrentNumberScheduled = s.current
		toUpdate.Status.NumberMisscheduled = s.misscheduled
		toUpdate.Status.NumberReady = s.ready
		toUpdate.Status.UpdatedNumberScheduled = s.updated
		toUpdate.Status.NumberAvailable = s.available
		toUpdate.Status.NumberUnavailable = s.unavailable
		updated, err := client.UpdateStatus(ctx, toUpdate, metav1.UpdateOptions{})
		if err == nil {
			if c.staleGuard {
				c.loop.Wrote(keyOf(ds), updated)
			}
			return nil
		}
		if i >= statusUpdateRetries {
			return err
		}
		fresh, getErr := client.Get(ctx, ds.Name, metav1.GetOptions{})
		if getErr != nil {
			return getErr // the counts cannot be trusted on top of an unknown object
		}
		toUpdate = fresh
	}
}

// Pod state.

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}
