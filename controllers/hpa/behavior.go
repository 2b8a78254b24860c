package hpa

import (
	"math"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// KCM's cap on a scale-up without behaviour: twice the replicas, or 4.
const (
	scaleUpLimitFactor  = 2.0
	scaleUpLimitMinimum = 4.0
)

type recommendation struct {
	replicas int32
	at       time.Time
}

type scaleEvent struct {
	change   int32 // never negative
	at       time.Time
	outdated bool
}

// history is what the controller remembers of each HPA between syncs, in
// memory as KCM does: its recent recommendations and scale events.
type history struct {
	mu              sync.Mutex
	recommendations map[string][]recommendation
	ups, downs      map[string][]scaleEvent
}

func newHistory() *history {
	return &history{recommendations: map[string][]recommendation{},
		ups: map[string][]scaleEvent{}, downs: map[string][]scaleEvent{}}
}

func (h *history) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.recommendations, key)
	delete(h.ups, key)
	delete(h.downs, key)
}

// seed records the current count as the first recommendation.
func (h *history) seed(key string, current int32, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recommendations[key] == nil {
		h.recommendations[key] = []recommendation{{current, now}}
	}
}

// record puts r in the place of a sample older than every window, or
// appends it.
func (h *history) record(key string, r recommendation, old int, found bool) {
	if found {
		h.recommendations[key][old] = r
	} else {
		h.recommendations[key] = append(h.recommendations[key], r)
	}
}

// stabilize (no behaviour): the highest recommendation of the downscale
// window, the new one included.
func (h *history) stabilize(key string, desired int32, window time.Duration,
	now time.Time) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	highest := desired
	cutoff := now.Add(-window)
	old, found := 0, false
	for i, r := range h.recommendations[key] {
		if r.at.Before(cutoff) {
			old, found = i, true
		} else if r.replicas > highest {
			highest = r.replicas
		}
	}
	h.record(key, recommendation{desired, now}, old, found)
	return highest
}

// stabilizeWithBehavior bounds the count between the lowest
// recommendation of the scale-up window and the highest of the scale-down
// window, starting from the current count.
func (h *history) stabilizeWithBehavior(a normalization, now time.Time) (int32, string,
	string) {
	up, down := a.desired, a.desired
	upCutoff := now.Add(-time.Second * time.Duration(*a.scaleUp.StabilizationWindowSeconds))
	downCutoff := now.Add(
		-time.Second * time.Duration(*a.scaleDown.StabilizationWindowSeconds))
	h.mu.Lock()
	defer h.mu.Unlock()
	old, found := 0, false
	for i, r := range h.recommendations[a.key] {
		if r.at.After(upCutoff) {
			up = min(up, r.replicas)
		}
		if r.at.After(downCutoff) {
			down = max(down, r.replicas)
		}
		if r.at.Before(upCutoff) && r.at.Before(downCutoff) {
			old, found = i, true
		}
	}
	n := max(a.current, up)
	n = min(n, down)
	h.record(a.key, recommendation{a.desired, now}, old, found)
	if a.desired >= a.current {
		return n, "ScaleUpStabilized",
			"recent recommendations were lower than current one, " +
				"applying the lowest recent recommendation"
	}
	return n, "ScaleDownStabilized",
		"recent recommendations were higher than current one, " +
			"applying the highest recent recommendation"
}

// storeScaleEvent records a scale under the behaviour's policies, reusing
// the slot of an event older than the longest policy period.
func (h *history) storeScaleEvent(b *autoscalingv2.HorizontalPodAutoscalerBehavior, key string,
	from, to int32, now time.Time) {
	if b == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	events, rules, change := h.downs, b.ScaleDown, from-to
	if to > from {
		events, rules, change = h.ups, b.ScaleUp, to-from
	}
	list := events[key]
	cutoff := now.Add(-time.Second * time.Duration(longestPeriod(rules)))
	old, found := 0, false
	for i := range list {
		if list[i].at.Before(cutoff) {
			list[i].outdated = true
		}
		if list[i].outdated {
			old, found = i, true
		}
	}
	e := scaleEvent{change: change, at: now}
	if found {
		list[old] = e
	} else {
		events[key] = append(list, e)
	}
}

func longestPeriod(r *autoscalingv2.HPAScalingRules) int32 {
	var longest int32
	for _, p := range r.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	return longest
}

// changedWithin sums the changes of the events of the last period.
func changedWithin(period int32, events []scaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Second * time.Duration(period))
	var n int32
	for _, e := range events {
		if e.at.After(cutoff) {
			n += e.change
		}
	}
	return n
}

// normalization is what normalizing a count with behaviour needs.
type normalization struct {
	key                string
	scaleUp, scaleDown *autoscalingv2.HPAScalingRules
	min, max           int32
	current, desired   int32
}

// rateLimited applies the behaviour's policies (not its windows).
func (h *history) rateLimited(a normalization, now time.Time) (int32, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case a.desired > a.current:
		limit := max(scaleUpLimit(a.current, h.ups[a.key], h.downs[a.key], a.scaleUp, now),
			a.current)
		allowed, reason, msg := a.max, "TooManyReplicas",
			"the desired replica count is more than the maximum replica count"
		if a.max > limit {
			allowed, reason, msg = limit, "ScaleUpLimit",
				"the desired replica count is increasing faster than the maximum scale rate"
		}
		if a.desired > allowed {
			return allowed, reason, msg
		}
	case a.desired < a.current:
		limit := min(scaleDownLimit(a.current, h.ups[a.key], h.downs[a.key], a.scaleDown, now),
			a.current)
		allowed, reason, msg := a.min, "TooFewReplicas",
			"the desired replica count is less than the minimum replica count"
		if a.min < limit {
			allowed, reason, msg = limit, "ScaleDownLimit",
				"the desired replica count is decreasing faster than the maximum scale rate"
		}
		if a.desired < allowed {
			return allowed, reason, msg
		}
	}
	return a.desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// scaleUpLimit is the most replicas the policies allow now.
func scaleUpLimit(current int32, ups, downs []scaleEvent, r *autoscalingv2.HPAScalingRules,
	now time.Time) int32 {
	if *r.SelectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	pick, result := maxOf, int32(math.MinInt32)
	if *r.SelectPolicy == autoscalingv2.MinChangePolicySelect {
		pick, result = minOf, math.MaxInt32
	}
	for _, p := range r.Policies {
		start := current - changedWithin(p.PeriodSeconds, ups, now) +
			changedWithin(p.PeriodSeconds, downs, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = start + p.Value
		case autoscalingv2.PercentScalingPolicy:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return result
}

// scaleDownLimit is the fewest replicas the policies allow now.
func scaleDownLimit(current int32, ups, downs []scaleEvent, r *autoscalingv2.HPAScalingRules,
	now time.Time) int32 {
	if *r.SelectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	pick, result := minOf, int32(math.MaxInt32)
	if *r.SelectPolicy == autoscalingv2.MinChangePolicySelect {
		pick, result = maxOf, math.MinInt32
	}
	for _, p := range r.Policies {
		start := current - changedWithin(p.PeriodSeconds, ups, now) +
			changedWithin(p.PeriodSeconds, downs, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case autoscalingv2.PercentScalingPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// limitWithoutBehavior bounds a count by min and max replicas and KCM's
// fixed scale-up rate.
func limitWithoutBehavior(current, desired, minReplicas, maxReplicas int32) (int32, string,
	string) {
	upLimit := int32(math.Max(scaleUpLimitFactor*float64(current), scaleUpLimitMinimum))
	allowed, reason, msg := maxReplicas, "TooManyReplicas",
		"the desired replica count is more than the maximum replica count"
	if maxReplicas > upLimit {
		allowed, reason, msg = upLimit, "ScaleUpLimit",
			"the desired replica count is increasing faster than the maximum scale rate"
	}
	switch {
	case desired < minReplicas:
		return minReplicas, "TooFewReplicas",
			"the desired replica count is less than the minimum replica count"
	case desired > allowed:
		return allowed, reason, msg
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// normalize bounds the metrics' count without behaviour, setting
// AbleToScale and ScalingLimited.
func (c *controller) normalize(hpa *autoscalingv2.HorizontalPodAutoscaler, key string,
	current, desired, minReplicas int32, now time.Time) int32 {
	stabilized := c.history.stabilize(key, desired, c.downscaleWindow, now)
	if stabilized != desired {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ScaleDownStabilized",
			"recent recommendations were higher than current one, "+
				"applying the highest recent recommendation", now)
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale",
			"recommended size matches current size", now)
	}
	n, reason, msg := limitWithoutBehavior(current, stabilized, minReplicas, hpa.Spec.MaxReplicas)
	setCondition(hpa, autoscalingv2.ScalingLimited, limitedStatus(n != stabilized), reason, msg,
		now)
	return n
}

// normalizeWithBehavior bounds the metrics' count with the HPA's
// behaviour: its stabilization windows, then its policies.
func (c *controller) normalizeWithBehavior(hpa *autoscalingv2.HorizontalPodAutoscaler,
	key string, current, desired, minReplicas int32, now time.Time) int32 {
	b := hpa.Spec.Behavior
	if b.ScaleDown != nil && b.ScaleDown.StabilizationWindowSeconds == nil {
		w := int32(c.downscaleWindow.Seconds())
		b.ScaleDown.StabilizationWindowSeconds = &w
	}
	a := normalization{key: key, scaleUp: b.ScaleUp, scaleDown: b.ScaleDown,
		min: minReplicas, max: hpa.Spec.MaxReplicas, current: current, desired: desired}
	stabilized, reason, msg := c.history.stabilizeWithBehavior(a, now)
	if stabilized != desired {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, reason, msg, now)
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale",
			"recommended size matches current size", now)
	}
	a.desired = stabilized
	n, reason, msg := c.history.rateLimited(a, now)
	setCondition(hpa, autoscalingv2.ScalingLimited, limitedStatus(n != stabilized), reason, msg,
		now)
	return n
}

func limitedStatus(limited bool) corev1.ConditionStatus {
	if limited {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

func minOf(a, b int32) int32 { return min(a, b) }
func maxOf(a, b int32) int32 { return max(a, b) }
