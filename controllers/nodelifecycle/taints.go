package nodelifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// conditionTaints maps a node condition's status to the NoSchedule taint
// it calls for (TaintNodesByCondition).
var conditionTaints = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeReady: {
		corev1.ConditionFalse:   corev1.TaintNodeNotReady,
		corev1.ConditionUnknown: corev1.TaintNodeUnreachable,
	},
	corev1.NodeMemoryPressure:     {corev1.ConditionTrue: corev1.TaintNodeMemoryPressure},
	corev1.NodeDiskPressure:       {corev1.ConditionTrue: corev1.TaintNodeDiskPressure},
	corev1.NodeNetworkUnavailable: {corev1.ConditionTrue: corev1.TaintNodeNetworkUnavailable},
	corev1.NodePIDPressure:        {corev1.ConditionTrue: corev1.TaintNodePIDPressure},
}

// conditionTaintKeys are the taint keys conditionTaints can give.
var conditionTaintKeys = map[string]bool{
	corev1.TaintNodeNotReady: true, corev1.TaintNodeUnreachable: true,
	corev1.TaintNodeMemoryPressure: true, corev1.TaintNodeDiskPressure: true,
	corev1.TaintNodeNetworkUnavailable: true, corev1.TaintNodePIDPressure: true,
}

// Labels kept equal to their stable counterparts: the beta OS and
// architecture labels, added when missing.
var betaLabels = []struct{ stable, beta string }{
	{corev1.LabelOSStable, "beta.kubernetes.io/os"},
	{corev1.LabelArchStable, "beta.kubernetes.io/arch"},
}

// taintBackoff is KCM's for taint writes that conflict.
var taintBackoff = wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Jitter: 1.0}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}

// syncNode keeps a node's condition and unschedulable NoSchedule taints,
// and its beta labels.
func (c *controller) syncNode(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		c.nodesToRetry.Delete(name)
		return nil
	case err != nil:
		return err
	}
	taintErr := c.noScheduleTaints(ctx, node)
	if taintErr != nil {
		logr.FromContextOrDiscard(ctx).Error(taintErr, "Failed to taint NoSchedule on node",
			"node", name)
	}
	labelErr := c.reconcileLabels(ctx, node)
	if labelErr != nil {
		logr.FromContextOrDiscard(ctx).Error(labelErr, "Failed to reconcile labels for node",
			"node", name)
	}
	if taintErr != nil || labelErr != nil {
		return fmt.Errorf("node %s: its taints or labels could not be written", name)
	}
	return nil
}

func (c *controller) noScheduleTaints(ctx context.Context, node *corev1.Node) error {
	var want []corev1.Taint
	for _, cond := range node.Status.Conditions {
		if key, ok := conditionTaints[cond.Type][cond.Status]; ok {
			want = append(want, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	if node.Spec.Unschedulable {
		want = append(want, corev1.Taint{Key: corev1.TaintNodeUnschedulable,
			Effect: corev1.TaintEffectNoSchedule})
	}
	var have []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule &&
			(t.Key == corev1.TaintNodeUnschedulable || conditionTaintKeys[t.Key]) {
			have = append(have, t)
		}
	}
	var add, remove []corev1.Taint
	for _, t := range want {
		if !hasTaint(have, t) {
			add = append(add, t)
		}
	}
	for _, t := range have {
		if !hasTaint(want, t) {
			remove = append(remove, t)
		}
	}
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	if !c.swapTaints(ctx, node, add, remove) {
		return fmt.Errorf("failed to swap taints of node %s", node.Name)
	}
	return nil
}

// swapTaints adds add (stamped now) and then removes remove, each by a
// patch of the node's taints; false, logged, if either fails.
func (c *controller) swapTaints(ctx context.Context, node *corev1.Node,
	add, remove []corev1.Taint) bool {
	log := logr.FromContextOrDiscard(ctx).WithValues("node", node.Name)
	stamped := make([]corev1.Taint, len(add))
	for i, t := range add {
		now := c.now()
		t.TimeAdded = &now
		stamped[i] = t
	}
	if err := c.addTaints(ctx, node.Name, stamped...); err != nil {
		log.Error(err, "Unable to taint the node", "taints", add)
		return false
	}
	if err := c.removeTaints(ctx, node, remove...); err != nil {
		log.Error(err, "Unable to remove unneeded taints from the node", "taints", remove)
		return false
	}
	return true
}

// addTaints adds taints to the named node, replacing a taint of the same
// key and effect that differs.
func (c *controller) addTaints(ctx context.Context, name string, taints ...corev1.Taint) error {
	if len(taints) == 0 {
		return nil
	}
	return c.editTaints(ctx, name, func(have []corev1.Taint) ([]corev1.Taint, bool) {
		changed := false
		for _, t := range taints {
			var ok bool
			have, ok = addOrUpdateTaint(have, t)
			changed = changed || ok
		}
		return have, changed
	})
}

// addOrUpdateTaint puts t in have: in place of the taints of its key and
// effect, or appended; unchanged (false) if the first such taint equals t.
func addOrUpdateTaint(have []corev1.Taint, t corev1.Taint) ([]corev1.Taint, bool) {
	next := make([]corev1.Taint, 0, len(have)+1)
	replaced := false
	for _, h := range have {
		if !h.MatchTaint(&t) {
			next = append(next, h)
			continue
		}
		if apiequality.Semantic.DeepEqual(t, h) {
			return have, false
		}
		next, replaced = append(next, t), true
	}
	if !replaced {
		next = append(next, t)
	}
	return next, true
}

// removeTaints removes every taint of taints' keys and effects from node,
// unless the cached node has none of them.
func (c *controller) removeTaints(ctx context.Context, node *corev1.Node,
	taints ...corev1.Taint) error {
	if len(taints) == 0 {
		return nil
	}
	found := false
	for _, t := range taints {
		found = found || hasTaint(node.Spec.Taints, t)
	}
	if !found {
		return nil
	}
	return c.editTaints(ctx, node.Name, func(have []corev1.Taint) ([]corev1.Taint, bool) {
		changed := false
		for _, t := range taints {
			var next []corev1.Taint
			for _, h := range have {
				if h.MatchTaint(&t) {
					changed = true
					continue
				}
				next = append(next, h)
			}
			have = next
		}
		return have, changed
	})
}

// editTaints reads the node (first from the API server's cache, then
// live on a conflict), edits its taints and patches them.
func (c *controller) editTaints(ctx context.Context, name string,
	edit func([]corev1.Taint) ([]corev1.Taint, bool)) error {
	first := true
	return retry.RetryOnConflict(taintBackoff, func() error {
		opts := metav1.GetOptions{}
		if first {
			opts.ResourceVersion, first = "0", false
		}
		node, err := c.client.CoreV1().Nodes().Get(ctx, name, opts)
		if err != nil {
			return err
		}
		taints, changed := edit(append([]corev1.Taint(nil), node.Spec.Taints...))
		if !changed {
			return nil
		}
		return c.patchTaints(ctx, node, taints)
	})
}

// patchTaints patches node's taints to taints, by a two-way strategic
// merge patch without a resourceVersion, as KCM.
func (c *controller) patchTaints(ctx context.Context, node *corev1.Node,
	taints []corev1.Taint) error {
	old := node.DeepCopy()
	old.ResourceVersion = ""
	oldData, err := json.Marshal(old)
	if err != nil {
		return err
	}
	next := node.DeepCopy()
	next.Spec.Taints = taints
	newData, err := json.Marshal(next)
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, corev1.Node{})
	if err != nil {
		return fmt.Errorf("patch of the taints of node %s: %w", node.Name, err)
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType,
		patch, metav1.PatchOptions{})
	return err
}

// reconcileLabels sets each beta label to its stable label's value.
func (c *controller) reconcileLabels(ctx context.Context, node *corev1.Node) error {
	if node.Labels == nil {
		return nil
	}
	want := map[string]string{}
	for _, l := range betaLabels {
		v, ok := node.Labels[l.stable]
		if !ok {
			continue
		}
		if b, ok := node.Labels[l.beta]; !ok || b != v {
			want[l.beta] = v
		}
	}
	if len(want) == 0 {
		return nil
	}
	first := true
	return retry.RetryOnConflict(taintBackoff, func() error {
		opts := metav1.GetOptions{}
		if first {
			opts.ResourceVersion, first = "0", false
		}
		live, err := c.client.CoreV1().Nodes().Get(ctx, node.Name, opts)
		if err != nil {
			return err
		}
		next := live.DeepCopy()
		if next.Labels == nil {
			next.Labels = map[string]string{}
		}
		for k, v := range want {
			next.Labels[k] = v
		}
		oldData, err := json.Marshal(live)
		if err != nil {
			return err
		}
		newData, err := json.Marshal(next)
		if err != nil {
			return err
		}
		patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, corev1.Node{})
		if err != nil {
			return err
		}
		_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name,
			types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}
