package legacytokencleaner_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/legacytokencleaner"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/shard"
)

func TestDescriptor(t *testing.T) {
	d := legacytokencleaner.Descriptor(legacytokencleaner.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{
		Name:  "legacy-serviceaccount-token-cleaner-controller",
		Alias: "legacy-service-account-token-cleaner"})
	if k, ok := d.IsSharded(); !ok || k != shard.ByNamespace {
		t.Errorf("IsSharded() = %v, %v; want sharded by namespace", k, ok)
	}
	o := legacytokencleaner.NewOptions()
	f := controllertest.ParseFlag(t, o.AddFlags, "legacy-service-account-token-clean-up-period")
	if f.DefValue != "8760h0m0s" {
		t.Errorf("default %q, want KCM's 8760h0m0s (365 days)", f.DefValue)
	}
	controllertest.ParseFlag(t, o.AddFlags, "legacy-service-account-token-clean-up-period",
		"--legacy-service-account-token-clean-up-period=48h")
	o2 := legacytokencleaner.NewOptions()
	fs := controllertest.FlagSet(o2.AddFlags)
	if err := fs.Parse([]string{"--legacy-service-account-token-clean-up-period=48h"}); err != nil {
		t.Fatal(err)
	}
	if o2.CleanUpPeriod != 48*time.Hour {
		t.Errorf("CleanUpPeriod %v after the flag, want 48h", o2.CleanUpPeriod)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*legacytokencleaner.Options)
		wantErr []string
	}{
		{"defaults", func(*legacytokencleaner.Options) {}, nil},
		{"zero interval takes the default", func(o *legacytokencleaner.Options) {
			o.SyncInterval = 0
		}, nil},
		{"zero period, as KCM refuses", func(o *legacytokencleaner.Options) {
			o.CleanUpPeriod = 0
		}, []string{"--legacy-service-account-token-clean-up-period (CleanUpPeriod): " +
			"must be positive, got 0s; the default is 8760h0m0s"}},
		{"negative period and interval", func(o *legacytokencleaner.Options) {
			o.CleanUpPeriod, o.SyncInterval = -time.Hour, -time.Hour
		}, []string{"must be positive, got -1h0m0s",
			"SyncInterval: must not be negative, got -1h0m0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := legacytokencleaner.NewOptions()
			tt.mutate(&o)
			controllertest.CheckBuild(t, legacytokencleaner.Descriptor(o), tt.wantErr...)
		})
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		legacytokencleaner.Descriptor(legacytokencleaner.NewOptions()))
}

// TestManagerCleansTokens: under a Manager, the first pass marks an old
// unused token invalid and deletes one marked invalid for a period; a
// recently used one and one a pod mounts stay. (TestRunWithFakeClock
// follows one token from its mark to its deletion.)
func TestManagerCleansTokens(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o := legacytokencleaner.NewOptions()
	clock := testingclock.NewFakeClock(now)
	o.CleanUpPeriod, o.Clock = 30*24*time.Hour, clock
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sa"}}
	tok := func(name string, labels map[string]string) *corev1.Secret {
		sa.Secrets = append(sa.Secrets, corev1.ObjectReference{Name: name})
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: labels, CreationTimestamp: metav1.NewTime(now.AddDate(-1, 0, 0)),
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "sa"}},
			Type: corev1.SecretTypeServiceAccountToken}
	}
	unused := tok("unused", nil)
	invalid := tok("invalid", map[string]string{
		legacytokencleaner.InvalidSinceLabel: "2025-11-30"})
	used := tok("used", map[string]string{legacytokencleaner.LastUsedLabel: "2026-01-01"})
	mounted := tok("mounted", nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "mounted"}}}}}}
	tracking := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system",
		Name: legacytokencleaner.TrackingConfigMap},
		Data: map[string]string{legacytokencleaner.TrackingConfigMapKey: "2020-01-01"}}
	h := managertest.New(t, "test", []descriptor.Descriptor{legacytokencleaner.Descriptor(o)},
		sa, unused, invalid, used, mounted, pod, tracking).Start()
	get := func(name string) (*corev1.Secret, bool) {
		s, err := h.Client.CoreV1().Secrets("ns").Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return s, true
	}
	controllertest.WaitFor(t, "the unused token marked", func() bool {
		s, _ := get("unused")
		return s != nil && s.Labels[legacytokencleaner.InvalidSinceLabel] == "2026-01-02"
	})
	controllertest.WaitFor(t, "the long invalid token deleted", func() bool {
		_, ok := get("invalid")
		return !ok
	})
	controllertest.WaitFor(t, "the pass over", clock.HasWaiters)
	for _, name := range []string{"used", "mounted"} {
		s, ok := get(name)
		if !ok {
			t.Fatalf("%s deleted", name)
		}
		if _, marked := s.Labels[legacytokencleaner.InvalidSinceLabel]; marked {
			t.Errorf("%s marked invalid", name)
		}
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
