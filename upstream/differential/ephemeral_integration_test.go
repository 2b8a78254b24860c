//go:build integration

package differential_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// ephemeralEvents is the namespace's events as one object: each distinct
// "source type reason: message" once, sorted, the namespace written
// "<ns>" (it appears inside the messages). How often an event was
// recorded depends on retry timing, and is left out.
func ephemeralEvents(ctx context.Context, cs kubernetes.Interface,
	ns string) (runtime.Object, error) {
	l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range l.Items {
		line := e.Source.Component + " " + e.Type + " " + e.InvolvedObject.Kind + "/" +
			e.InvolvedObject.Name + " " + e.Reason + ": " +
			strings.ReplaceAll(e.Message, ns, "<ns>")
		if !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	slices.Sort(lines)
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "Events"},
		ObjectMeta: metav1.ObjectMeta{Name: "events"},
		Data:       map[string]string{"events": strings.Join(lines, "\n")}}, nil
}

// TestEphemeralVolume: a pod's generic ephemeral volumes get their claims
// (the template's labels, annotations and spec, controlled by the pod); a
// pod whose volume's claim name is taken by a claim it does not control
// gets a FailedBinding warning, and that claim is left alone.
func TestEphemeralVolume(t *testing.T) {
	withTemplate := func(v corev1.Volume, label string) corev1.Volume {
		tmpl := v.Ephemeral.VolumeClaimTemplate
		tmpl.Labels = map[string]string{"app": label}
		tmpl.Annotations = map[string]string{"differential/template": label}
		tmpl.Spec.StorageClassName = ptr.To("none")
		return v
	}
	compare(t, differential.Scenario{
		Name:       "ephemeral-volume creates claims and warns on a taken name",
		Controller: "ephemeral-volume-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			// The taken name: a claim of its own, before its pod.
			taken := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "clash-scratch",
					Labels: map[string]string{"app": "other"}},
				Spec: pvcClaimSpec()}
			if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, taken,
				metav1.CreateOptions{}); err != nil {
				return err
			}
			for _, p := range []*corev1.Pod{
				pvcPod("web", "", withTemplate(pvcEphemeralVolume("scratch"), "web"),
					withTemplate(pvcEphemeralVolume("cache"), "web-cache"),
					pvcClaimVolume("shared")),
				pvcPod("clash", "node-x", withTemplate(pvcEphemeralVolume("scratch"), "clash")),
				pvcPod("plain", "", pvcClaimVolume("shared")),
			} {
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, p,
					metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		}),
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			l, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "PersistentVolumeClaim"
			}
			objs := objects(l.Items,
				func(c *corev1.PersistentVolumeClaim) runtime.Object { return c })
			ev, err := ephemeralEvents(ctx, cs, ns)
			return append(objs, ev), err
		},
		// web's two claims and the taken one, and the warning.
		Settled: func(state []map[string]any) bool {
			if count(state, "PersistentVolumeClaim") != 3 {
				return false
			}
			for _, o := range state {
				d, _ := o["data"].(map[string]any)
				if s, _ := d["events"].(string); o["kind"] == "Events" &&
					strings.Contains(s, "FailedBinding") {
					return true
				}
			}
			return false
		},
		Cleanup: deletePods,
	})
}
