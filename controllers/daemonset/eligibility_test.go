package daemonset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func taint(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "v", Effect: effect})
	}
}

func nodeLabel(k, v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels[k] = v } }

func toleration(t corev1.Toleration) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Tolerations = append(ds.Spec.Template.Spec.Tolerations, t)
	}
}

func requiredTerms(terms ...corev1.NodeSelectorTerm) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: terms,
			},
		}}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: key, Operator: op, Values: values},
		},
	}
}

// TestNodeEligibility: which nodes should start a daemon pod (shouldRun)
// and which keep one already there (shouldContinue).
func TestNodeEligibility(t *testing.T) {
	tests := []struct {
		name                  string
		ds                    []func(*appsv1.DaemonSet)
		node                  []func(*corev1.Node)
		comparison            bool
		wantRun, wantContinue bool
	}{
		{name: "plain node", wantRun: true, wantContinue: true},
		{name: "nodeSelector matches",
			ds: []func(*appsv1.DaemonSet){
				func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "x"} },
			},
			node:    []func(*corev1.Node){nodeLabel("zone", "x")},
			wantRun: true, wantContinue: true},
		{name: "nodeSelector does not match",
			ds: []func(*appsv1.DaemonSet){
				func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "x"} },
			},
			node: []func(*corev1.Node){nodeLabel("zone", "y")}},
		{name: "template nodeName is another node",
			ds: []func(*appsv1.DaemonSet){
				func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "other" },
			}},
		{name: "template nodeName is this node", wantRun: true, wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "n" },
			}},
		{name: "required affinity In matches", wantRun: true, wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				requiredTerms(expr("zone", corev1.NodeSelectorOpIn, "x", "z")),
			},
			node: []func(*corev1.Node){nodeLabel("zone", "x")}},
		{name: "required affinity In does not match",
			ds: []func(*appsv1.DaemonSet){
				requiredTerms(expr("zone", corev1.NodeSelectorOpIn, "z")),
			},
			node: []func(*corev1.Node){nodeLabel("zone", "x")}},
		{name: "required affinity terms are ORed", wantRun: true, wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				requiredTerms(
					expr("zone", corev1.NodeSelectorOpIn, "z"),
					expr("zone", corev1.NodeSelectorOpExists),
				),
			},
			node: []func(*corev1.Node){nodeLabel("zone", "x")}},
		{name: "required affinity DoesNotExist excludes",
			ds: []func(*appsv1.DaemonSet){
				requiredTerms(expr("role", corev1.NodeSelectorOpDoesNotExist)),
			},
			node: []func(*corev1.Node){nodeLabel("role", "edge")}},
		{name: "required affinity Gt", wantRun: true, wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				requiredTerms(expr("cores", corev1.NodeSelectorOpGt, "4")),
			},
			node: []func(*corev1.Node){nodeLabel("cores", "8")}},
		{name: "required affinity on metadata.name", wantRun: true, wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				requiredTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
					{
						Key:      metav1.ObjectNameField,
						Operator: corev1.NodeSelectorOpIn,
						Values:   []string{"n"},
					}}}),
			}},
		{name: "required affinity on another metadata.name",
			ds: []func(*appsv1.DaemonSet){
				requiredTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
					{
						Key:      metav1.ObjectNameField,
						Operator: corev1.NodeSelectorOpIn,
						Values:   []string{"m"},
					}}}),
			}},
		{name: "an invalid term matches nothing",
			ds: []func(*appsv1.DaemonSet){requiredTerms(expr("zone", "Near", "x"))}},
		{name: "only empty terms match nothing",
			ds: []func(*appsv1.DaemonSet){requiredTerms(corev1.NodeSelectorTerm{})}},
		{name: "untolerated NoSchedule taint: no new pod, the old stays",
			node: []func(*corev1.Node){
				taint("example.com/dedicated", corev1.TaintEffectNoSchedule),
			}, wantContinue: true},
		{name: "tolerated NoSchedule taint", wantRun: true, wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				toleration(
					corev1.Toleration{
						Key:      "example.com/dedicated",
						Operator: corev1.TolerationOpExists,
						Effect:   corev1.TaintEffectNoSchedule,
					},
				),
			},
			node: []func(*corev1.Node){
				taint("example.com/dedicated", corev1.TaintEffectNoSchedule),
			}},
		{name: "untolerated NoExecute taint evicts",
			node: []func(*corev1.Node){taint("example.com/evict", corev1.TaintEffectNoExecute)}},
		{name: "tolerated NoExecute taint", wantRun: true, wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				toleration(
					corev1.Toleration{
						Key:      "example.com/evict",
						Operator: corev1.TolerationOpEqual,
						Value:    "v",
					},
				),
			},
			node: []func(*corev1.Node){taint("example.com/evict", corev1.TaintEffectNoExecute)}},
		{name: "PreferNoSchedule is ignored", wantRun: true, wantContinue: true,
			node: []func(*corev1.Node){
				taint("example.com/soft", corev1.TaintEffectPreferNoSchedule),
			}},
		{name: "unschedulable node: tolerated by default", wantRun: true, wantContinue: true,
			node: []func(*corev1.Node){
				func(n *corev1.Node) { n.Spec.Unschedulable = true },
				taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
			}},
		{name: "not-ready NoExecute: tolerated by default", wantRun: true, wantContinue: true,
			node: []func(*corev1.Node){
				taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
			}},
		{name: "unreachable NoExecute: tolerated by default", wantRun: true, wantContinue: true,
			node: []func(*corev1.Node){
				taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
			}},
		{name: "not-ready NoSchedule: not tolerated", wantContinue: true,
			node: []func(*corev1.Node){
				taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule),
			}},
		{name: "memory pressure: tolerated by default", wantRun: true, wantContinue: true,
			node: []func(*corev1.Node){
				taint(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
			}},
		{name: "network unavailable: not tolerated without hostNetwork", wantContinue: true,
			node: []func(*corev1.Node){
				taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule),
			}},
		{name: "network unavailable: tolerated with hostNetwork", wantRun: true, wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true },
			},
			node: []func(*corev1.Node){
				taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule),
			}},
		{name: "Gt toleration without the comparison gate", wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				toleration(
					corev1.Toleration{
						Key:      "level",
						Operator: corev1.TolerationOpGt,
						Value:    "1",
						Effect:   corev1.TaintEffectNoSchedule,
					},
				),
			},
			node: []func(*corev1.Node){func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{
					{Key: "level", Value: "5", Effect: corev1.TaintEffectNoSchedule},
				}
			}}},
		{
			name:         "Gt toleration with the comparison gate",
			comparison:   true,
			wantRun:      true,
			wantContinue: true,
			ds: []func(*appsv1.DaemonSet){
				toleration(
					corev1.Toleration{
						Key:      "level",
						Operator: corev1.TolerationOpGt,
						Value:    "1",
						Effect:   corev1.TaintEffectNoSchedule,
					},
				),
			},
			node: []func(*corev1.Node){func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{
					{Key: "level", Value: "5", Effect: corev1.TaintEffectNoSchedule},
				}
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("agent", tt.ds...)
			run, cont := newEligibility(ds, tt.comparison).check(newNode("n", tt.node...))
			if run != tt.wantRun || cont != tt.wantContinue {
				t.Errorf(
					"shouldRun, shouldContinue = %v, %v; want %v, %v",
					run,
					cont,
					tt.wantRun,
					tt.wantContinue,
				)
			}
		})
	}
}

// TestDaemonTolerations: the defaults are appended in KCM's order, a
// template's identical toleration is not repeated, one differing only in
// tolerationSeconds is replaced in place, and the template is untouched.
func TestDaemonTolerations(t *testing.T) {
	own := corev1.Toleration{Key: "example.com/x", Operator: corev1.TolerationOpExists}
	withSeconds := corev1.Toleration{
		Key:               corev1.TaintNodeNotReady,
		Operator:          corev1.TolerationOpExists,
		Effect:            corev1.TaintEffectNoExecute,
		TolerationSeconds: ptr.To[int64](30),
	}
	ds := newDS(
		"agent",
		toleration(own),
		toleration(withSeconds),
		toleration(defaultTolerations[2]),
	)
	before := ds.DeepCopy()
	got := daemonTolerations(ds)
	want := []corev1.Toleration{
		own,
		defaultTolerations[0],
		defaultTolerations[2],
		defaultTolerations[1],
		defaultTolerations[3],
		defaultTolerations[4],
		defaultTolerations[5],
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("tolerations\n got %+v\nwant %+v", got, want)
	}
	if !equality.Semantic.DeepEqual(ds, before) {
		t.Error("the DaemonSet was modified")
	}
	hn := newDS("agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true })
	if got := daemonTolerations(hn); len(got) != 7 || got[6] != hostNetworkToleration {
		t.Errorf("hostNetwork tolerations %+v, want the six defaults and network-unavailable", got)
	}
}

func pinned(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}},
		}}},
	}
}

// TestTargetAffinity: the affinity KCM gives a daemon pod: its required
// node affinity becomes exactly metadata.name In [node]; preferred terms
// and pod (anti-)affinity are kept.
func TestTargetAffinity(t *testing.T) {
	preferred := []corev1.PreferredSchedulingTerm{
		{Weight: 1, Preference: expr("zone", corev1.NodeSelectorOpExists)},
	}
	podAff := &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: "zone"},
		},
	}
	tests := []struct {
		name string
		in   *corev1.Affinity
		want *corev1.Affinity
	}{
		{
			"none",
			nil,
			&corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: pinned("n1"),
				},
			},
		},
		{"pod affinity only", &corev1.Affinity{PodAffinity: podAff},
			&corev1.Affinity{
				PodAffinity: podAff,
				NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: pinned("n1"),
				},
			}},
		{
			"preferred only",
			&corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: preferred,
				},
			},
			&corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution:  pinned("n1"),
					PreferredDuringSchedulingIgnoredDuringExecution: preferred,
				},
			},
		},
		{"required terms replaced", &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{
					expr(
						"zone",
						corev1.NodeSelectorOpIn,
						"x",
					), expr("role", corev1.NodeSelectorOpExists)},
			},
			PreferredDuringSchedulingIgnoredDuringExecution: preferred}},
			&corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution:  pinned("n1"),
					PreferredDuringSchedulingIgnoredDuringExecution: preferred,
				},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := targetAffinity(tt.in.DeepCopy(), "n1")
			if !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
			if n, err := targetNode(&corev1.Pod{Spec: corev1.PodSpec{Affinity: got}}); err != nil ||
				n != "n1" {
				t.Errorf("targetNode = %q, %v; want n1", n, err)
			}
		})
	}
}

// TestTargetNode: a bound pod's node is spec.nodeName; an unbound one's is
// its metadata.name field requirement, which must have one value. The pods
// are read as the pod informer holds them (cached).
func TestTargetNode(t *testing.T) {
	bound := &corev1.Pod{
		Spec: corev1.PodSpec{
			NodeName: "b",
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: pinned("a"),
				},
			},
		},
	}
	if n, err := targetNode(cached(t, bound)[0]); err != nil || n != "b" {
		t.Errorf("bound pod: %q, %v", n, err)
	}
	two := pinned("a")
	two.NodeSelectorTerms[0].MatchFields[0].Values = []string{"a", "b"}
	for name, p := range map[string]*corev1.Pod{
		"no affinity": {},
		"two values":  {Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: two}}}},
		"labels only": {Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{expr("zone", corev1.NodeSelectorOpExists)}}}}}},
	} {
		if n, err := targetNode(cached(t, p)[0]); err == nil {
			t.Errorf("%s: node %q, want an error", name, n)
		}
	}
}
