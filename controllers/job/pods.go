package job

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

// removeFinalizerPatch is the strategic-merge patch that takes the
// tracking finalizer off a pod, leaving its other finalizers.
var removeFinalizerPatch = mustJSON(map[string]any{
	"metadata": map[string]any{
		"$deleteFromPrimitiveList/finalizers": []string{batchv1.JobTrackingFinalizer},
	},
})

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil // unreachable: v is made of maps and strings
	}
	return b
}

func logFrom(ctx context.Context) logr.Logger { return logr.FromContextOrDiscard(ctx) }

func hasTrackingFinalizer(p *corev1.Pod) bool {
	return slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer)
}

func podCondition(st *corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func countReady(pods []*corev1.Pod) int32 {
	n := int32(0)
	for _, p := range pods {
		if podstate.IsReady(p) {
			n++
		}
	}
	return n
}

func countTerminating(pods []*corev1.Pod) int32 {
	n := int32(0)
	for _, p := range pods {
		if podstate.IsTerminating(p) {
			n++
		}
	}
	return n
}

func filterPods(pods []*corev1.Pod, keep func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// patchPod applies a strategic-merge patch to a pod and returns the
// patched pod.
func (c *controller) patchPod(
	ctx context.Context,
	namespace, name string,
	patch []byte,
) (*corev1.Pod, error) {
	return c.client.CoreV1().
		Pods(namespace).
		Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
}

// patchJobPod is patchPod for a pod of the Job named key, the patched pod
// recorded with the staleness guard.
func (c *controller) patchJobPod(
	ctx context.Context,
	key, namespace, name string,
	patch []byte,
) error {
	p, err := c.patchPod(ctx, namespace, name, patch)
	if err == nil {
		c.wrote(key, p)
	}
	return err
}

// wrote records a write made while syncing key with the staleness guard,
// when the guard is on.
func (c *controller) wrote(key string, obj any) {
	if c.staleGuard {
		c.loop.Wrote(key, obj)
	}
}

// phaseRank orders phases for deletion: pending (and unset) first, then
// unknown, then running.
func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 0
}

func readySince(p *corev1.Pod) time.Time {
	if c := podCondition(&p.Status, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// restarts returns the highest restart count among regular containers and
// among restartable init containers (sidecars).
func restarts(p *corev1.Pod) (regular, sidecar int32) {
	for _, s := range p.Status.ContainerStatuses {
		regular = max(regular, s.RestartCount)
	}
	sidecars := map[string]bool{}
	for _, ct := range p.Spec.InitContainers {
		if ct.RestartPolicy != nil && *ct.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[ct.Name] = true
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if sidecars[s.Name] {
			sidecar = max(sidecar, s.RestartCount)
		}
	}
	return regular, sidecar
}

// zeroOrLater: a zero time counts as the most recent of all.
func zeroOrLater(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b)
}

// deleteFirst reports whether a is to be deleted before b: unscheduled
// before scheduled, pending before unknown before running, not ready before
// ready, ready more recently first, more restarts first, newer first (the
// order of KCM's ActivePods).
func deleteFirst(a, b *corev1.Pod) bool {
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if ra, rb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); ra != rb {
		return ra < rb
	}
	if ra, rb := podstate.IsReady(a), podstate.IsReady(b); ra != rb {
		return !ra
	}
	if podstate.IsReady(a) {
		if ta, tb := readySince(a), readySince(b); !ta.Equal(tb) {
			return zeroOrLater(ta, tb)
		}
	}
	regA, sideA := restarts(a)
	regB, sideB := restarts(b)
	if regA != regB {
		return regA > regB
	}
	if sideA != sideB {
		return sideA > sideB
	}
	if ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time; !ta.Equal(tb) {
		return zeroOrLater(ta, tb)
	}
	return false
}

// sortForDeletion sorts pods, in place and stably, so that the ones to
// delete first come first.
func sortForDeletion(pods []*corev1.Pod) {
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		switch {
		case deleteFirst(a, b):
			return -1
		case deleteFirst(b, a):
			return 1
		}
		return 0
	})
}
