package job

import (
	"testing"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestMatchPodFailurePolicy(t *testing.T) {
	exitCodes := func(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, container *string, codes ...int32) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{
			Action: action,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: container,
				Operator:      op,
				Values:        codes,
			},
		}
	}
	onCondition := func(action batchv1.PodFailurePolicyAction, ct corev1.PodConditionType) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{
			Action: action,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
				{Type: ct, Status: corev1.ConditionTrue},
			},
		}
	}
	failed := func(code int32, conds ...corev1.PodConditionType) *corev1.Pod {
		p := &corev1.Pod{}
		p.Namespace, p.Name = "ns", "p"
		finished(corev1.PodFailed, code, epoch)(p)
		for _, c := range conds {
			p.Status.Conditions = append(
				p.Status.Conditions,
				corev1.PodCondition{Type: c, Status: corev1.ConditionTrue},
			)
		}
		return cached(t, p)[0]
	}
	// A pod whose init container "init" failed with code (its regular
	// container never ran).
	initFailed := func(code int32) *corev1.Pod {
		p := &corev1.Pod{}
		p.Namespace, p.Name = "ns", "p"
		p.Status.Phase = corev1.PodFailed
		exited := &corev1.ContainerStateTerminated{ExitCode: code}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{
			{Name: "init", State: corev1.ContainerState{Terminated: exited}}}
		return cached(t, p)[0]
	}
	in, notIn := batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn
	failJob, ignore, count, failIndex := batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyActionFailIndex
	tests := []struct {
		name        string
		rules       []batchv1.PodFailurePolicyRule
		pod         *corev1.Pod
		wantMessage string // "" for none
		wantCount   bool
		wantAction  *batchv1.PodFailurePolicyAction
	}{
		{"no rules", nil, failed(1), "", true, nil},
		{
			"FailJob on exit code",
			[]batchv1.PodFailurePolicyRule{exitCodes(failJob, in, nil, 42)},
			failed(42),
			"Container c for pod ns/p failed with exit code 42 matching FailJob rule at index 0",
			true,
			&failJob,
		},
		{
			"exit code not matched",
			[]batchv1.PodFailurePolicyRule{exitCodes(failJob, in, nil, 42)},
			failed(1),
			"",
			true,
			nil,
		},
		{
			"NotIn",
			[]batchv1.PodFailurePolicyRule{exitCodes(count, notIn, nil, 1, 2)},
			failed(3),
			"",
			true,
			&count,
		},
		{
			"NotIn excluded",
			[]batchv1.PodFailurePolicyRule{exitCodes(count, notIn, nil, 1, 2)},
			failed(2),
			"",
			true,
			nil,
		},
		{
			"other container",
			[]batchv1.PodFailurePolicyRule{exitCodes(failJob, in, ptr.To("sidecar"), 42)},
			failed(42),
			"",
			true,
			nil,
		},
		{
			"named container",
			[]batchv1.PodFailurePolicyRule{exitCodes(failJob, in, ptr.To("c"), 42)},
			failed(42),
			"Container c for pod ns/p failed with exit code 42 matching FailJob rule at index 0",
			true,
			&failJob,
		},
		{
			"Ignore on condition",
			[]batchv1.PodFailurePolicyRule{onCondition(ignore, corev1.DisruptionTarget)},
			failed(137, corev1.DisruptionTarget),
			"",
			false,
			&ignore,
		},
		{
			"FailJob on condition, second rule",
			[]batchv1.PodFailurePolicyRule{
				exitCodes(ignore, in, nil, 5),
				onCondition(failJob, corev1.DisruptionTarget),
			},
			failed(1, corev1.DisruptionTarget),
			"Pod ns/p has condition DisruptionTarget matching FailJob rule at index 1",
			true,
			&failJob,
		},
		{
			"first match wins",
			[]batchv1.PodFailurePolicyRule{
				exitCodes(failIndex, in, nil, 7),
				exitCodes(failJob, in, nil, 7),
			},
			failed(7),
			"",
			true,
			&failIndex,
		},
		{
			"exit code 0 never matches",
			[]batchv1.PodFailurePolicyRule{exitCodes(failJob, notIn, nil, 1)},
			failed(0),
			"",
			true,
			nil,
		},
		{"init container's exit code",
			[]batchv1.PodFailurePolicyRule{exitCodes(failJob, in, ptr.To("init"), 3)},
			initFailed(3),
			"Container init for pod ns/p failed with exit code 3 " +
				"matching FailJob rule at index 0", true, &failJob},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var policy *batchv1.PodFailurePolicy
			if tt.rules != nil {
				policy = &batchv1.PodFailurePolicy{Rules: tt.rules}
			}
			m := matchPodFailurePolicy(policy, tt.pod)
			if got := ptr.Deref(m.failJobMessage, ""); got != tt.wantMessage {
				t.Errorf("message %q, want %q", got, tt.wantMessage)
			}
			if m.countFailed != tt.wantCount || !ptr.Equal(m.action, tt.wantAction) {
				t.Errorf(
					"count %v action %v, want %v %v",
					m.countFailed,
					ptr.Deref(m.action, ""),
					tt.wantCount,
					ptr.Deref(tt.wantAction, ""),
				)
			}
		})
	}
}

func TestMatchSuccessPolicy(t *testing.T) {
	rule := func(indexes *string, count *int32) batchv1.SuccessPolicyRule {
		return batchv1.SuccessPolicyRule{SucceededIndexes: indexes, SucceededCount: count}
	}
	tests := []struct {
		name      string
		rules     []batchv1.SuccessPolicyRule
		succeeded string
		want      string // "" when not met
	}{
		{"no policy", nil, "0-4", ""},
		{"nothing succeeded", []batchv1.SuccessPolicyRule{rule(nil, ptr.To[int32](1))}, "", ""},
		{
			"indexes all in",
			[]batchv1.SuccessPolicyRule{rule(ptr.To("0,2"), nil)},
			"0-2",
			"Matched rules at index 0",
		},
		{"indexes missing one", []batchv1.SuccessPolicyRule{rule(ptr.To("0,3"), nil)}, "0-2", ""},
		{
			"count within indexes",
			[]batchv1.SuccessPolicyRule{rule(ptr.To("1-4"), ptr.To[int32](2))},
			"0,2,4",
			"Matched rules at index 0",
		},
		{
			"count within indexes not reached",
			[]batchv1.SuccessPolicyRule{rule(ptr.To("1-4"), ptr.To[int32](2))},
			"0,2",
			"",
		},
		{
			"count alone",
			[]batchv1.SuccessPolicyRule{rule(nil, ptr.To[int32](3))},
			"0,5,7",
			"Matched rules at index 0",
		},
		{
			"second rule",
			[]batchv1.SuccessPolicyRule{rule(nil, ptr.To[int32](9)), rule(ptr.To("7"), nil)},
			"7",
			"Matched rules at index 1",
		},
		{
			"rule beyond completions is skipped",
			[]batchv1.SuccessPolicyRule{rule(ptr.To("10-12"), nil), rule(ptr.To("1"), nil)},
			"1",
			"Matched rules at index 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var policy *batchv1.SuccessPolicy
			if tt.rules != nil {
				policy = &batchv1.SuccessPolicy{Rules: tt.rules}
			}
			msg, ok := matchSuccessPolicy(
				logr.Discard(),
				policy,
				10,
				parseSpans(logr.Discard(), tt.succeeded, 10),
			)
			if ok != (tt.want != "") || msg != tt.want {
				t.Errorf("got %q %v, want %q", msg, ok, tt.want)
			}
		})
	}
}

func TestPastBackoffLimitOnFailure(t *testing.T) {
	pod := func(phase corev1.PodPhase, restarts int32) *corev1.Pod {
		return cached(t, &corev1.Pod{Status: corev1.PodStatus{Phase: phase,
			ContainerStatuses: []corev1.ContainerStatus{{RestartCount: restarts}}}})[0]
	}
	initRestarts := func(restarts int32) *corev1.Pod {
		statuses := []corev1.ContainerStatus{{Name: "init", RestartCount: restarts}}
		return cached(t, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: statuses}})[0]
	}
	tests := []struct {
		name   string
		policy corev1.RestartPolicy
		limit  int32
		pods   []*corev1.Pod
		want   bool
	}{
		{
			"Never ignores restarts",
			corev1.RestartPolicyNever,
			1,
			[]*corev1.Pod{pod(corev1.PodRunning, 5)},
			false,
		},
		{
			"limit reached",
			corev1.RestartPolicyOnFailure,
			3,
			[]*corev1.Pod{pod(corev1.PodRunning, 2), pod(corev1.PodPending, 1)},
			true,
		},
		{
			"below the limit",
			corev1.RestartPolicyOnFailure,
			3,
			[]*corev1.Pod{pod(corev1.PodRunning, 2)},
			false,
		},
		{
			"finished pods do not count",
			corev1.RestartPolicyOnFailure,
			1,
			[]*corev1.Pod{pod(corev1.PodFailed, 4)},
			false,
		},
		{
			"limit 0: any restart",
			corev1.RestartPolicyOnFailure,
			0,
			[]*corev1.Pod{pod(corev1.PodRunning, 1)},
			true,
		},
		{"init containers' restarts count", corev1.RestartPolicyOnFailure, 3,
			[]*corev1.Pod{initRestarts(3)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob("work", func(j *batchv1.Job) {
				j.Spec.Template.Spec.RestartPolicy = tt.policy
				j.Spec.BackoffLimit = ptr.To(tt.limit)
			})
			if got := pastBackoffLimitOnFailure(j, tt.pods); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
