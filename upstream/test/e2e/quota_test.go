//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestResourceQuotaUsage: the quota controller fills status.used for
// count/configmaps and pods — first from what the namespace already holds
// (the root CA ConfigMap), then after creations, and again after deletions,
// which the API server's admission does not account for.
func TestResourceQuotaUsage(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	const configMaps, pods = corev1.ResourceName("count/configmaps"), corev1.ResourcePods
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "quota"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			configMaps: resource.MustParse("10"),
			pods:       resource.MustParse("5"),
		}},
	}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kube-root-ca.crt is there already (setup waited for it).
	used(t, cs, ns, map[corev1.ResourceName]int64{configMaps: 1, pods: 0})

	configMap(t, cs, ns, "one", nil)
	configMap(t, cs, ns, "two", nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: podTemplate(nil, corev1.RestartPolicyAlways).Spec}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	used(t, cs, ns, map[corev1.ResourceName]int64{configMaps: 3, pods: 1})

	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	used(t, cs, ns, map[corev1.ResourceName]int64{configMaps: 2, pods: 0})
}

// used waits until the quota's status states the hard limits of its spec
// and exactly want as used.
func used(t *testing.T, cs kubernetes.Interface, ns string, want map[corev1.ResourceName]int64) {
	t.Helper()
	eventually(t, waitTimeout, fmt.Sprintf("quota usage %v", want), func(ctx context.Context) error {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for name, hard := range q.Spec.Hard {
			if got := q.Status.Hard[name]; got.Cmp(hard) != 0 {
				return fmt.Errorf("status.hard[%s] = %s, want %s", name, got.String(), hard.String())
			}
		}
		if len(q.Status.Used) != len(want) {
			return fmt.Errorf("status.used %v, want %v", q.Status.Used, want)
		}
		for name, n := range want {
			got, ok := q.Status.Used[name]
			if !ok || got.Value() != n {
				return fmt.Errorf("status.used %v, want %v", q.Status.Used, want)
			}
		}
		return nil
	})
}
