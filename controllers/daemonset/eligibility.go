package daemonset

import (
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// defaultTolerations are the tolerations every daemon pod gets, in the
// order KCM adds them: node problems must not evict it (NoExecute for
// not-ready and unreachable), and the node-condition taints must not keep
// it off a node (NoSchedule). hostNetwork pods also tolerate an
// unavailable network.
var defaultTolerations = []corev1.Toleration{
	{
		Key:      corev1.TaintNodeNotReady,
		Operator: corev1.TolerationOpExists,
		Effect:   corev1.TaintEffectNoExecute,
	},
	{
		Key:      corev1.TaintNodeUnreachable,
		Operator: corev1.TolerationOpExists,
		Effect:   corev1.TaintEffectNoExecute,
	},
	{
		Key:      corev1.TaintNodeDiskPressure,
		Operator: corev1.TolerationOpExists,
		Effect:   corev1.TaintEffectNoSchedule,
	},
	{
		Key:      corev1.TaintNodeMemoryPressure,
		Operator: corev1.TolerationOpExists,
		Effect:   corev1.TaintEffectNoSchedule,
	},
	{
		Key:      corev1.TaintNodePIDPressure,
		Operator: corev1.TolerationOpExists,
		Effect:   corev1.TaintEffectNoSchedule,
	},
	{
		Key:      corev1.TaintNodeUnschedulable,
		Operator: corev1.TolerationOpExists,
		Effect:   corev1.TaintEffectNoSchedule,
	},
}

var hostNetworkToleration = corev1.Toleration{
	Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists,
	Effect: corev1.TaintEffectNoSchedule,
}

// addDaemonTolerations adds the default tolerations to spec in place. A
// toleration equal in key, operator, value and effect to one of them is
// replaced where it stands (an identical one is left alone); the others are
// appended.
func addDaemonTolerations(spec *corev1.PodSpec) {
	add := defaultTolerations
	if spec.HostNetwork {
		add = append(add[:len(add):len(add)], hostNetworkToleration)
	}
	for _, t := range add {
		setToleration(spec, t)
	}
}

func setToleration(spec *corev1.PodSpec, t corev1.Toleration) {
	matched := false
	for i := range spec.Tolerations {
		if t.MatchToleration(&spec.Tolerations[i]) {
			if equality.Semantic.DeepEqual(t, spec.Tolerations[i]) {
				return // already there as is
			}
			matched = true
		}
	}
	if !matched {
		spec.Tolerations = append(spec.Tolerations, t)
		return
	}
	// Same identity, other tolerationSeconds: ours replaces each.
	out := make([]corev1.Toleration, len(spec.Tolerations))
	for i, x := range spec.Tolerations {
		if t.MatchToleration(&x) {
			x = t
		}
		out[i] = x
	}
	spec.Tolerations = out
}

// daemonTolerations returns the tolerations ds's pods get, without
// touching ds.
func daemonTolerations(ds *appsv1.DaemonSet) []corev1.Toleration {
	spec := corev1.PodSpec{HostNetwork: ds.Spec.Template.Spec.HostNetwork}
	spec.Tolerations = append([]corev1.Toleration(nil), ds.Spec.Template.Spec.Tolerations...)
	addDaemonTolerations(&spec)
	return spec.Tolerations
}

// eligibility answers, for one DaemonSet, which nodes should run its pod.
// Build it once per sync: parsing the selectors is the costly part.
type eligibility struct {
	nodeName    string
	tolerations []corev1.Toleration
	affinity    requiredAffinity
	comparison  bool
}

func newEligibility(ds *appsv1.DaemonSet, comparisonOperators bool) eligibility {
	spec := &ds.Spec.Template.Spec
	return eligibility{
		nodeName:    spec.NodeName,
		tolerations: daemonTolerations(ds),
		affinity:    newRequiredAffinity(spec.NodeSelector, spec.Affinity),
		comparison:  comparisonOperators,
	}
}

// check returns whether a daemon pod should be started on node
// (shouldRun) and whether one already there should stay (shouldContinue):
// the template's nodeName, if any, must be node's; the nodeSelector and
// required node affinity must match; a NoSchedule or NoExecute taint not
// tolerated stops new pods, and only an untolerated NoExecute taint evicts
// the running one.
func (e eligibility) check(node *corev1.Node) (shouldRun, shouldContinue bool) {
	if e.nodeName != "" && e.nodeName != node.Name {
		return false, false
	}
	if !e.affinity.matches(node) {
		return false, false
	}
	if !e.untolerated(node.Spec.Taints, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) {
		return true, true
	}
	return false, !e.untolerated(node.Spec.Taints, corev1.TaintEffectNoExecute)
}

// untolerated reports whether a taint with one of effects is tolerated by
// none of the tolerations.
func (e eligibility) untolerated(taints []corev1.Taint, effects ...corev1.TaintEffect) bool {
	for i := range taints {
		t := &taints[i]
		relevant := false
		for _, eff := range effects {
			relevant = relevant || t.Effect == eff
		}
		if !relevant {
			continue
		}
		tolerated := false
		for j := range e.tolerations {
			if e.tolerations[j].ToleratesTaint(logr.Discard(), t, e.comparison) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return true
		}
	}
	return false
}

// requiredAffinity is a pod spec's nodeSelector and required node affinity,
// parsed. As in the scheduler's helpers, terms that fail to parse match
// nothing, and an empty term (no expressions, no fields) is skipped.
type requiredAffinity struct {
	selector labels.Selector // nil: no nodeSelector
	terms    []affinityTerm  // used when hasTerms
	hasTerms bool
}

type affinityTerm struct {
	labels labels.Selector // nil: no matchExpressions
	fields fields.Selector // nil: no matchFields
	bad    bool
}

func newRequiredAffinity(nodeSelector map[string]string, a *corev1.Affinity) requiredAffinity {
	var r requiredAffinity
	if len(nodeSelector) > 0 {
		r.selector = labels.SelectorFromSet(nodeSelector)
	}
	if a == nil || a.NodeAffinity == nil ||
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return r
	}
	r.hasTerms = true
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue
		}
		var at affinityTerm
		var err error
		if len(t.MatchExpressions) > 0 {
			if at.labels, err = expressionsSelector(t.MatchExpressions); err != nil {
				at.bad = true
			}
		}
		if len(t.MatchFields) > 0 {
			if at.fields, err = fieldsSelector(t.MatchFields); err != nil {
				at.bad = true
			}
		}
		r.terms = append(r.terms, at)
	}
	return r
}

// matches: the nodeSelector matches node's labels, and, when there is a
// required node affinity, at least one of its terms matches.
func (r requiredAffinity) matches(node *corev1.Node) bool {
	if r.selector != nil && !r.selector.Matches(labels.Set(node.Labels)) {
		return false
	}
	if !r.hasTerms {
		return true
	}
	nodeFields := fields.Set{}
	if node.Name != "" {
		nodeFields["metadata.name"] = node.Name
	}
	for _, t := range r.terms {
		if t.bad {
			continue
		}
		if t.labels != nil && !t.labels.Matches(labels.Set(node.Labels)) {
			continue
		}
		if t.fields != nil && len(nodeFields) > 0 && !t.fields.Matches(nodeFields) {
			continue
		}
		return true
	}
	return false
}

var selectorOps = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

func expressionsSelector(reqs []corev1.NodeSelectorRequirement) (labels.Selector, error) {
	sel := labels.NewSelector()
	for _, r := range reqs {
		op, ok := selectorOps[r.Operator]
		if !ok {
			return nil, fmt.Errorf("unsupported operator %q", r.Operator)
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}

func fieldsSelector(reqs []corev1.NodeSelectorRequirement) (fields.Selector, error) {
	var sels []fields.Selector
	for _, r := range reqs {
		if len(r.Values) != 1 {
			return nil, fmt.Errorf("matchFields %s: values must have one element", r.Key)
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			sels = append(sels, fields.OneTermEqualSelector(r.Key, r.Values[0]))
		case corev1.NodeSelectorOpNotIn:
			sels = append(sels, fields.OneTermNotEqualSelector(r.Key, r.Values[0]))
		default:
			return nil, fmt.Errorf("unsupported matchFields operator %q", r.Operator)
		}
	}
	return fields.AndSelectors(sels...), nil
}

// targetAffinity returns a (modified in place, or new) affinity whose
// required node affinity selects exactly nodeName by metadata.name: the
// required terms are replaced, everything else (preferred terms, pod
// affinity) is kept. That is how KCM pins a daemon pod for the scheduler.
func targetAffinity(a *corev1.Affinity, nodeName string) *corev1.Affinity {
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{
			Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName},
		}},
	}}}
	switch {
	case a == nil:
		return &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel},
		}
	case a.NodeAffinity == nil:
		a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}
	case a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil:
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
	default:
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms =
			sel.NodeSelectorTerms
	}
	return a
}

// targetNode is the node a daemon pod is for: its spec.nodeName once
// bound, before that the node its required affinity pins (a
// metadata.name In [one value] field requirement).
func targetNode(p *corev1.Pod) (string, error) {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName, nil
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil ||
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", errors.New("no required node affinity")
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, t := range terms {
		for _, f := range t.MatchFields {
			if f.Key != metav1.ObjectNameField || f.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			if len(f.Values) != 1 {
				return "", errors.New("the metadata.name field requirement has more than one value")
			}
			return f.Values[0], nil
		}
	}
	return "", errors.New("no metadata.name field requirement in the required node affinity")
}
