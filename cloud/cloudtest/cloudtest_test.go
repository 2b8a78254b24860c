package cloudtest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/cloud"
	"github.com/ctrlhost/ctrlhost/cloud/cloudtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStateFileDecides: the provider built from a --cloud-config answers
// existence and shutdown from the state file, re-read on every question.
func TestStateFileDecides(t *testing.T) {
	cloudtest.Register()
	cloudtest.Register() // a second call does nothing
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	cfg := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(cfg, []byte("stateFile: "+state+"\nloadBalancerIP: 198.51.100.9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cloudtest.WriteState(state, cloudtest.State{Instances: []string{"fake://a", "fake://b"}, Shutdown: []string{"fake://b"}}); err != nil {
		t.Fatal(err)
	}
	p, err := cloud.NewProvider(cloudtest.ProviderName, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	inst, ok := p.Instances()
	if !ok {
		t.Fatal("no Instances")
	}
	ctx := context.Background()
	check := func(id string, wantExists, wantShutdown bool) {
		t.Helper()
		exists, err := inst.InstanceExistsByProviderID(ctx, id)
		if err != nil || exists != wantExists {
			t.Errorf("exists(%s) = %v, %v; want %v", id, exists, err, wantExists)
		}
		shutdown, err := inst.InstanceShutdownByProviderID(ctx, id)
		if err != nil || shutdown != wantShutdown {
			t.Errorf("shutdown(%s) = %v, %v; want %v", id, shutdown, err, wantShutdown)
		}
	}
	check("fake://a", true, false)
	check("fake://b", true, true)
	check("fake://c", false, false)
	if err := cloudtest.WriteState(state, cloudtest.State{Instances: []string{"fake://c"}}); err != nil {
		t.Fatal(err)
	}
	check("fake://a", false, false)
	check("fake://c", true, false)

	lb, ok := p.LoadBalancer()
	if !ok {
		t.Fatal("no LoadBalancer")
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u"}}
	st, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nil)
	if err != nil || len(st.Ingress) != 1 || st.Ingress[0].IP != "198.51.100.9" {
		t.Errorf("EnsureLoadBalancer = %+v, %v; want ingress 198.51.100.9", st, err)
	}

	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	if _, err := inst.InstanceExistsByProviderID(ctx, "fake://a"); err == nil || !strings.Contains(err.Error(), "state.json") {
		t.Errorf("missing state file: %v, want an error naming it", err)
	}
}

func TestBadConfig(t *testing.T) {
	cloudtest.Register()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"no state file": "loadBalancerIP: 198.51.100.9\n",
		"bad IP":        "stateFile: /x\nloadBalancerIP: nope\n",
		"unknown field": "stateFile: /x\nzone: z\n",
	} {
		cfg := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(cfg, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := cloud.NewProvider(cloudtest.ProviderName, cfg, false); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := cloud.NewProvider(cloudtest.ProviderName, "", false); err == nil || !strings.Contains(err.Error(), "--cloud-config is required") {
		t.Errorf("no config: %v", err)
	}
}
