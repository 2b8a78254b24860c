//go:build integration

package differential_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/legacytokencleaner"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

// legacyFlags is the command line both sides are given. A period of a
// millisecond: the tokens Setup creates are past it by the first pass, and
// "a period before now" is today, so a token used today is in use.
var legacyFlags = []string{"--legacy-service-account-token-clean-up-period=1ms"}

// legacyDescriptors returns a side's descriptors, the cleaner's options
// parsed from legacyFlags as each side's binary would parse them.
func legacyDescriptors(t *testing.T, side differential.Side) []descriptor.Descriptor {
	t.Helper()
	if side == differential.Native {
		o := legacytokencleaner.NewOptions()
		fs := pflag.NewFlagSet("native", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(legacyFlags); err != nil {
			t.Fatal(err)
		}
		return []descriptor.Descriptor{legacytokencleaner.Descriptor(o)}
	}
	o, err := kcm.NewOptions()
	if err != nil {
		t.Fatal(err)
	}
	host := manager.NewOptions()
	hostFS := pflag.NewFlagSet("host", pflag.ContinueOnError)
	host.AddFlags(hostFS)
	var fss cliflag.NamedFlagSets
	o.AddFlags(&fss, hostFS)
	all := pflag.NewFlagSet("upstream", pflag.ContinueOnError)
	for _, fs := range fss.FlagSets {
		all.AddFlagSet(fs)
	}
	if err := all.Parse(legacyFlags); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config(host)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := kcm.Descriptors(kcm.Config{Component: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// legacyTerm runs the cleaner of side in a Manager of its own until the
// state observe returns has been still for two seconds and settled holds,
// and returns that state. The cleaner passes once at start (KCM: once a
// day), so each term is one pass.
func legacyTerm(t *testing.T, e *testenv.Env, side differential.Side,
	observe func(context.Context) ([]map[string]any, error),
	settled func([]map[string]any) bool) []map[string]any {
	t.Helper()
	b := manager.NewBuilder("differential-" + string(side)).WithRESTConfig(e.Config()).
		WithOptions(manager.Options{Controllers: []string{legacytokencleaner.Name},
			Serving: serving.Options{SecurePort: serving.PortDisabled}}).
		Register(legacyDescriptors(t, side)...)
	if side == differential.Upstream {
		b = b.WithFeatureGate(utilfeature.DefaultMutableFeatureGate)
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s manager: %v", side, err)
		}
	}()
	var state []map[string]any
	var last string
	var since time.Time
	poll.Within(2*time.Minute).UntilContext(t, fmt.Sprintf("the %s side to settle", side),
		func(ctx context.Context) (bool, error) {
			select {
			case err := <-done:
				done <- err
				t.Fatalf("the %s manager stopped: %v", side, err)
			default:
			}
			s, err := observe(ctx)
			if err != nil {
				return false, err
			}
			now := fmt.Sprint(s)
			if now != last {
				last, since, state = now, time.Now(), s
				return false, nil
			}
			if time.Since(since) < 2*time.Second || !settled(s) {
				return false, fmt.Errorf("not settled: %v", s)
			}
			return true, nil
		})
	return state
}

// TestLegacyTokenCleaner: over two passes (two terms, as two days), an
// old unused token is marked invalid, then deleted; a token used today,
// one a pod mounts and one its ServiceAccount does not list stay as they
// are; one last used long ago is marked, and not deleted by the next
// pass, the day it was marked.
//
// The cleaner passes over every namespace, so the two sides cannot run
// side by side, nor one side's tokens outlive it: each side runs both its
// terms and cleans up before the other starts. The tracking ConfigMap
// (kube-system) says tracking began in 2020 for the scenario's time, and
// is put back after.
func TestLegacyTokenCleaner(t *testing.T) {
	e := env(t)
	start := time.Now()
	// Dates of the run: a label dated from the start of the run to now is
	// "<today>" (a side running across midnight keeps its place).
	day := func(d time.Time) string { return d.UTC().Format("2006-01-02") }
	today := func(v string) bool { return v >= day(start) && v <= day(time.Now()) }
	tokens := []legacyToken{
		{"unused", nil, true},
		{"used-today", map[string]string{legacytokencleaner.LastUsedLabel: day(start)}, true},
		{"used-long-ago", map[string]string{legacytokencleaner.LastUsedLabel: "2020-06-01"}, true},
		{"mounted", nil, true},
		{"unlisted", nil, false},
	}
	cs := kubernetes.NewForConfigOrDie(e.Config())
	observe := func(ns string) func(context.Context) ([]map[string]any, error) {
		return func(ctx context.Context) ([]map[string]any, error) {
			l, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var objs []runtime.Object
			for i := range l.Items {
				s := &l.Items[i]
				s.Kind = "Secret"
				for k, v := range s.Labels {
					if today(v) {
						s.Labels[k] = "<today>"
					}
				}
				objs = append(objs, s)
			}
			return differential.Normalise(objs, ns, nil), nil
		}
	}
	labelOf := func(state []map[string]any, name, label string) (string, bool) {
		for _, o := range state {
			md, _ := o["metadata"].(map[string]any)
			if md["name"] != name {
				continue
			}
			ls, _ := md["labels"].(map[string]any)
			v, _ := ls[label].(string)
			return v, true
		}
		return "", false
	}
	invalidSince := legacytokencleaner.InvalidSinceLabel
	var states [2][2][]map[string]any // by side, by term
	for i, side := range []differential.Side{differential.Native, differential.Upstream} {
		ctx := t.Context()
		nsObj, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "diff-" + string(side) + "-",
				Labels: map[string]string{"ctrlhost.io/differential": legacytokencleaner.Name}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns := nsObj.Name
		restore := legacySetup(t, cs, ns, tokens)
		states[i][0] = legacyTerm(t, e, side, observe(ns), func(s []map[string]any) bool {
			a, _ := labelOf(s, "unused", invalidSince)
			b, _ := labelOf(s, "used-long-ago", invalidSince)
			return a != "" && b != ""
		})
		// A day later: the token marked in the first pass has been
		// invalid for a period (the one marked today stays as it is).
		sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "unused", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sec.Labels[invalidSince] = day(time.Now().AddDate(0, 0, -1))
		if _, err := cs.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		states[i][1] = legacyTerm(t, e, side, observe(ns), func(s []map[string]any) bool {
			_, found := labelOf(s, "unused", invalidSince)
			return !found
		})
		legacyCleanup(t, cs, ns, restore)
	}
	t.Logf("both sides' two passes settled in %v", time.Since(start).Round(time.Millisecond))
	for term := range 2 {
		r := differential.Result{Native: states[0][term], Upstream: states[1][term]}
		if d := r.Diff(); d != "" {
			t.Errorf("pass %d: native and upstream differ:\n%s", term+1, d)
		}
	}
	// What both agree on is what the scenario is about.
	want := map[string][2]string{ // invalid-since after each pass; "gone": deleted
		"unused": {"<today>", "gone"}, "used-long-ago": {"<today>", "<today>"},
		"used-today": {"", ""}, "mounted": {"", ""}, "unlisted": {"", ""},
	}
	for name, w := range want {
		for term := range 2 {
			got, found := labelOf(states[0][term], name, invalidSince)
			if !found {
				got = "gone"
			}
			if got != w[term] {
				t.Errorf("after pass %d, %s: invalid-since %q, want %q", term+1, name, got, w[term])
			}
		}
	}
}

// legacyToken is a token of the scenario: its labels, and whether its
// ServiceAccount lists it.
type legacyToken struct {
	name   string
	labels map[string]string
	listed bool
}

// legacySetup makes the scenario's objects in ns and dates the tracking
// ConfigMap back to 2020; it returns the date to put back.
func legacySetup(t *testing.T, cs kubernetes.Interface, ns string, tokens []legacyToken) string {
	t.Helper()
	ctx := t.Context()
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx,
		legacytokencleaner.TrackingConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the API server's token-tracking ConfigMap: %v", err)
	}
	was := cm.Data[legacytokencleaner.TrackingConfigMapKey]
	cm.Data[legacytokencleaner.TrackingConfigMapKey] = "2020-01-01"
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Update(ctx, cm,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		AutomountServiceAccountToken: ptr.To(false)}
	for _, tok := range tokens {
		if tok.listed {
			sa.Secrets = append(sa.Secrets, corev1.ObjectReference{Name: tok.name})
		}
	}
	sa, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range tokens {
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: tok.name, Labels: tok.labels,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: sa.Name,
					corev1.ServiceAccountUIDKey: string(sa.UID)}},
			Type: corev1.SecretTypeServiceAccountToken,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := pod("mounts-token", nil)
	p.Spec.ServiceAccountName = sa.Name
	p.Spec.Volumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "mounted"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return was
}

// legacyCleanup deletes what legacySetup made (no namespace controller
// runs to) and puts the tracking ConfigMap's date back.
func legacyCleanup(t *testing.T, cs kubernetes.Interface, ns, since string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	if err := deletePods(ctx, cs, ns); err != nil {
		t.Error(err)
	}
	if err := cs.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{}); err != nil {
		t.Error(err)
	}
	if err := cs.CoreV1().ServiceAccounts(ns).Delete(ctx, "legacy",
		metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx,
		legacytokencleaner.TrackingConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	cm.Data[legacytokencleaner.TrackingConfigMapKey] = since
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Update(ctx, cm,
		metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}
