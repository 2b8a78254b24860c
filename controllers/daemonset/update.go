package daemonset

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

// rollingUpdate replaces pods of old revisions within the strategy's
// limits. Without surge it deletes old pods, as many as maxUnavailable
// leaves room for (unavailable old pods always), and manage recreates
// them; with surge it asks manage's syncNodes for new pods beside the old
// ones, at most maxSurge at a time (always where the old pod is
// unavailable), and deletes an old pod once its replacement is available.
func (c *controller) rollingUpdate(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	nodes []*corev1.Node,
	hash string,
) error {
	log := logr.FromContextOrDiscard(ctx)
	byNode, err := c.podsByNode(ctx, ds, false)
	if err != nil {
		return err
	}
	maxSurge, maxUnavailable, desired, err := c.updateBudget(ctx, ds, nodes, byNode)
	if err != nil {
		return fmt.Errorf("couldn't get unavailable numbers: %w", err)
	}
	now := c.clock.Now()
	gen := templateGeneration(ds)
	available := func(p *corev1.Pod) bool {
		return podstate.IsAvailable(p, ds.Spec.MinReadySeconds, now)
	}

	if maxSurge == 0 {
		unavailable := 0
		var replace, candidates []string
		for node, pods := range byNode {
			newPod, oldPod, ok := podsOnNodeByRevision(pods, hash, gen)
			if !ok {
				// manage prunes the excess first; meanwhile it counts as
				// unavailable.
				log.V(3).
					Info("DaemonSet has excess pods on node, skipping to allow the core loop to process",
						"node", node)
				unavailable++
				continue
			}
			switch {
			case oldPod == nil && newPod == nil, oldPod != nil && newPod != nil:
				unavailable++ // manage creates or deletes here
			case newPod != nil:
				if !available(newPod) {
					unavailable++
				}
			default:
				switch {
				case !available(oldPod):
					replace = append(replace, oldPod.Name)
					unavailable++
				case unavailable >= maxUnavailable:
				default:
					candidates = append(candidates, oldPod.Name)
				}
			}
		}
		room := min(max(maxUnavailable-unavailable, 0), len(candidates))
		log.V(5).
			Info("DaemonSet allowing replacements", "replacements", len(replace),
				"maxUnavailable", maxUnavailable, "numUnavailable", unavailable, "candidates", len(candidates))
		return c.syncNodes(ctx, ds, append(replace, candidates[:room]...), nil, hash)
	}

	e := newEligibility(ds, c.comparisonTaints)
	shouldRunOn := func(node string) (bool, error) {
		n, err := c.nodeLister.Get(node)
		if err != nil {
			return false, fmt.Errorf("couldn't get node for nodeName %q: %w", node, err)
		}
		run, _ := e.check(n)
		return run, nil
	}
	var del, leaving, candidateNodes, allowedNodes []string
	surging, availableCount := 0, 0
	for node, pods := range byNode {
		newPod, oldPod, ok := podsOnNodeByRevision(pods, hash, gen)
		if !ok {
			log.V(3).
				Info("DaemonSet has excess pods on node, skipping to allow the core loop to process",
					"node", node)
			surging++
			continue
		}
		switch {
		case oldPod != nil:
			if available(oldPod) {
				availableCount++
			}
		case newPod != nil:
			if available(newPod) {
				availableCount++
			}
		}
		switch {
		case oldPod == nil:
			// manage handles this node.
		case newPod == nil:
			run, err := shouldRunOn(node)
			if err != nil {
				return err
			}
			switch {
			case !available(oldPod) && !run:
				del = append(del, oldPod.Name)
			case !available(oldPod):
				allowedNodes = append(allowedNodes, node)
			case !run:
				leaving = append(leaving, oldPod.Name)
			case surging >= maxSurge:
			default:
				candidateNodes = append(candidateNodes, node)
			}
		default:
			if !available(newPod) {
				surging++
				continue
			}
			del = append(del, oldPod.Name)
		}
	}
	// Pods on nodes that should no longer run one go only while enough
	// others are available: the owner expects no availability lost.
	if deletable := min(availableCount-desired, len(leaving)); deletable > 0 {
		for _, name := range leaving[:deletable] {
			p, err := c.podLister.Pods(ds.Namespace).Get(name)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf(
					"couldn't get pod which should be deleted due to scheduling constraints %q: %w",
					name,
					err,
				)
			}
			del = append(del, p.Name)
		}
	}
	room := min(max(maxSurge-surging, 0), len(candidateNodes))
	log.V(5).
		Info("DaemonSet allowing replacements", "replacements", len(allowedNodes), "maxSurge", maxSurge,
			"numSurge", surging, "candidates", len(candidateNodes))
	return c.syncNodes(ctx, ds, del, append(allowedNodes, candidateNodes[:room]...), hash)
}

// podsOnNodeByRevision splits a node's live pods into the current
// revision's and an old one; ok is false when there is more than one of
// either (manage prunes those first).
func podsOnNodeByRevision(
	pods []*corev1.Pod,
	hash string,
	gen *int64,
) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if isUpdated(p, hash, gen) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = p
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = p
		}
	}
	return newPod, oldPod, true
}

// updateBudget returns maxSurge and maxUnavailable scaled to the number of
// nodes that should run a pod (desired), and desired; byNode gains an
// empty entry for every such node without pods. When both limits come out
// 0, one pod may be unavailable.
func (c *controller) updateBudget(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	nodes []*corev1.Node,
	byNode map[string][]*corev1.Pod,
) (maxSurge, maxUnavailable, desired int, err error) {
	e := newEligibility(ds, c.comparisonTaints)
	for _, n := range nodes {
		if run, _ := e.check(n); !run {
			continue
		}
		desired++
		if _, ok := byNode[n.Name]; !ok {
			byNode[n.Name] = nil
		}
	}
	if maxUnavailable, err = unavailableCount(ds, desired); err != nil {
		return -1, -1, -1, fmt.Errorf("invalid value for MaxUnavailable: %w", err)
	}
	if maxSurge, err = surgeCount(ds, desired); err != nil {
		return -1, -1, -1, fmt.Errorf("invalid value for MaxSurge: %w", err)
	}
	if desired > 0 && maxUnavailable == 0 && maxSurge == 0 {
		logr.FromContextOrDiscard(ctx).
			Info("DaemonSet is not configured for surge or unavailability, defaulting " +
				"to accepting unavailability")
		maxUnavailable = 1
	}
	return maxSurge, maxUnavailable, desired, nil
}

// surgeCount is maxSurge scaled to n (percentages round up); 0 unless the
// strategy is RollingUpdate with maxSurge set.
func surgeCount(ds *appsv1.DaemonSet, n int) (int, error) {
	s := ds.Spec.UpdateStrategy
	if s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxSurge == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(s.RollingUpdate.MaxSurge, n, true)
}

// unavailableCount is maxUnavailable scaled to n (percentages round up); 0
// unless the strategy is RollingUpdate.
func unavailableCount(ds *appsv1.DaemonSet, n int) (int, error) {
	s := ds.Spec.UpdateStrategy
	if s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(s.RollingUpdate.MaxUnavailable, n, true)
}

// allowsSurge: the strategy lets a node run an old and a new pod at once.
func allowsSurge(ds *appsv1.DaemonSet) bool {
	n, err := surgeCount(ds, 1)
	return err == nil && n > 0
}
