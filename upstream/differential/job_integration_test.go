//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/job"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// jobTimeout bounds each side of a Job scenario: the back-off scenario
// waits out KCM's 10s pod-creation back-off, and pods are batched per
// second.
const jobTimeout = 3 * time.Minute

// compareJob is compare with the longer per-side timeout Job scenarios
// need.
func compareJob(t *testing.T, sc differential.Scenario) differential.Result {
	t.Helper()
	e := env(t)
	r := runner(t, e)
	r.Timeout = jobTimeout
	start := time.Now()
	res, err := r.Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	return res
}

// newJob returns a Job named name whose pods run one pause container and
// are never restarted, changed by mods.
func newJob(name string, mods ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			}},
		},
	}
	for _, m := range mods {
		m(j)
	}
	return j
}

func createJob(j *batchv1.Job) func(context.Context, kubernetes.Interface, string) error {
	return withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		_, err := cs.BatchV1().Jobs(ns).Create(ctx, j.DeepCopy(), metav1.CreateOptions{})
		return err
	})
}

// podRef matches the "<ns>/<pod>" a condition message may name; the pod's
// generated name differs by run.
var podRef = regexp.MustCompile(`pod \S+/\S+`)

// observeJob returns the Job, the namespace's pods and a summary of its
// events: the sorted, distinct "<involvedObject.kind> <reason>" pairs
// (counts and timing of events are not deterministic). Condition messages
// keep their text but not the pod they name; generated pod names are
// replaced by generateName, phase and index failure count, which order
// the pods the same way on both sides.
func observeJob(name string) func(context.Context, kubernetes.Interface, string) ([]runtime.Object, error) {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		j.Kind = "Job"
		for i := range j.Status.Conditions {
			j.Status.Conditions[i].Message = podRef.ReplaceAllString(j.Status.Conditions[i].Message, "pod <pod>")
		}
		objs, err := podsIn(ctx, cs, ns)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			// Which of two pods got the smaller random suffix is chance:
			// name generated pods by what tells them apart instead.
			if p := o.(*corev1.Pod); p.GenerateName != "" {
				p.Name = p.GenerateName + string(p.Status.Phase) + "-" + p.Annotations[batchv1.JobIndexFailureCountAnnotation]
			}
		}
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var reasons []string
		for _, e := range evs.Items {
			reasons = append(reasons, e.InvolvedObject.Kind+" "+e.Reason)
		}
		slices.Sort(reasons)
		summary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "events"},
			Data: map[string]string{"reasons": strings.Join(slices.Compact(reasons), "\n")}}
		summary.Kind = "Summary"
		return append(objs, j, summary), nil
	}
}

// finishPods plays the kubelet: every live pod of ns that is Pending or
// Running and that pick selects ends in phase with exitCode.
func finishPods(phase corev1.PodPhase, exitCode int32, pick func(*corev1.Pod) bool) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range l.Items {
			p := &l.Items[i]
			if p.DeletionTimestamp != nil || p.Status.Phase != "" && p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning {
				continue
			}
			if pick != nil && !pick(p) {
				continue
			}
			if err := setPhase(ctx, cs, p, phase, exitCode); err != nil {
				return err
			}
		}
		return nil
	}
}

// cleanupJobs deletes ns's Jobs (so that no later scenario's controller
// syncs them), takes the tracking finalizer off the pods left and
// force-deletes them (there is no kubelet nor garbage collector).
func cleanupJobs(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if err := cs.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}, metav1.ListOptions{}); err != nil {
		return err
	}
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range l.Items {
		if len(p.Finalizers) == 0 {
			continue
		}
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("removing the finalizers of pod %s: %w", p.Name, err)
		}
	}
	return deletePods(ctx, cs, ns)
}

// jobCondition reports whether the normalised state's Job has a condition
// of type t, status True, with reason.
func jobCondition(state []map[string]any, t, reason string) bool {
	for _, o := range state {
		if o["kind"] != "Job" {
			continue
		}
		st, _ := o["status"].(map[string]any)
		conds, _ := st["conditions"].([]any)
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == t && cm["status"] == "True" && cm["reason"] == reason {
				return true
			}
		}
	}
	return false
}

// eventSeen reports whether the summary lists "Job <reason>".
func eventSeen(state []map[string]any, reason string) bool {
	for _, o := range state {
		if o["kind"] != "Summary" {
			continue
		}
		d, _ := o["data"].(map[string]any)
		r, _ := d["reasons"].(string)
		return slices.Contains(strings.Split(r, "\n"), "Job "+reason)
	}
	return false
}

func jobStatus(t *testing.T, state []map[string]any) map[string]any {
	t.Helper()
	for _, o := range state {
		if o["kind"] == "Job" {
			st, _ := o["status"].(map[string]any)
			return st
		}
	}
	t.Fatal("no Job in the state")
	return nil
}

func podsWithFinalizer(state []map[string]any) int {
	n := 0
	for _, o := range state {
		if o["kind"] != "Pod" {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		if fs, _ := md["finalizers"].([]any); len(fs) > 0 {
			n++
		}
	}
	return n
}

// TestJobCompletions: completions 3, parallelism 2, NonIndexed; every pod
// succeeds as soon as it exists. Two pods, then a third, all counted; the
// Job ends SuccessCriteriaMet then Complete with succeeded 3, and no pod
// keeps the tracking finalizer.
func TestJobCompletions(t *testing.T) {
	res := compareJob(t, differential.Scenario{
		Name: "job completions 3 parallelism 2", Controller: job.Name,
		Setup: createJob(newJob("work", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](3), ptr.To[int32](2)
		})),
		Act:     finishPods(corev1.PodSucceeded, 0, nil),
		Observe: observeJob("work"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Complete", "CompletionsReached") && eventSeen(s, "Completed") && podsWithFinalizer(s) == 0
		},
		Cleanup: cleanupJobs,
	})
	if st := jobStatus(t, res.Native); st["succeeded"] != float64(3) || count(res.Native, "Pod") != 3 {
		t.Errorf("native side: succeeded %v with %d pods, want 3 and 3", st["succeeded"], count(res.Native, "Pod"))
	}
}

// TestJobBackoffLimit: backoffLimit 1 and every pod fails (exit code 1):
// the first failure, the 10s pod back-off, a second pod, its failure, then
// FailureTarget and Failed with reason BackoffLimitExceeded, failed 2.
func TestJobBackoffLimit(t *testing.T) {
	res := compareJob(t, differential.Scenario{
		Name: "job backoffLimit exceeded", Controller: job.Name,
		Setup:   createJob(newJob("fail", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](1) })),
		Act:     finishPods(corev1.PodFailed, 1, nil),
		Observe: observeJob("fail"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Failed", "BackoffLimitExceeded") && eventSeen(s, "BackoffLimitExceeded") && podsWithFinalizer(s) == 0
		},
		Cleanup: cleanupJobs,
	})
	if st := jobStatus(t, res.Native); st["failed"] != float64(2) {
		t.Errorf("native side: failed %v, want 2", st["failed"])
	}
}

// TestJobIndexed: Indexed, completions 3, parallelism 3; every pod
// succeeds. completedIndexes "0-2"; pods carry the index annotation and
// label, hostname and JOB_COMPLETION_INDEX (compared in the pods).
func TestJobIndexed(t *testing.T) {
	res := compareJob(t, differential.Scenario{
		Name: "job indexed completions", Controller: job.Name,
		Setup: createJob(newJob("indexed", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](3), ptr.To[int32](3)
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		})),
		Act:     finishPods(corev1.PodSucceeded, 0, nil),
		Observe: observeJob("indexed"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Complete", "CompletionsReached") && eventSeen(s, "Completed") && podsWithFinalizer(s) == 0
		},
		Cleanup: cleanupJobs,
	})
	if st := jobStatus(t, res.Native); st["completedIndexes"] != "0-2" {
		t.Errorf("native side: completedIndexes %v, want 0-2", st["completedIndexes"])
	}
}

// TestJobPodFailurePolicyFailJob: a FailJob rule on exit code 42; the
// first pod exits 42: FailureTarget then Failed, reason PodFailurePolicy,
// though backoffLimit (6) is far.
func TestJobPodFailurePolicyFailJob(t *testing.T) {
	compareJob(t, differential.Scenario{
		Name: "job pod failure policy FailJob", Controller: job.Name,
		Setup: createJob(newJob("policy", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
			}}}
		})),
		Act:     finishPods(corev1.PodFailed, 42, nil),
		Observe: observeJob("policy"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Failed", "PodFailurePolicy") && eventSeen(s, "PodFailurePolicy") && podsWithFinalizer(s) == 0
		},
		Cleanup: cleanupJobs,
	})
}

// TestJobSuccessPolicy: Indexed, completions 3, parallelism 3, success
// policy succeededIndexes "0"; only index 0 succeeds. SuccessCriteriaMet
// then Complete with reason SuccessPolicy; the other two pods are deleted
// (their finalizers removed, so they go at once without a kubelet).
func TestJobSuccessPolicy(t *testing.T) {
	res := compareJob(t, differential.Scenario{
		Name: "job success policy", Controller: job.Name,
		Setup: createJob(newJob("leader", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](3), ptr.To[int32](3)
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
		})),
		Act: finishPods(corev1.PodSucceeded, 0, func(p *corev1.Pod) bool {
			return p.Annotations[batchv1.JobCompletionIndexAnnotation] == "0"
		}),
		Observe: observeJob("leader"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Complete", "SuccessPolicy") && eventSeen(s, "Completed") && count(s, "Pod") == 1
		},
		Cleanup: cleanupJobs,
	})
	if st := jobStatus(t, res.Native); st["completedIndexes"] != "0" || count(res.Native, "Pod") != 1 {
		t.Errorf("native side: completedIndexes %v with %d pods, want 0 and 1", st["completedIndexes"], count(res.Native, "Pod"))
	}
}

// TestJobSuspended: a Job created suspended gets the Suspended condition
// (reason JobSuspended) and the Suspended event, no startTime and no pods.
func TestJobSuspended(t *testing.T) {
	compareJob(t, differential.Scenario{
		Name: "job created suspended", Controller: job.Name,
		Setup:   createJob(newJob("paused", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })),
		Observe: observeJob("paused"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Suspended", "JobSuspended") && eventSeen(s, "Suspended")
		},
		Cleanup: cleanupJobs,
	})
}

// TestJobActiveDeadline: activeDeadlineSeconds 2, pods running and never
// finishing: after 2s FailureTarget then Failed with DeadlineExceeded, the
// pod deleted and counted failed.
func TestJobActiveDeadline(t *testing.T) {
	compareJob(t, differential.Scenario{
		Name: "job active deadline", Controller: job.Name,
		Setup:   createJob(newJob("slow", func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](2) })),
		Act:     runReady,
		Observe: observeJob("slow"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Failed", "DeadlineExceeded") && eventSeen(s, "DeadlineExceeded") && count(s, "Pod") == 0
		},
		Cleanup: cleanupJobs,
	})
}

// TestJobManagedByOther: a Job whose managedBy names another controller
// gets no pods, no status and no events.
func TestJobManagedByOther(t *testing.T) {
	res := compareJob(t, differential.Scenario{
		Name: "job managed by another controller", Controller: job.Name,
		Setup:   createJob(newJob("foreign", func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("example.com/other") })),
		Observe: observeJob("foreign"),
		Cleanup: cleanupJobs,
	})
	if st := jobStatus(t, res.Native); len(st) != 0 || count(res.Native, "Pod") != 0 {
		t.Errorf("native side touched the Job: status %v, %d pods", st, count(res.Native, "Pod"))
	}
}

// TestJobBackoffLimitPerIndex: Indexed, completions 3, backoffLimitPerIndex
// 1; index 1 always fails, the others succeed. Index 1 is retried once
// (after the 10s per-index back-off, its pod carrying the failure count),
// then fails for good: failedIndexes "1", completedIndexes "0,2", Failed
// with reason FailedIndexes.
func TestJobBackoffLimitPerIndex(t *testing.T) {
	index := func(ix string) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool { return p.Annotations[batchv1.JobCompletionIndexAnnotation] == ix }
	}
	failOne, succeedOthers := finishPods(corev1.PodFailed, 1, index("1")), finishPods(corev1.PodSucceeded, 0, func(p *corev1.Pod) bool { return !index("1")(p) })
	res := compareJob(t, differential.Scenario{
		Name: "job backoffLimitPerIndex", Controller: job.Name,
		Setup: createJob(newJob("perindex", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](3), ptr.To[int32](3)
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
		})),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := failOne(ctx, cs, ns); err != nil {
				return err
			}
			return succeedOthers(ctx, cs, ns)
		},
		Observe: observeJob("perindex"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Failed", "FailedIndexes") && eventSeen(s, "FailedIndexes") && podsWithFinalizer(s) == 0
		},
		Cleanup: cleanupJobs,
	})
	if st := jobStatus(t, res.Native); st["failedIndexes"] != "1" || st["completedIndexes"] != "0,2" || st["failed"] != float64(2) {
		t.Errorf("native side: failedIndexes %v completedIndexes %v failed %v, want 1, 0,2 and 2", st["failedIndexes"], st["completedIndexes"], st["failed"])
	}
}

// TestJobSuspendResume: parallelism 2, completions 2; once both pods run,
// the Job is suspended (its pods deleted, not counted, the Suspended
// condition and event); once suspended it is resumed (JobResumed, new
// pods), and the new pods succeed: Complete.
func TestJobSuspendResume(t *testing.T) {
	var steps sync.Map // namespace → how far Act got
	setSuspend := func(ctx context.Context, cs kubernetes.Interface, ns string, on bool) error {
		_, err := cs.BatchV1().Jobs(ns).Patch(ctx, "toggle", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, on), metav1.PatchOptions{})
		return err
	}
	compareJob(t, differential.Scenario{
		Name: "job suspend and resume", Controller: job.Name,
		Setup: createJob(newJob("toggle", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](2), ptr.To[int32](2)
		})),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			step, _ := steps.LoadOrStore(ns, 0)
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, "toggle", metav1.GetOptions{})
			if err != nil {
				return err
			}
			switch step {
			case 0: // run the first pods; suspend once both run
				if err := runReady(ctx, cs, ns); err != nil {
					return err
				}
				if ptr.Deref(j.Status.Ready, 0) == 2 {
					steps.Store(ns, 1)
					return setSuspend(ctx, cs, ns, true)
				}
			case 1: // resume once suspended and the pods are gone
				for _, c := range j.Status.Conditions {
					if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue && j.Status.Active == 0 {
						steps.Store(ns, 2)
						return setSuspend(ctx, cs, ns, false)
					}
				}
			case 2: // the new pods succeed
				return finishPods(corev1.PodSucceeded, 0, nil)(ctx, cs, ns)
			}
			return nil
		},
		Observe: observeJob("toggle"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Complete", "CompletionsReached") && eventSeen(s, "Completed") && eventSeen(s, "Resumed") && podsWithFinalizer(s) == 0
		},
		Cleanup: cleanupJobs,
	})
}

// TestJobAdoptsOrphan: a Job with a manual selector adopts a matching
// orphan pod (adding its controller reference and the tracking finalizer),
// counts it and creates only the rest of its parallelism; all succeed.
func TestJobAdoptsOrphan(t *testing.T) {
	labels := map[string]string{"app": "batch-orphan"}
	res := compareJob(t, differential.Scenario{
		Name: "job adopts an orphan pod", Controller: job.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod("stray", labels), metav1.CreateOptions{}); err != nil {
				return err
			}
			j := newJob("adopter", func(j *batchv1.Job) {
				j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](2), ptr.To[int32](2)
				j.Spec.ManualSelector = ptr.To(true)
				j.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
				j.Spec.Template.Labels = labels
			})
			_, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
			return err
		}),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			// Only adopted pods run: the stray must be counted as the Job's.
			return finishPods(corev1.PodSucceeded, 0, func(p *corev1.Pod) bool { return metav1.GetControllerOf(p) != nil })(ctx, cs, ns)
		},
		Observe: observeJob("adopter"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Complete", "CompletionsReached") && eventSeen(s, "Completed") && podsWithFinalizer(s) == 0
		},
		Cleanup: cleanupJobs,
	})
	if n := count(res.Native, "Pod"); n != 2 {
		t.Errorf("native side: %d pods, want 2 (the adopted one and one created)", n)
	}
}

// TestJobPodFailurePolicyIgnore: an Ignore rule on exit code 3; the first
// pod exits 3, which is not counted against backoffLimit 0; its
// replacement (after the back-off) succeeds: Complete with failed 0.
func TestJobPodFailurePolicyIgnore(t *testing.T) {
	var first sync.Map // namespace → name of the pod that fails
	res := compareJob(t, differential.Scenario{
		Name: "job pod failure policy Ignore", Controller: job.Name,
		Setup: createJob(newJob("ignore", func(j *batchv1.Job) {
			j.Spec.BackoffLimit = ptr.To[int32](0)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:      batchv1.PodFailurePolicyActionIgnore,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3}},
			}}}
		})),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) == 0 {
				return err
			}
			name, _ := first.LoadOrStore(ns, l.Items[0].Name)
			if err := finishPods(corev1.PodFailed, 3, func(p *corev1.Pod) bool { return p.Name == name })(ctx, cs, ns); err != nil {
				return err
			}
			return finishPods(corev1.PodSucceeded, 0, func(p *corev1.Pod) bool { return p.Name != name })(ctx, cs, ns)
		},
		Observe: observeJob("ignore"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Complete", "CompletionsReached") && eventSeen(s, "Completed") && podsWithFinalizer(s) == 0
		},
		Cleanup: cleanupJobs,
	})
	if st := jobStatus(t, res.Native); st["failed"] != nil || st["succeeded"] != float64(1) {
		t.Errorf("native side: failed %v succeeded %v, want none and 1", st["failed"], st["succeeded"])
	}
}

// TestJobPodReplacementPolicy: parallelism 1; once its pod runs, the pod
// is deleted (it stays, terminating, behind the tracking finalizer; there
// is no kubelet). With TerminatingOrFailed it counts as failed at once and
// is replaced after the back-off; with Failed the Job reports it
// terminating and waits until it has failed (played here), then replaces
// it. The replacement succeeds: Complete with failed 1.
func TestJobPodReplacementPolicy(t *testing.T) {
	for _, policy := range []batchv1.PodReplacementPolicy{batchv1.TerminatingOrFailed, batchv1.Failed} {
		t.Run(string(policy), func(t *testing.T) {
			var victims sync.Map // namespace → name of the deleted pod
			res := compareJob(t, differential.Scenario{
				Name: "job podReplacementPolicy " + string(policy), Controller: job.Name,
				Setup: createJob(newJob("replace", func(j *batchv1.Job) {
					j.Spec.Completions = ptr.To[int32](1)
					j.Spec.PodReplacementPolicy = ptr.To(policy)
				})),
				Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
					l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
					if err != nil {
						return err
					}
					victim, chosen := victims.Load(ns)
					for i := range l.Items {
						p := &l.Items[i]
						switch {
						case !chosen && p.Status.Phase == corev1.PodRunning:
							victims.Store(ns, p.Name)
							return cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
						case !chosen:
							if err := setPhase(ctx, cs, p, corev1.PodRunning, 0); err != nil {
								return err
							}
						case p.Name == victim && p.DeletionTimestamp != nil && p.Status.Phase == corev1.PodRunning:
							if err := setPhase(ctx, cs, p, corev1.PodFailed, 137); err != nil {
								return err
							}
						case p.Name != victim && p.DeletionTimestamp == nil && (p.Status.Phase == "" || p.Status.Phase == corev1.PodPending):
							if err := setPhase(ctx, cs, p, corev1.PodSucceeded, 0); err != nil {
								return err
							}
						}
					}
					return nil
				},
				Observe: observeJob("replace"),
				Settled: func(s []map[string]any) bool {
					return jobCondition(s, "Complete", "CompletionsReached") && eventSeen(s, "Completed") && podsWithFinalizer(s) == 0
				},
				Cleanup: cleanupJobs,
			})
			if st := jobStatus(t, res.Native); st["failed"] != float64(1) || st["succeeded"] != float64(1) {
				t.Errorf("native side: failed %v succeeded %v, want 1 and 1", st["failed"], st["succeeded"])
			}
		})
	}
}

// TestJobScaleDown: no completions, parallelism 3; once three pods run,
// parallelism drops to 1: two pods lose their finalizer and are deleted
// (SuccessfulDelete), uncounted; the last one succeeds: Complete,
// succeeded 1, failed 0.
func TestJobScaleDown(t *testing.T) {
	var scaled sync.Map
	res := compareJob(t, differential.Scenario{
		Name: "job parallelism scaled down", Controller: job.Name,
		Setup: createJob(newJob("scale", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) })),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, done := scaled.Load(ns); done {
				j, err := cs.BatchV1().Jobs(ns).Get(ctx, "scale", metav1.GetOptions{})
				if err != nil || j.Status.Active != 1 || ptr.Deref(j.Status.Terminating, 0) != 0 {
					return err
				}
				return finishPods(corev1.PodSucceeded, 0, nil)(ctx, cs, ns)
			}
			if err := runReady(ctx, cs, ns); err != nil {
				return err
			}
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, "scale", metav1.GetOptions{})
			if err != nil || ptr.Deref(j.Status.Ready, 0) != 3 {
				return err
			}
			scaled.Store(ns, true)
			_, err = cs.BatchV1().Jobs(ns).Patch(ctx, "scale", types.MergePatchType, []byte(`{"spec":{"parallelism":1}}`), metav1.PatchOptions{})
			return err
		},
		Observe: observeJob("scale"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Complete", "CompletionsReached") && eventSeen(s, "Completed") && count(s, "Pod") == 1
		},
		Cleanup: cleanupJobs,
	})
	if st := jobStatus(t, res.Native); st["succeeded"] != float64(1) || st["failed"] != nil {
		t.Errorf("native side: succeeded %v failed %v, want 1 and none", st["succeeded"], st["failed"])
	}
}

// TestJobOnFailureRestarts: restartPolicy OnFailure, backoffLimit 2; the
// pod runs with its container restarted twice: BackoffLimitExceeded
// without any pod having failed; the pod is deleted and counted failed.
func TestJobOnFailureRestarts(t *testing.T) {
	compareJob(t, differential.Scenario{
		Name: "job OnFailure restarts reach backoffLimit", Controller: job.Name,
		Setup: createJob(newJob("restarts", func(j *batchv1.Job) {
			j.Spec.BackoffLimit = ptr.To[int32](2)
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		})),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range l.Items {
				p := &l.Items[i]
				if p.DeletionTimestamp != nil || p.Status.Phase != "" && p.Status.Phase != corev1.PodPending {
					continue
				}
				if err := setPhase(ctx, cs, p, corev1.PodRunning, 0); err != nil {
					return err
				}
				p, err = cs.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				p.Status.ContainerStatuses[0].RestartCount = 2
				if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		Observe: observeJob("restarts"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Failed", "BackoffLimitExceeded") && eventSeen(s, "BackoffLimitExceeded") && count(s, "Pod") == 0
		},
		Cleanup: cleanupJobs,
	})
}

// TestJobDeletedReleasesPods: a running Job is deleted (orphaning its
// pods; there is no garbage collector): the pods lose the tracking
// finalizer through the orphan queue, and keep everything else.
func TestJobDeletedReleasesPods(t *testing.T) {
	var deleted sync.Map
	compareJob(t, differential.Scenario{
		Name: "job deleted releases its pods", Controller: job.Name,
		Setup: createJob(newJob("doomed", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](2) })),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := runReady(ctx, cs, ns); err != nil {
				return err
			}
			if _, done := deleted.Load(ns); done {
				return nil
			}
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, "doomed", metav1.GetOptions{})
			if err != nil || ptr.Deref(j.Status.Ready, 0) != 2 {
				return err
			}
			deleted.Store(ns, true)
			return cs.BatchV1().Jobs(ns).Delete(ctx, "doomed", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
			objs, err := podsIn(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			summary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}, Data: map[string]string{"left": fmt.Sprint(len(jobs.Items))}}
			summary.Kind = "Summary"
			return append(objs, summary), nil
		},
		Settled: func(s []map[string]any) bool {
			return count(s, "Pod") == 2 && podsWithFinalizer(s) == 0 && strings.Contains(fmt.Sprint(s), "left:0")
		},
		Cleanup: cleanupJobs,
	})
}

// TestJobFailIndex: Indexed, completions 3, backoffLimitPerIndex 2, a
// FailIndex rule on exit code 5; index 0 exits 5, the others succeed.
// Index 0 fails at once (no retry): failedIndexes "0", then Failed with
// FailedIndexes; with maxFailedIndexes 0 the Job fails with
// MaxFailedIndexesExceeded instead, deleting the pods still running.
func TestJobFailIndex(t *testing.T) {
	for _, tt := range []struct {
		name       string
		maxFailed  *int32
		reason     string
		runOthers  bool
		wantFailed string
	}{
		{"FailedIndexes", nil, "FailedIndexes", false, "0"},
		{"MaxFailedIndexesExceeded", ptr.To[int32](0), "MaxFailedIndexesExceeded", true, "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			isZero := func(p *corev1.Pod) bool { return p.Annotations[batchv1.JobCompletionIndexAnnotation] == "0" }
			fail := finishPods(corev1.PodFailed, 5, isZero)
			others := finishPods(corev1.PodSucceeded, 0, func(p *corev1.Pod) bool { return !isZero(p) })
			if tt.runOthers {
				// The others keep running: the Job fails under them.
				others = func(ctx context.Context, cs kubernetes.Interface, ns string) error {
					l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
					if err != nil {
						return err
					}
					for i := range l.Items {
						if p := &l.Items[i]; !isZero(p) && p.DeletionTimestamp == nil && (p.Status.Phase == "" || p.Status.Phase == corev1.PodPending) {
							if err := setPhase(ctx, cs, p, corev1.PodRunning, 0); err != nil {
								return err
							}
						}
					}
					return nil
				}
			}
			res := compareJob(t, differential.Scenario{
				Name: "job FailIndex " + tt.name, Controller: job.Name,
				Setup: createJob(newJob("failindex", func(j *batchv1.Job) {
					j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](3), ptr.To[int32](3)
					j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
					j.Spec.BackoffLimitPerIndex = ptr.To[int32](2)
					j.Spec.MaxFailedIndexes = tt.maxFailed
					j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
						Action:      batchv1.PodFailurePolicyActionFailIndex,
						OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{5}},
					}}}
				})),
				Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
					if err := fail(ctx, cs, ns); err != nil {
						return err
					}
					return others(ctx, cs, ns)
				},
				Observe: observeJob("failindex"),
				Settled: func(s []map[string]any) bool {
					return jobCondition(s, "Failed", tt.reason) && eventSeen(s, tt.reason) && podsWithFinalizer(s) == 0
				},
				Cleanup: cleanupJobs,
			})
			if st := jobStatus(t, res.Native); st["failedIndexes"] != tt.wantFailed {
				t.Errorf("native side: failedIndexes %v, want %s", st["failedIndexes"], tt.wantFailed)
			}
		})
	}
}

// TestJobSuccessPolicyCount: Indexed, completions 4, parallelism 4, a
// success policy of any 2 succeeded indexes; indexes 1 and 3 succeed, the
// others stay pending and are deleted: Complete with SuccessPolicy,
// completedIndexes "1,3".
func TestJobSuccessPolicyCount(t *testing.T) {
	res := compareJob(t, differential.Scenario{
		Name: "job success policy succeededCount", Controller: job.Name,
		Setup: createJob(newJob("quorum", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](4), ptr.To[int32](4)
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](2)}}}
		})),
		Act: finishPods(corev1.PodSucceeded, 0, func(p *corev1.Pod) bool {
			ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
			return ix == "1" || ix == "3"
		}),
		Observe: observeJob("quorum"),
		Settled: func(s []map[string]any) bool {
			return jobCondition(s, "Complete", "SuccessPolicy") && eventSeen(s, "Completed") && count(s, "Pod") == 2
		},
		Cleanup: cleanupJobs,
	})
	if st := jobStatus(t, res.Native); st["completedIndexes"] != "1,3" {
		t.Errorf("native side: completedIndexes %v, want 1,3", st["completedIndexes"])
	}
}
