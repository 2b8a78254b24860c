package job

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

const (
	// completionIndexEnv is the variable every container of an Indexed
	// Job's pod gets, read from the completion-index label.
	completionIndexEnv = "JOB_COMPLETION_INDEX"
	// noIndex stands for a pod without a valid completion index.
	noIndex = -1
	// maxGeneratedNameLength is the longest generateName the API server
	// keeps whole (a name is at most 63 characters, 5 of them random).
	maxGeneratedNameLength = 58
)

func isIndexed(j *batchv1.Job) bool {
	return j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
}

func hasBackoffLimitPerIndex(j *batchv1.Job) bool { return j.Spec.BackoffLimitPerIndex != nil }

// span is the indexes first..last, both included.
type span struct{ first, last int }

// spans is a sorted list of disjoint, non-adjacent spans: the form of
// status.completedIndexes and status.failedIndexes ("1,3-5").
type spans []span

// parseSpans reads an index list, dropping indexes at or above
// completions and skipping malformed items (as KCM does, logging them).
func parseSpans(log logr.Logger, s string, completions int) spans {
	if s == "" {
		return nil
	}
	var out spans
	for item := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			log.Info("Corrupted indexes interval, ignoring", "interval", item, "err", err)
			continue
		}
		if first >= completions {
			break
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				log.Info("Corrupted indexes interval, ignoring", "interval", item, "err", err)
				continue
			}
			last = min(last, completions-1)
		}
		if n := len(out); n > 0 && out[n-1].last == first-1 {
			out[n-1].last = last
		} else {
			out = append(out, span{first, last})
		}
	}
	return out
}

// withIndexes returns the union of s and the sorted indexes.
func (s spans) withIndexes(sorted []int) spans {
	add := make(spans, len(sorted))
	for i, ix := range sorted {
		add[i] = span{ix, ix}
	}
	return s.union(add)
}

// union merges two span lists into one.
func (s spans) union(t spans) spans {
	var out spans
	push := func(x span) {
		if n := len(out); n > 0 && x.first <= out[n-1].last+1 {
			out[n-1].last = max(out[n-1].last, x.last)
			return
		}
		out = append(out, x)
	}
	i, j := 0, 0
	for i < len(s) || j < len(t) {
		if j == len(t) || i < len(s) && s[i].first < t[j].first {
			push(s[i])
			i++
		} else {
			push(t[j])
			j++
		}
	}
	return out
}

// total is how many indexes s holds.
func (s spans) total() int {
	n := 0
	for _, x := range s {
		n += x.last - x.first + 1
	}
	return n
}

// String writes s as the API does: "a-b" for three or more consecutive
// indexes, "a,b" for two.
func (s spans) String() string {
	var b strings.Builder
	for _, x := range s {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x.first))
		switch {
		case x.last == x.first+1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(x.last))
		case x.last > x.first:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(x.last))
		}
	}
	return b.String()
}

// has reports whether ix is in s. A nil *spans has nothing.
func (s *spans) has(ix int) bool {
	if s == nil {
		return false
	}
	i, _ := slices.BinarySearchFunc(*s, ix, func(x span, ix int) int {
		if x.last < ix {
			return -1
		}
		if x.first > ix {
			return 1
		}
		return 0
	})
	return i < len(*s) && (*s)[i].first <= ix && ix <= (*s)[i].last
}

// completionIndex is a pod's completion index from its annotation, or
// noIndex when it has none or it is not a non-negative integer.
func completionIndex(p *corev1.Pod) int {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return noIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return noIndex
	}
	return i
}

// validIndex: the pod has a completion index below completions.
func validIndex(j *batchv1.Job, p *corev1.Pod) (int, bool) {
	ix := completionIndex(p)
	return ix, ix != noIndex && ix < int(*j.Spec.Completions)
}

// indexSet returns the sorted distinct completion indexes of pods.
func indexSet(pods []*corev1.Pod) []int {
	var out []int
	for _, p := range pods {
		if ix := completionIndex(p); ix != noIndex {
			out = append(out, ix)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// succeededIndexes returns the indexes of status.completedIndexes and those
// plus the indexes of succeeded pods not yet counted (still holding the
// tracking finalizer).
func succeededIndexes(log logr.Logger, j *batchv1.Job, pods []*corev1.Pod) (prev, now spans) {
	prev = parseSpans(log, j.Status.CompletedIndexes, int(*j.Spec.Completions))
	var fresh []int
	for _, p := range pods {
		if ix, ok := validIndex(j, p); ok && p.Status.Phase == corev1.PodSucceeded &&
			hasTrackingFinalizer(p) {
			fresh = append(fresh, ix)
		}
	}
	slices.Sort(fresh)
	return prev, prev.withIndexes(slices.Compact(fresh))
}

// failedIndexes returns status.failedIndexes plus the indexes whose pods
// newly failed for good (backoffLimitPerIndex reached, or FailIndex).
func failedIndexes(log logr.Logger, j *batchv1.Job, pods []*corev1.Pod) *spans {
	var prev spans
	if j.Status.FailedIndexes != nil {
		prev = parseSpans(log, *j.Status.FailedIndexes, int(*j.Spec.Completions))
	}
	var fresh []int
	for _, p := range pods {
		if ix, ok := validIndex(j, p); ok && hasTrackingFinalizer(p) && indexFailed(log, j, p) {
			fresh = append(fresh, ix)
		}
	}
	slices.Sort(fresh)
	out := prev.withIndexes(slices.Compact(fresh))
	return &out
}

// indexFailed: p failed and its index may not be retried.
func indexFailed(log logr.Logger, j *batchv1.Job, p *corev1.Pod) bool {
	if !isPodFailed(p, j) {
		return false
	}
	counts := true
	if j.Spec.PodFailurePolicy != nil {
		m := matchPodFailurePolicy(j.Spec.PodFailurePolicy, p)
		if m.action != nil && *m.action == batchv1.PodFailurePolicyActionFailIndex {
			return true
		}
		counts = m.countFailed
	}
	return counts && indexFailureCount(log, p) >= *j.Spec.BackoffLimitPerIndex
}

// pendingIndexes returns up to count indexes below completions that no
// active pod, succeeded or failed index holds (nor, with
// podReplacementPolicy Failed, a terminating pod), lowest first.
func pendingIndexes(jc *syncContext, count, completions int) []int {
	if count == 0 {
		return nil
	}
	taken := jc.succeededIndexes.withIndexes(indexSet(jc.activePods))
	if onlyReplaceFailed(jc.job) {
		taken = taken.withIndexes(indexSet(filterPods(jc.pods, podstate.IsTerminating)))
	}
	if jc.failedIndexes != nil {
		taken = taken.union(*jc.failedIndexes)
	}
	out := make([]int, 0, count)
	next := 0
	for _, x := range taken {
		for ; next < completions && len(out) < count && next < x.first; next++ {
			out = append(out, next)
		}
		next = max(next, x.last+1)
	}
	for ; next < completions && len(out) < count; next++ {
		out = append(out, next)
	}
	return out
}

// duplicateIndexPods splits active pods of an Indexed Job: pods without a
// valid index and all but one pod of a repeated index go to rm (the one
// kept is the last in deletion order), the rest to keep.
func duplicateIndexPods(pods []*corev1.Pod, completions int) (rm, keep []*corev1.Pod) {
	byIndex := map[int][]*corev1.Pod{}
	var order []int
	for _, p := range pods {
		ix := completionIndex(p)
		if ix == noIndex || ix >= completions {
			rm = append(rm, p)
			continue
		}
		if _, ok := byIndex[ix]; !ok {
			order = append(order, ix)
		}
		byIndex[ix] = append(byIndex[ix], p)
	}
	slices.Sort(order)
	for _, ix := range order {
		group := byIndex[ix]
		if len(group) > 1 {
			sortForDeletion(group)
		}
		rm = append(rm, group[:len(group)-1]...)
		keep = append(keep, group[len(group)-1])
	}
	return rm, keep
}

// delayedDeletions returns, per index, the failed pod whose finalizer is
// kept until its replacement exists (backoffLimitPerIndex: the replacement
// inherits its failure count from it): the newest, most-failed pod of each
// index that is neither done nor has an active pod.
func delayedDeletions(log logr.Logger, jc *syncContext) map[int]*corev1.Pod {
	active := map[int]bool{}
	for _, ix := range indexSet(jc.activePods) {
		active[ix] = true
	}
	out := map[int]*corev1.Pod{}
	for _, p := range jc.uncountedPods(nil) {
		if !isPodFailed(p, jc.job) {
			continue
		}
		ix, ok := validIndex(jc.job, p)
		if !ok || jc.succeededIndexes.has(ix) || jc.failedIndexes.has(ix) || active[ix] {
			continue
		}
		if cur, ok := out[ix]; ok {
			if absoluteFailureCount(log, cur) <= absoluteFailureCount(log, p) &&
				!finishTime(p).Before(finishTime(cur)) {
				out[ix] = p
			}
		} else {
			out[ix] = p
		}
	}
	return out
}

// indexFailureCount is the pod's job-index-failure-count annotation; 0
// when absent or invalid.
func indexFailureCount(log logr.Logger, p *corev1.Pod) int32 {
	return annotationInt32(log, p, batchv1.JobIndexFailureCountAnnotation)
}

func indexIgnoredFailureCount(log logr.Logger, p *corev1.Pod) int32 {
	return annotationInt32(log, p, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

func absoluteFailureCount(log logr.Logger, p *corev1.Pod) int32 {
	return indexFailureCount(log, p) + indexIgnoredFailureCount(log, p)
}

func annotationInt32(log logr.Logger, p *corev1.Pod, key string) int32 {
	v, ok := p.Annotations[key]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		log.Error(err, "Failed to parse the value", "annotation", key, "value", v, "pod", podKey(p))
		return 0
	}
	if n < 0 || n > math.MaxInt32 {
		log.Info("The value is invalid", "annotation", key, "value", n, "pod", podKey(p))
		return 0
	}
	return int32(n)
}

// replacementFailureCounts are the failure-count annotations of the pod
// replacing replaced (nil: the index's first pod).
func replacementFailureCounts(
	log logr.Logger,
	j *batchv1.Job,
	replaced *corev1.Pod,
) (failures, ignored int32) {
	if replaced == nil {
		return 0, 0
	}
	failures, ignored = indexFailureCount(log, replaced), indexIgnoredFailureCount(log, replaced)
	if j.Spec.PodFailurePolicy != nil &&
		!matchPodFailurePolicy(j.Spec.PodFailurePolicy, replaced).countFailed {
		ignored++
	} else {
		failures++
	}
	return failures, ignored
}

// withIndexEnv adds JOB_COMPLETION_INDEX, from the completion-index label,
// to every container and init container that lacks it.
func withIndexEnv(t *corev1.PodTemplateSpec) {
	add := func(cs []corev1.Container) {
		for i := range cs {
			if slices.ContainsFunc(
				cs[i].Env,
				func(e corev1.EnvVar) bool { return e.Name == completionIndexEnv },
			) {
				continue
			}
			cs[i].Env = append(cs[i].Env, corev1.EnvVar{
				Name: completionIndexEnv,
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
					FieldPath: fmt.Sprintf(
						"metadata.labels['%s']",
						batchv1.JobCompletionIndexAnnotation,
					),
				}},
			})
		}
	}
	add(t.Spec.InitContainers)
	add(t.Spec.Containers)
}

// indexedGenerateName is "<job>-<index>-", the job name shortened so that
// the prefix stays within the API server's limit for generated names.
func indexedGenerateName(job string, index int) string {
	suffix := "-" + strconv.Itoa(index) + "-"
	if len(job)+len(suffix) > maxGeneratedNameLength {
		job = job[:maxGeneratedNameLength-len(suffix)]
	}
	return job + suffix
}
