package job

import (
	"slices"
	"testing"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestSpans(t *testing.T) {
	tests := []struct {
		in          string
		completions int
		add         []int
		want        string
		total       int
	}{
		{"", 10, nil, "", 0},
		{"", 10, []int{1, 3, 4, 5}, "1,3-5", 4},
		{"0,1", 10, nil, "0,1", 2},
		{"0-2", 10, []int{3}, "0-3", 4},
		{"1,3-5", 10, []int{2}, "1-5", 5},
		{"1,3-5", 10, []int{7, 8}, "1,3-5,7,8", 6},
		{"1,3-5,8-12", 10, nil, "1,3-5,8,9", 6},
		{"12", 10, []int{0}, "0", 1},
		{"x,2-y,4", 10, nil, "4", 1},
		{"2,3,4", 10, nil, "2-4", 3},
		{"0-4", 10, []int{2, 3}, "0-4", 5},
	}
	for _, tt := range tests {
		s := parseSpans(logr.Discard(), tt.in, tt.completions).withIndexes(tt.add)
		if s.String() != tt.want || s.total() != tt.total {
			t.Errorf(
				"%q + %v = %q (%d), want %q (%d)",
				tt.in,
				tt.add,
				s.String(),
				s.total(),
				tt.want,
				tt.total,
			)
		}
	}
	s := parseSpans(logr.Discard(), "1,3-5,9", 10)
	for ix, want := range map[int]bool{0: false, 1: true, 2: false, 3: true, 4: true, 5: true, 6: false, 9: true, 10: false} {
		if s.has(ix) != want {
			t.Errorf("has(%d) = %v", ix, !want)
		}
	}
	if (*spans)(nil).has(0) {
		t.Error("a nil list has 0")
	}
	if got := parseSpans(logr.Discard(), "0-2", 10).union(parseSpans(logr.Discard(), "4,6-7", 10)).String(); got != "0-2,4,6,7" {
		t.Errorf("union %q", got)
	}
}

func TestPendingIndexes(t *testing.T) {
	j := newJob("work", indexed, completions(8))
	pod := func(ix int, mods ...func(*corev1.Pod)) *corev1.Pod {
		return cached(t, newPod("p", j, append([]func(*corev1.Pod){atIndex(ix)}, mods...)...))[0]
	}
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(epochTime()) }
	tests := []struct {
		name      string
		replace   batchv1.PodReplacementPolicy
		succeeded string
		failed    *string
		active    []*corev1.Pod
		others    []*corev1.Pod
		count     int
		want      []int
	}{
		{"from zero", batchv1.TerminatingOrFailed, "", nil, nil, nil, 3, []int{0, 1, 2}},
		{
			"skip succeeded and active",
			batchv1.TerminatingOrFailed,
			"0,2",
			nil,
			[]*corev1.Pod{pod(1), pod(4)},
			nil,
			3,
			[]int{3, 5, 6},
		},
		{"skip failed", batchv1.TerminatingOrFailed, "", ptr.To("0-3"), nil, nil, 2, []int{4, 5}},
		{"stop at completions", batchv1.TerminatingOrFailed, "0-5", nil, nil, nil, 5, []int{6, 7}},
		{
			"terminating replaced at once",
			batchv1.TerminatingOrFailed,
			"",
			nil,
			nil,
			[]*corev1.Pod{pod(0, terminating)},
			1,
			[]int{0},
		},
		{
			"terminating waited for with Failed",
			batchv1.Failed,
			"",
			nil,
			nil,
			[]*corev1.Pod{pod(0, terminating)},
			1,
			[]int{1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jj := j.DeepCopy()
			jj.Spec.PodReplacementPolicy = ptr.To(tt.replace)
			jc := &syncContext{
				job:              jj,
				activePods:       tt.active,
				pods:             append(slices.Clone(tt.active), tt.others...),
				succeededIndexes: parseSpans(logr.Discard(), tt.succeeded, 8),
			}
			if tt.failed != nil {
				f := parseSpans(logr.Discard(), *tt.failed, 8)
				jc.failedIndexes = &f
			}
			if got := pendingIndexes(jc, tt.count, 8); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPodsForRemoval: an Indexed Job first loses pods without a valid
// index and the extra pods of repeated indexes (keeping the running one),
// then others in deletion order (pending before running).
func TestPodsForRemoval(t *testing.T) {
	j := newJob("work", indexed, completions(3))
	mk := func(name string, ix int, mods ...func(*corev1.Pod)) *corev1.Pod {
		p := newPod(name, j, mods...)
		if ix >= 0 {
			atIndex(ix)(p)
		}
		return cached(t, p)[0]
	}
	pods := []*corev1.Pod{
		mk("dup-run", 1, running),
		mk("dup-pend", 1),
		mk("none", -1),
		mk("big", 5),
		mk("zero", 0, running),
		mk("two", 2),
	}
	names := func(ps []*corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(podsForRemoval(j, pods, 0)); !slices.Equal(
		got,
		[]string{"big", "dup-pend", "none"},
	) {
		t.Errorf("removal of none extra: %v", got)
	}
	if got := names(podsForRemoval(j, pods, 4)); !slices.Equal(
		got,
		[]string{"big", "dup-pend", "none", "two"},
	) {
		t.Errorf("removal of 4: %v", got)
	}
	nonIndexed := newJob("work")
	if got := names(podsForRemoval(nonIndexed, []*corev1.Pod{mk("a", -1, running), mk("b", -1)}, 1)); !slices.Equal(
		got,
		[]string{"b"},
	) {
		t.Errorf("non-indexed removal: %v", got)
	}
}

func TestIndexedGenerateName(t *testing.T) {
	long := "a-very-long-job-name-that-goes-on-and-on-beyond-the-limit-of-names"
	for _, tt := range []struct {
		job  string
		ix   int
		want string
	}{
		{"work", 3, "work-3-"},
		{long, 12, long[:58-4] + "-12-"},
	} {
		if got := indexedGenerateName(tt.job, tt.ix); got != tt.want ||
			len(got) > maxGeneratedNameLength {
			t.Errorf("indexedGenerateName(%q, %d) = %q, want %q", tt.job, tt.ix, got, tt.want)
		}
	}
}
