//go:build integration

package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestRestartAPIServer restarts kube-apiserver and checks that it comes back
// as a new process on the same URL, that a client made before the restart
// still works, and that data written before it survived (same etcd).
func TestRestartAPIServer(t *testing.T) {
	ctx := context.Background()
	e, err := Start(ctx, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	client, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	url, pid := e.APIServerURL(), e.APIServerPID()

	if err := e.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.APIServerURL(); got != url {
		t.Errorf("URL after restart = %s, want %s", got, url)
	}
	if got := e.APIServerPID(); got == pid {
		t.Errorf("kube-apiserver pid %d did not change", got)
	}
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{}); err != nil {
		t.Errorf("reading data written before the restart: %v", err)
	}
}
