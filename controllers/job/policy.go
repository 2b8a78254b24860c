package job

import (
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// policyMatch is what spec.podFailurePolicy says about one failed pod.
type policyMatch struct {
	// failJobMessage is set when a FailJob rule matched: the Job fails
	// with this message.
	failJobMessage *string
	// countFailed is false when an Ignore rule matched: the failure does
	// not count against backoffLimit (or backoffLimitPerIndex).
	countFailed bool
	// action is the matched rule's action; nil when none matched.
	action *batchv1.PodFailurePolicyAction
}

// matchPodFailurePolicy evaluates policy's rules in order against a failed
// pod; the first rule that matches decides.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, p *corev1.Pod) policyMatch {
	if policy == nil {
		return policyMatch{countFailed: true}
	}
	for i, rule := range policy.Rules {
		var failJob func() string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchExitCodes(&p.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			failJob = func() string {
				return fmt.Sprintf(
					"Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
					cs.Name,
					p.Namespace,
					p.Name,
					cs.State.Terminated.ExitCode,
					rule.Action,
					i,
				)
			}
		case rule.OnPodConditions != nil:
			cond := matchPodConditions(&p.Status, rule.OnPodConditions)
			if cond == nil {
				continue
			}
			failJob = func() string {
				return fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d",
					p.Namespace, p.Name, cond.Type, rule.Action, i)
			}
		default:
			continue
		}
		action := rule.Action
		switch action {
		case batchv1.PodFailurePolicyActionIgnore:
			return policyMatch{countFailed: false, action: &action}
		case batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionCount:
			return policyMatch{countFailed: true, action: &action}
		case batchv1.PodFailurePolicyActionFailJob:
			msg := failJob()
			return policyMatch{failJobMessage: &msg, countFailed: true, action: &action}
		}
		// An action this version does not know: the rule matches nothing
		// (KCM moves on to the next rule too).
	}
	return policyMatch{countFailed: true}
}

// matchExitCodes returns the first terminated container (regular, then
// init) whose non-zero exit code satisfies req.
func matchExitCodes(
	st *corev1.PodStatus,
	req *batchv1.PodFailurePolicyOnExitCodesRequirement,
) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 ||
				req.ContainerName != nil && *req.ContainerName != cs.Name {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			switch req.Operator {
			case batchv1.PodFailurePolicyOnExitCodesOpIn:
				if in {
					return cs
				}
			case batchv1.PodFailurePolicyOnExitCodesOpNotIn:
				if !in {
					return cs
				}
			}
		}
	}
	return nil
}

// matchPodConditions returns the first of the pod's conditions that one of
// the patterns matches by type and status.
func matchPodConditions(
	st *corev1.PodStatus,
	patterns []batchv1.PodFailurePolicyOnPodConditionsPattern,
) *corev1.PodCondition {
	for i := range st.Conditions {
		for _, pat := range patterns {
			if st.Conditions[i].Type == pat.Type && st.Conditions[i].Status == pat.Status {
				return &st.Conditions[i]
			}
		}
	}
	return nil
}

// failJobMessage returns the message of the first failed pod that a FailJob
// rule matches, or nil.
func failJobMessage(j *batchv1.Job, pods []*corev1.Pod) *string {
	if j.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range pods {
		if isPodFailed(p, j) {
			if m := matchPodFailurePolicy(j.Spec.PodFailurePolicy, p); m.failJobMessage != nil {
				return m.failJobMessage
			}
		}
	}
	return nil
}

// matchSuccessPolicy reports whether the succeeded indexes satisfy a rule
// of policy, with the message KCM writes ("Matched rules at index N").
func matchSuccessPolicy(
	log logr.Logger,
	policy *batchv1.SuccessPolicy,
	completions int32,
	succeeded spans,
) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		matched := false
		if rule.SucceededIndexes != nil {
			required := parseSpans(log, *rule.SucceededIndexes, int(completions))
			if len(required) == 0 {
				continue // unparsable: the rule matches nothing
			}
			n := overlap(required, succeeded)
			matched = n == required.total() ||
				rule.SucceededCount != nil && n >= int(*rule.SucceededCount)
		} else if rule.SucceededCount != nil {
			matched = succeeded.total() >= int(*rule.SucceededCount)
		}
		if matched {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// overlap counts the indexes a and b share.
func overlap(a, b spans) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		if k := min(a[i].last, b[j].last) - max(a[i].first, b[j].first) + 1; k > 0 {
			n += k
		}
		switch {
		case b[j].last < a[i].last:
			j++
		case b[j].last > a[i].last:
			i++
		default:
			i++
			j++
		}
	}
	return n
}

// isPodFailed: the pod failed, or (unless podReplacementPolicy is Failed)
// it is being deleted before it succeeded, which counts as a failure.
func isPodFailed(p *corev1.Pod, j *batchv1.Job) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if onlyReplaceFailed(j) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

// onlyReplaceFailed: podReplacementPolicy Failed, so a terminating pod is
// replaced only once it has failed.
func onlyReplaceFailed(j *batchv1.Job) bool {
	return j.Spec.PodReplacementPolicy != nil && *j.Spec.PodReplacementPolicy == batchv1.Failed
}

// pastBackoffLimitOnFailure: with restartPolicy OnFailure, the container
// restarts of running and pending pods reached backoffLimit (exceeded it
// when the limit is 0).
func pastBackoffLimitOnFailure(j *batchv1.Job, pods []*corev1.Pod) bool {
	if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var n int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, s := range p.Status.InitContainerStatuses {
			n += s.RestartCount
		}
		for _, s := range p.Status.ContainerStatuses {
			n += s.RestartCount
		}
	}
	if *j.Spec.BackoffLimit == 0 {
		return n > 0
	}
	return n >= *j.Spec.BackoffLimit
}
