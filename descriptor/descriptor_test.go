package descriptor_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// noop is an InitFunc that chooses not to start a controller.
func noop(context.Context, descriptor.Context) (descriptor.Controller, error) { return nil, nil }

func gatesToStrings(gs []featuregate.Feature) []string {
	if gs == nil {
		return nil
	}
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = string(g)
	}
	return out
}

// sliceField is one of the Descriptor's slice-valued properties, seen as
// strings so that aliases and feature gates share one table.
type sliceField struct {
	name string
	with func(d descriptor.Descriptor, vs ...string) descriptor.Descriptor
	get  func(d descriptor.Descriptor) []string
	// mutateGot modifies the slice the getter returned, as a careless caller would.
	mutateGot func(d descriptor.Descriptor)
}

var sliceFields = []sliceField{
	{
		name: "aliases",
		with: func(d descriptor.Descriptor, vs ...string) descriptor.Descriptor { return d.WithAliases(vs...) },
		get:  func(d descriptor.Descriptor) []string { return d.Aliases() },
		mutateGot: func(d descriptor.Descriptor) {
			got := d.Aliases()
			for i := range got {
				got[i] = "mutated"
			}
			_ = append(got, "appended")
		},
	},
	{
		name: "feature gates",
		with: func(d descriptor.Descriptor, vs ...string) descriptor.Descriptor {
			gs := make([]featuregate.Feature, len(vs))
			for i, v := range vs {
				gs[i] = featuregate.Feature(v)
			}
			return d.WithFeatureGates(gs...)
		},
		get: func(d descriptor.Descriptor) []string { return gatesToStrings(d.FeatureGates()) },
		mutateGot: func(d descriptor.Descriptor) {
			got := d.FeatureGates()
			for i := range got {
				got[i] = "Mutated"
			}
			_ = append(got, "Appended")
		},
	},
}

func TestWithSliceReturnsCopy(t *testing.T) {
	for _, f := range sliceFields {
		t.Run(f.name, func(t *testing.T) {
			base := f.with(descriptor.New("base", noop), "one", "two")

			t.Run("receiver unchanged", func(t *testing.T) {
				derived := f.with(base, "three")
				if got, want := f.get(base), []string{"one", "two"}; !slices.Equal(got, want) {
					t.Errorf("base after With: %q, want %q", got, want)
				}
				if got, want := f.get(derived), []string{"one", "two", "three"}; !slices.Equal(
					got,
					want,
				) {
					t.Errorf("derived: %q, want %q", got, want)
				}
			})

			t.Run("siblings do not share a backing array", func(t *testing.T) {
				// Two copies appended from the same base must not overwrite
				// each other, whatever spare capacity the base has.
				for _, b := range []descriptor.Descriptor{base, f.with(base), f.with(f.with(base, "x"))} {
					want := f.get(b)
					a := f.with(b, "left")
					c := f.with(b, "right")
					if got := f.get(a); !slices.Equal(got, append(slices.Clone(want), "left")) {
						t.Errorf("left sibling: %q, want %q + left", got, want)
					}
					if got := f.get(c); !slices.Equal(got, append(slices.Clone(want), "right")) {
						t.Errorf("right sibling: %q, want %q + right", got, want)
					}
					if got := f.get(b); !slices.Equal(got, want) {
						t.Errorf("base after siblings: %q, want %q", got, want)
					}
				}
			})

			t.Run("caller's slice not retained", func(t *testing.T) {
				in := []string{"p", "q"}
				d := f.with(descriptor.New("d", noop), in...)
				in[0] = "changed"
				if got, want := f.get(d), []string{"p", "q"}; !slices.Equal(got, want) {
					t.Errorf("after modifying the argument: %q, want %q", got, want)
				}
			})

			t.Run("getter returns a copy", func(t *testing.T) {
				f.mutateGot(base)
				if got, want := f.get(base), []string{"one", "two"}; !slices.Equal(got, want) {
					t.Errorf("after modifying the getter's result: %q, want %q", got, want)
				}
			})

			t.Run("no values", func(t *testing.T) {
				if got := f.get(descriptor.New("d", noop)); len(got) != 0 {
					t.Errorf("new descriptor: %q, want none", got)
				}
			})
		})
	}
}

func TestFlagsReturnCopy(t *testing.T) {
	type flags struct{ cloud, disabled, first, leader bool }
	read := func(d descriptor.Descriptor) flags {
		return flags{
			d.IsCloudProvider(),
			d.IsDisabledByDefault(),
			d.IsStartFirst(),
			d.NeedsLeaderElection(),
		}
	}
	defaults := flags{leader: true}

	tests := []struct {
		name  string
		apply func(descriptor.Descriptor) descriptor.Descriptor
		want  flags
	}{
		{"CloudProvider", descriptor.Descriptor.CloudProvider, flags{cloud: true, leader: true}},
		{
			"DisabledByDefault",
			descriptor.Descriptor.DisabledByDefault,
			flags{disabled: true, leader: true},
		},
		{"StartFirst", descriptor.Descriptor.StartFirst, flags{first: true, leader: true}},
		{"WithoutLeaderElection", descriptor.Descriptor.WithoutLeaderElection, flags{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := descriptor.New("base", noop).WithAliases("b")
			got := tt.apply(base)
			if r := read(got); r != tt.want {
				t.Errorf("flags of copy = %+v, want %+v", r, tt.want)
			}
			if r := read(base); r != defaults {
				t.Errorf("flags of receiver = %+v, want defaults %+v", r, defaults)
			}
			if got.Name() != "base" || !slices.Equal(got.Aliases(), []string{"b"}) {
				t.Errorf("copy lost other fields: name %q aliases %q", got.Name(), got.Aliases())
			}
		})
	}
}

func TestNewKeepsNameAndInit(t *testing.T) {
	errInit := errors.New("init called")
	d := descriptor.New(
		"x",
		func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return nil, errInit
		},
	)
	if d.Name() != "x" {
		t.Errorf("Name() = %q, want x", d.Name())
	}
	if d.Init() == nil {
		t.Fatal("Init() = nil")
	}
	if _, err := d.Init()(context.Background(), descriptor.Context{}); !errors.Is(err, errInit) {
		t.Errorf("Init()(...) error = %v, want %v", err, errInit)
	}
	if descriptor.New("y", nil).Init() != nil {
		t.Error("Init() of New(name, nil) is not nil")
	}
	var zero descriptor.Descriptor
	if zero.Name() != "" || zero.Init() != nil || !zero.NeedsLeaderElection() {
		t.Errorf(
			"zero Descriptor: name %q, init nil %v, needs leader election %v",
			zero.Name(),
			zero.Init() == nil,
			zero.NeedsLeaderElection(),
		)
	}
}

func TestControllerFunc(t *testing.T) {
	type key struct{}
	errRun := errors.New("run failed")
	tests := []struct {
		name    string
		ret     error
		wantErr error
	}{
		{"nil error", nil, nil},
		{"error passed through", errRun, errRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.WithValue(context.Background(), key{}, "v")
			var calls int
			var c descriptor.Controller = descriptor.ControllerFunc(func(got context.Context) error {
				calls++
				if got.Value(key{}) != "v" {
					t.Error("Run did not pass its context to the function")
				}
				return tt.ret
			})
			if err := c.Run(ctx); !errors.Is(err, tt.wantErr) {
				t.Errorf("Run() = %v, want %v", err, tt.wantErr)
			}
			if calls != 1 {
				t.Errorf("function called %d times, want 1", calls)
			}
		})
	}
}

func TestWithIndexers(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	byName := func(any) ([]string, error) { return []string{"n"}, nil }
	byNode := func(any) ([]string, error) { return []string{"x"}, nil }

	base := descriptor.New("d", noop).WithInformers(pods)
	one := base.WithIndexers(pods, cache.Indexers{"by-name": byName})
	two := one.WithIndexers(pods, cache.Indexers{"by-node": byNode}).
		WithIndexers(nodes, cache.Indexers{"by-name": byName})

	names := func(ix cache.Indexers) []string { return slices.Sorted(maps.Keys(ix)) }
	for _, tc := range []struct {
		name      string
		d         descriptor.Descriptor
		gvr       schema.GroupVersionResource
		indexes   []string
		informers []schema.GroupVersionResource
	}{
		{"receiver untouched", base, pods, nil, []schema.GroupVersionResource{pods}},
		{"one index", one, pods, []string{"by-name"}, []schema.GroupVersionResource{pods}},
		{"indexes add up per resource", two, pods, []string{"by-name", "by-node"}, []schema.GroupVersionResource{pods, nodes}},
		{"and the earlier copy keeps its own", one, nodes, nil, []schema.GroupVersionResource{pods}},
		{"a second resource, declared as an informer once", two, nodes, []string{"by-name"}, []schema.GroupVersionResource{pods, nodes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(tc.d.Indexers(tc.gvr)); !slices.Equal(got, tc.indexes) {
				t.Errorf("Indexers(%s) = %q, want %q", tc.gvr.Resource, got, tc.indexes)
			}
			if got := tc.d.Informers(); !slices.Equal(got, tc.informers) {
				t.Errorf("Informers() = %v, want %v", got, tc.informers)
			}
		})
	}
	// The map handed out is a copy.
	two.Indexers(pods)["by-name"] = nil
	if two.Indexers(pods)["by-name"] == nil {
		t.Error("Indexers returned the descriptor's own map")
	}
}

// TestEventSource: a descriptor's events name its canonical name unless
// WithEventSource declared another, on a copy that leaves the original be.
func TestEventSource(t *testing.T) {
	d := descriptor.New("endpoints-controller", nil)
	e := d.WithEventSource("endpoint-controller")
	if d.EventSource() != "endpoints-controller" {
		t.Errorf("default source %q, want the name", d.EventSource())
	}
	if e.EventSource() != "endpoint-controller" {
		t.Errorf("declared source %q, want endpoint-controller", e.EventSource())
	}
}
