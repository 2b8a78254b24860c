//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/tainteviction"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// The scenario's taints, tolerations and marks.
const (
	// teDrain is node b's taint, an operator's own.
	teDrain = "differential.ctrlhost.io/drain"
	// teBrief and teKept are the toleration seconds of the pod evicted
	// after a while on node a, and of the pod on node b, whose taint the
	// scenario removes once node a's brief pod has been evicted.
	teBrief = 3
	teKept  = 8
	// teUntainted holds when node b lost its taint; tePassed marks node b
	// once teKept seconds and a margin have passed since then, with its
	// pod still there.
	teUntainted = "differential/untainted-at"
	tePassed    = "differential/toleration-passed"
)

// TestTaintEviction: the test taints node a with
// node.kubernetes.io/unreachable:NoExecute and node b with an operator's
// NoExecute taint. On node a the pod tolerating the taint forever stays,
// the one tolerating it for teBrief seconds is deleted after them, the one
// tolerating it not at all is deleted at once; each deleted pod carries
// the DisruptionTarget condition first. Node b's taint is removed before
// its pod's teKept seconds run out: the deletion is cancelled, and the pod
// is still there after them. The pods (deleted ones stay, terminating:
// there is no kubelet), the nodes and the controller's events compare.
func TestTaintEviction(t *testing.T) {
	unreachable := func(seconds *int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeUnreachable,
			Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			TolerationSeconds: seconds}
	}
	onNode := func(name, node string, tolerations ...corev1.Toleration) *corev1.Pod {
		p := pod(name, nil)
		p.Spec.NodeName = node
		p.Spec.Tolerations = tolerations
		return p
	}
	res := compare(t, differential.Scenario{
		Name:       "taint-eviction evicts, waits, and cancels",
		Controller: tainteviction.Name,
		// KCM's controller finds a node's pods through the informer's
		// spec.nodeName index, which the daemonset and node lifecycle
		// controllers add: alone, it would act on pod events only, and
		// not cancel node b's deletion. The daemonset controller (with
		// no DaemonSet, idle) makes the upstream side KCM as it runs.
		With: []string{"daemonset-controller"},
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, n := range []string{"a", "b"} {
				if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + n,
						Labels: map[string]string{"differential": ns}},
				}, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			for _, p := range []*corev1.Pod{
				onNode("forever", ns+"-a", unreachable(nil)),
				onNode("brief", ns+"-a", unreachable(ptr.To[int64](teBrief))),
				// A toleration of the unreachable key for another value
				// keeps the API server's default one (300s) off, and
				// tolerates nothing.
				onNode("none", ns+"-a", corev1.Toleration{Key: corev1.TaintNodeUnreachable,
					Operator: corev1.TolerationOpEqual, Value: "elsewhere",
					Effect: corev1.TaintEffectNoExecute}),
				onNode("kept", ns+"-b", corev1.Toleration{Key: teDrain,
					Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
					TolerationSeconds: ptr.To[int64](teKept)}),
				// Not bound: left alone.
				onNode("unbound", ""),
			} {
				_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					return err
				}
			}
			return nil
		}),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			return taintEvictionAct(ctx, cs, ns)
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			objs, err := podsIn(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			nodes, err := cs.CoreV1().Nodes().List(ctx,
				metav1.ListOptions{LabelSelector: "differential=" + ns})
			if err != nil {
				return nil, err
			}
			for i := range nodes.Items {
				nodes.Items[i].Kind = "Node"
			}
			objs = append(objs, objects(nodes.Items,
				func(n *corev1.Node) runtime.Object { return n })...)
			events, err := taintEvictionEvents(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			return append(objs, events), nil
		},
		Settled: func(state []map[string]any) bool {
			for _, o := range state {
				md, _ := o["metadata"].(map[string]any)
				a, _ := md["annotations"].(map[string]any)
				if o["kind"] == "Node" && a[tePassed] == "true" {
					return true
				}
			}
			return false
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: "differential=" + ns}); err != nil {
				return err
			}
			return deletePods(ctx, cs, ns)
		},
	})
	checkTaintEviction(t, res.Native)
}

// checkTaintEviction checks the state both sides agreed on: brief and
// none deleted (terminating) with the condition, the others untouched;
// the events of the two deletions and of the cancellation.
func checkTaintEviction(t *testing.T, state []map[string]any) {
	t.Helper()
	deleted := map[string]bool{}
	for _, o := range state {
		switch o["kind"] {
		case "Pod":
			md, _ := o["metadata"].(map[string]any)
			name, _ := md["name"].(string)
			_, terminating := md["deletionGracePeriodSeconds"]
			marked := strings.Contains(fmt.Sprint(o["status"]), tainteviction.ConditionReason)
			if terminating != marked {
				t.Errorf("pod %s: terminating %v, marked %v", name, terminating, marked)
			}
			deleted[name] = terminating
		case "TaintEvictionEvents":
			d, _ := o["data"].(map[string]any)
			want := strings.Join([]string{
				"brief Normal TaintManagerEviction Marking for deletion Pod <ns>/brief",
				"kept Normal TaintManagerEviction Cancelling deletion of Pod <ns>/kept",
				"none Normal TaintManagerEviction Marking for deletion Pod <ns>/none"}, "\n")
			if d["events"] != want {
				t.Errorf("events:\n%s\nwant:\n%s", d["events"], want)
			}
		}
	}
	want := map[string]bool{"forever": false, "brief": true, "none": true, "kept": false,
		"unbound": false}
	if !maps.Equal(deleted, want) {
		t.Errorf("pods deleted %v, want %v", deleted, want)
	}
}

// taintEvictionAct is the test's part: it taints both nodes at once;
// once node a's brief pod is being deleted it removes node b's taint; and
// once teKept seconds and a margin have passed since, it marks node b.
func taintEvictionAct(ctx context.Context, cs kubernetes.Interface, ns string) error {
	nodes := cs.CoreV1().Nodes()
	a, err := nodes.Get(ctx, ns+"-a", metav1.GetOptions{})
	if err != nil {
		return err
	}
	b, err := nodes.Get(ctx, ns+"-b", metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	if !hasTaint(a, corev1.TaintNodeUnreachable) {
		a.Spec.Taints = append(a.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable,
			Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
		if _, err := nodes.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
			return err
		}
		b.Spec.Taints = append(b.Spec.Taints, corev1.Taint{Key: teDrain,
			Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
		_, err := nodes.Update(ctx, b, metav1.UpdateOptions{})
		return err
	}
	switch at := b.Annotations[teUntainted]; {
	case at == "" && hasTaint(b, teDrain):
		brief, err := cs.CoreV1().Pods(ns).Get(ctx, "brief", metav1.GetOptions{})
		if err != nil || brief.DeletionTimestamp == nil {
			return err
		}
		b.Spec.Taints = slices.DeleteFunc(b.Spec.Taints,
			func(t corev1.Taint) bool { return t.Key == teDrain })
		metav1.SetMetaDataAnnotation(&b.ObjectMeta, teUntainted, now.UTC().Format(time.RFC3339))
		_, err = nodes.Update(ctx, b, metav1.UpdateOptions{})
		return err
	case at != "" && b.Annotations[tePassed] == "":
		since, err := time.Parse(time.RFC3339, at)
		if err != nil || time.Since(since) < (teKept+3)*time.Second {
			return err
		}
		metav1.SetMetaDataAnnotation(&b.ObjectMeta, tePassed, "true")
		_, err = nodes.Update(ctx, b, metav1.UpdateOptions{})
		return err
	}
	return nil
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == key && t.Effect == corev1.TaintEffectNoExecute
	})
}

// taintEvictionEvents summarises the controller's events in ns: "<pod>
// <type> <reason> <message>" lines, sorted and de-duplicated, the
// namespace written <ns>, as an object for Observe.
func taintEvictionEvents(ctx context.Context, cs kubernetes.Interface,
	ns string) (runtime.Object, error) {
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range evs.Items {
		if e.Source.Component != tainteviction.Name {
			continue
		}
		lines = append(lines, strings.ReplaceAll(strings.Join([]string{
			e.InvolvedObject.Name, e.Type, e.Reason, e.Message}, " "), ns, "<ns>"))
	}
	slices.Sort(lines)
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "TaintEvictionEvents"},
		ObjectMeta: metav1.ObjectMeta{Name: "events"},
		Data:       map[string]string{"events": strings.Join(slices.Compact(lines), "\n")},
	}, nil
}
