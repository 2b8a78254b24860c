package manager_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

// TestTwoManagersOnOneCommandLine: the process-wide flags once, each
// Manager's own under its prefix, on one flag set (two AddFlags on one set
// panic; pflag's AddFlagSet drops the second set's flags in silence).
func TestTwoManagersOnOneCommandLine(t *testing.T) {
	proc, kcm, ccm := manager.NewOptions(), manager.NewOptions(), manager.NewOptions()
	fs := pflag.NewFlagSet("pair", pflag.ContinueOnError)
	proc.AddProcessFlags(fs)
	kcm.AddManagerFlags(fs, "")
	ccm.AddManagerFlags(fs, "ccm-")
	err := fs.Parse([]string{"--kubeconfig=/etc/k.conf", "--kube-api-qps=50", "-v=3",
		"--feature-gates=A=true", "--controllers=a,b", "--ccm-controllers=c",
		"--ccm-secure-port=10258", "--ccm-leader-elect-resource-name=ccm"})
	if err != nil {
		t.Fatal(err)
	}
	absents := []string{"ccm-kubeconfig", "ccm-feature-gates", "ccm-v", "ccm-kube-api-qps"}
	for _, absent := range absents {
		if fs.Lookup(absent) != nil {
			t.Errorf("--%s: a process-wide flag copied per Manager", absent)
		}
	}
	kcm.ShareProcess(proc)
	ccm.ShareProcess(proc)
	for name, o := range map[string]manager.Options{"kcm": kcm, "ccm": ccm} {
		if o.Kubeconfig != "/etc/k.conf" || o.KubeAPIQPS != 50 || o.Logging.Verbosity != 3 ||
			!o.FeatureGates["A"] {
			t.Errorf("%s: process-wide settings not shared: %+v", name, o)
		}
	}
	if !slices.Equal(kcm.Controllers, []string{"a", "b"}) ||
		!slices.Equal(ccm.Controllers, []string{"c"}) {
		t.Errorf("--controllers: kcm %v, ccm %v", kcm.Controllers, ccm.Controllers)
	}
	if ccm.Serving.SecurePort != 10258 || kcm.Serving.SecurePort == 10258 ||
		ccm.LeaderElection.Name != "ccm" || kcm.LeaderElection.Name == "ccm" {
		t.Errorf("per-Manager flags mixed up: kcm port %d lease %q, ccm port %d lease %q",
			kcm.Serving.SecurePort, kcm.LeaderElection.Name,
			ccm.Serving.SecurePort, ccm.LeaderElection.Name)
	}
}

// TestRunAllStopsTogether: when one Manager's controller fails, RunAll
// stops the other and returns the failure.
func TestRunAllStopsTogether(t *testing.T) {
	failing := errors.New("out of marbles")
	build := func(component string, run func(context.Context) error) *manager.Manager {
		cs := fake.NewClientset()
		init := func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(run), nil
		}
		opts := manager.Options{Serving: serving.Options{SecurePort: serving.PortDisabled}}
		m, err := manager.NewBuilder(component).
			WithClient(cs, metadatafake.NewSimpleMetadataClient(runtime.NewScheme())).
			WithOptions(opts).Register(descriptor.New("x-controller", init)).Build()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	started, stopped := make(chan struct{}), make(chan struct{})
	steady := build("steady", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		close(stopped)
		return nil
	})
	broken := build("broken", func(context.Context) error { return failing })
	done := make(chan error, 1)
	go func() { done <- manager.RunAll(t.Context(), steady, broken) }()
	select {
	case err := <-done:
		if !errors.Is(err, failing) || !errors.Is(err, manager.ErrControllerFailed) {
			t.Errorf("RunAll = %v, want broken's failure", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunAll did not return within 30s of a Manager's failure")
	}
	// steady's term may have been stopped before it built its controller;
	// one that started must have stopped.
	select {
	case <-started:
		select {
		case <-stopped:
		default:
			t.Error("RunAll returned while steady's controller had not stopped")
		}
	default:
	}
}

// TestRunAllNamesTheFailingManager: RunAll's error says which Manager
// failed, as `manager "broken": ...`, and still unwraps to the failure.
func TestRunAllNamesTheFailingManager(t *testing.T) {
	failing := errors.New("out of marbles")
	build := func(component string, run func(context.Context) error) *manager.Manager {
		init := func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(run), nil
		}
		opts := manager.Options{Serving: serving.Options{SecurePort: serving.PortDisabled}}
		meta := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
		m, err := manager.NewBuilder(component).WithLogger(logr.Discard()).
			WithClient(fake.NewClientset(), meta).
			WithOptions(opts).Register(descriptor.New("x-controller", init)).Build()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	steady := build("steady", func(ctx context.Context) error { <-ctx.Done(); return nil })
	broken := build("broken", func(context.Context) error { return failing })
	err := manager.RunAll(t.Context(), steady, broken)
	if err == nil || !strings.HasPrefix(err.Error(), `manager "broken": `) {
		t.Errorf("RunAll = %v, want an error that starts with manager \"broken\"", err)
	}
	if strings.Contains(fmt.Sprint(err), `"steady"`) {
		t.Errorf("RunAll = %v: steady stopped because broken did, and reports nothing", err)
	}
	if !errors.Is(err, failing) || !errors.Is(err, manager.ErrControllerFailed) {
		t.Errorf("RunAll = %v: the failure no longer unwraps", err)
	}
}
