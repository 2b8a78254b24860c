//go:build integration

package main

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/testenv"
)

var shared testenv.Shared

// sharedEnv starts one etcd + kube-apiserver for the package.
func sharedEnv(t testing.TB) *testenv.Env {
	t.Helper()
	return shared.Get(t)
}

func stopShared() error { return shared.Stop() }

// namespace creates a namespace for one test.
func namespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "dropin-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// commandLine is the drop-in's command line against env, without serving.
func commandLine(t testing.TB, env *testenv.Env) []string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--secure-port=0",
	}
}
