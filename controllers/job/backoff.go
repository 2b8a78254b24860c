package job

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// backoffRecord is what the pod-creation back-off of one Job depends on:
// how many pods failed since the last success, and when the last of them
// finished.
type backoffRecord struct {
	key                      string
	failuresAfterLastSuccess int32
	lastFailureTime          *time.Time
}

// backoffStore keeps the back-off records of all Jobs, in memory only (as
// KCM: a restarted controller starts every Job's back-off afresh).
type backoffStore struct {
	mu      sync.Mutex
	records map[string]backoffRecord
}

func newBackoffStore() *backoffStore { return &backoffStore{records: map[string]backoffRecord{}} }

func (s *backoffStore) update(r backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[r.key] = r
}

func (s *backoffStore) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, key)
}

func (s *backoffStore) get(key string) (backoffRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[key]
	return r, ok
}

// next returns key's record after the pods that newly succeeded and failed
// (not yet counted in the Job's status): a success resets the count, and
// only failures that finished after the newest success count.
func (s *backoffStore) next(key string, succeeded, failed []*corev1.Pod) backoffRecord {
	r, ok := s.get(key)
	if !ok {
		r = backoffRecord{key: key}
	}
	if len(succeeded) == 0 && len(failed) == 0 {
		return r
	}
	failed = slices.Clone(failed)
	sortByFinishTime(failed)
	if len(succeeded) == 0 {
		r.failuresAfterLastSuccess += int32(len(failed))
		last := finishTime(failed[len(failed)-1])
		r.lastFailureTime = &last
		return r
	}
	succeeded = slices.Clone(succeeded)
	sortByFinishTime(succeeded)
	r.failuresAfterLastSuccess = 0
	r.lastFailureTime = nil
	lastSuccess := finishTime(succeeded[len(succeeded)-1])
	for i := len(failed) - 1; i >= 0; i-- {
		t := finishTime(failed[i])
		if !t.After(lastSuccess) {
			break
		}
		if r.lastFailureTime == nil {
			r.lastFailureTime = &t
		}
		r.failuresAfterLastSuccess++
	}
	return r
}

// remaining is how long pod creation still waits after r's failures.
func (r backoffRecord) remaining(clk clock.PassiveClock) time.Duration {
	return backoffRemaining(clk, r.failuresAfterLastSuccess, r.lastFailureTime)
}

// backoffRemaining is how long after now a pod may be created after
// failures consecutive failures, the last at last: podFailureBackoffBase
// for the first, doubling with each further one, capped at
// podFailureBackoffMax, counted from last.
func backoffRemaining(clk clock.PassiveClock, failures int32, last *time.Time) time.Duration {
	if failures == 0 || last == nil {
		return 0
	}
	d := podFailureBackoffBase
	for i := int32(1); i < failures; i++ {
		d *= 2
		if d >= podFailureBackoffMax {
			d = podFailureBackoffMax
			break
		}
	}
	elapsed := clk.Since(*last)
	if d < elapsed {
		return 0
	}
	return d - elapsed
}

func sortByFinishTime(pods []*corev1.Pod) {
	slices.SortStableFunc(
		pods,
		func(a, b *corev1.Pod) int { return finishTime(a).Compare(finishTime(b)) },
	)
}

// finishTime is when a pod finished: the latest finish of its containers
// (and sidecars) if all of them terminated; else when it stopped being
// ready; else its deletion time less its grace period; else its creation.
func finishTime(p *corev1.Pod) time.Time {
	if t := containersFinished(p); t != nil {
		return *t
	}
	if c := podCondition(&p.Status, corev1.PodReady); c != nil &&
		c.Status == corev1.ConditionFalse &&
		!c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	if p.DeletionTimestamp != nil {
		return p.DeletionTimestamp.Add(
			-time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second,
		)
	}
	return p.CreationTimestamp.Time
}

// containersFinished is the latest finish time of p's containers: nil if
// a regular container has not finished (or has no finish time), unless
// every restartable init container (sidecar) has, when the sidecars' latest
// counts; nil too if a sidecar has not finished. (KCM's rule, edge cases
// included.)
func containersFinished(p *corev1.Pod) *time.Time {
	latest := func(prev *time.Time, statuses []corev1.ContainerStatus,
		include func(string) bool) *time.Time {
		out := prev
		for _, s := range statuses {
			if include != nil && !include(s.Name) {
				continue
			}
			t := s.State.Terminated
			if t == nil || t.FinishedAt.IsZero() {
				return nil
			}
			if out == nil || out.Before(t.FinishedAt.Time) {
				out = &t.FinishedAt.Time
			}
		}
		return out
	}
	sidecars := map[string]bool{}
	for _, ct := range p.Spec.InitContainers {
		if ct.RestartPolicy != nil && *ct.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[ct.Name] = true
		}
	}
	regular := latest(nil, p.Status.ContainerStatuses, nil)
	return latest(
		regular,
		p.Status.InitContainerStatuses,
		func(name string) bool { return sidecars[name] },
	)
}
