// Package controllertest holds the checks and fixtures that the tests of the
// built-in controllers share. It is for tests only: import it from _test.go
// files, never from a controller.
package controllertest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
	ctrlinformers "github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// Identity is what a built-in controller's descriptor says about itself, as
// kube-controller-manager has it.
type Identity struct {
	Name              string
	Alias             string // the only one; "" when KCM gives none
	DisabledByDefault bool
	// EventSource is the source component of KCM's events ("": the name).
	EventSource string
}

// CheckIdentity checks d's name, aliases, default and event source
// against want.
func CheckIdentity(t *testing.T, d descriptor.Descriptor, want Identity) {
	t.Helper()
	if d.Name() != want.Name {
		t.Errorf("name %q, want %q", d.Name(), want.Name)
	}
	switch a := d.Aliases(); {
	case want.Alias == "" && len(a) != 0:
		t.Errorf("aliases %q, want none (KCM gives none)", a)
	case want.Alias != "" && (len(a) != 1 || a[0] != want.Alias):
		t.Errorf("aliases %q, want [%s]", a, want.Alias)
	}
	switch disabled := d.IsDisabledByDefault(); {
	case disabled && !want.DisabledByDefault:
		t.Error("disabled by default; KCM enables it")
	case !disabled && want.DisabledByDefault:
		t.Error("enabled by default; KCM disables it")
	}
	src := want.EventSource
	if src == "" {
		src = want.Name
	}
	if d.EventSource() != src {
		t.Errorf("event source %q, want KCM's %q", d.EventSource(), src)
	}
}

// BuildError registers d with a manager.Builder over an empty fake clientset
// and returns Build's error: the options' validation.
func BuildError(t testing.TB, d descriptor.Descriptor) error {
	t.Helper()
	_, err := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).Register(d).Build()
	return err
}

// CheckBuild checks BuildError(t, d): nil when wantErr is empty, otherwise
// an error containing every wantErr.
func CheckBuild(t *testing.T, d descriptor.Descriptor, wantErr ...string) {
	t.Helper()
	err := BuildError(t, d)
	if len(wantErr) == 0 {
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatal("Build succeeded")
	}
	for _, w := range wantErr {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

// FlagSet returns a flag set that, like the host's, returns parse errors,
// with the flags add (an Options.AddFlags) registers.
func FlagSet(add func(*pflag.FlagSet)) *pflag.FlagSet {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	add(fs)
	return fs
}

// ParseFlag registers add's flags in a FlagSet, fails the test unless name
// is among them, parses args and returns the flag. Its DefValue is the value
// it had when registered.
func ParseFlag(t *testing.T, add func(*pflag.FlagSet), name string, args ...string) *pflag.Flag {
	t.Helper()
	fs := FlagSet(add)
	f := fs.Lookup(name)
	if f == nil {
		t.Fatalf("--%s not registered", name)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// clientBuilder hands out one clientset under every name, and cfg (a copy)
// as the REST config when it is set.
type clientBuilder struct {
	cs    kubernetes.Interface
	cfg   *rest.Config
	names *askedNames // nil: not recorded
}

func (c clientBuilder) Config(name string) (*rest.Config, error) {
	c.asked(name)
	if c.cfg == nil {
		return nil, errors.New("no config")
	}
	return rest.CopyConfig(c.cfg), nil
}

func (c clientBuilder) Client(name string) (kubernetes.Interface, error) {
	c.asked(name)
	return c.cs, nil
}

func (c clientBuilder) MetadataClient(name string) (metadata.Interface, error) {
	c.asked(name)
	return nil, errors.New("no metadata client")
}

func (c clientBuilder) DynamicClient(name string) (dynamic.Interface, error) {
	c.asked(name)
	return nil, errors.New("no dynamic client")
}

// asked records a name the controller asked for, when c records them.
func (c clientBuilder) asked(name string) {
	if c.names != nil {
		c.names.mu.Lock()
		defer c.names.mu.Unlock()
		c.names.seen[name] = true
	}
}

// askedNames are the client names a controller asked a builder for.
type askedNames struct {
	mu   sync.Mutex
	seen map[string]bool
}

// ClientBuilder returns a descriptor.ClientBuilder whose Client is cs, whose
// Config is a copy of cfg (an error when cfg is nil, as for a host built over
// ready-made clients) and that has no metadata client.
func ClientBuilder(cs kubernetes.Interface, cfg *rest.Config) descriptor.ClientBuilder {
	return clientBuilder{cs: cs, cfg: cfg}
}

// Init calls d's InitFunc with what a host passes, over an empty fake
// clientset: a ClientBuilder and RootClientBuilder handing out that
// clientset and a metadata client over it (managertest.NewMetadataClient),
// cfg as the REST config (see ClientBuilder), the typed, metadata and
// object-or-metadata informer factories of one informers.Set, a REST
// mapper of the core group, an InformersStarted that is never closed (the
// informers never start) and an event recorder that drops what it is
// given.
func Init(t testing.TB, d descriptor.Descriptor, cfg *rest.Config) (descriptor.Controller, error) {
	t.Helper()
	return initRecording(t, d, cfg, nil)
}

// ClientNames calls d's InitFunc as Init does and returns the names it
// asked the ClientBuilder and RootClientBuilder for (clients, REST configs,
// metadata and dynamic clients), sorted, and the InitFunc's error. A
// controller it built is run with a cancelled context, so that it releases
// what its InitFunc acquired.
func ClientNames(t testing.TB, d descriptor.Descriptor, cfg *rest.Config) ([]string, error) {
	t.Helper()
	names := &askedNames{seen: map[string]bool{}}
	c, err := initRecording(t, d, cfg, names)
	if c != nil {
		RunCancelled(t, c)
	}
	names.mu.Lock()
	defer names.mu.Unlock()
	return slices.Sorted(maps.Keys(names.seen)), err
}

func initRecording(t testing.TB, d descriptor.Descriptor, cfg *rest.Config,
	names *askedNames) (descriptor.Controller, error) {
	t.Helper()
	cs := fake.NewClientset()
	b := withMetadata{clientBuilder{cs: cs, cfg: cfg, names: names}, managertest.NewMetadataClient(cs)}
	set := ctrlinformers.New(cs, b.md, ctrlinformers.Options{})
	return d.Init()(t.Context(), descriptor.Context{
		Name: d.Name(), ClientBuilder: b, RootClientBuilder: b,
		InformerFactory: set.Typed(), MetadataInformerFactory: set.Metadata(),
		ObjectOrMetadataInformerFactory: set,
		RESTMapper: resettable{
			meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion}),
		},
		InformersStarted: make(chan struct{}),
		ResyncPeriod:     func() time.Duration { return 12 * time.Hour },
		FeatureGate:      featuregate.NewFeatureGate(),
		EventRecorder:    &record.FakeRecorder{},
	})
}

// withMetadata is a clientBuilder with a metadata client.
type withMetadata struct {
	clientBuilder
	md metadata.Interface
}

func (w withMetadata) MetadataClient(name string) (metadata.Interface, error) {
	w.asked(name)
	return w.md, nil
}

// resettable is a fixed mapper whose Reset does nothing.
type resettable struct{ meta.RESTMapper }

func (resettable) Reset() {}

// RunCancelled runs c with an already-cancelled context and fails the test
// if Run returns an error. The host does that when the term ends before the
// controller starts; Run must then release what the InitFunc acquired.
func RunCancelled(t testing.TB, c descriptor.Controller) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// CheckRunWithCancelledContext checks that d's InitFunc returns a controller
// (over fake clients, see Init) and that its Run returns and releases the
// queue (its goroutines) even when the term ended before it started.
func CheckRunWithCancelledContext(t *testing.T, d descriptor.Descriptor) {
	t.Helper()
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c, err := Init(t, d, nil)
	if err != nil || c == nil {
		t.Fatalf("Init = %v, %v", c, err)
	}
	RunCancelled(t, c)
}

// WaitFor polls cond every 10ms for up to 30s (poll.Until), and fails the
// test, naming what it waited for, when the time is up.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, cond)
}
