package descriptor_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

func TestNewSet(t *testing.T) {
	tests := []struct {
		name string
		ds   []descriptor.Descriptor
		// want holds substrings that must each appear in the error; none
		// means NewSet must succeed.
		want []string
		// wantCount is the number of joined errors; 0 means len(want).
		wantCount int
	}{
		{
			name: "valid",
			ds: []descriptor.Descriptor{
				descriptor.New("alpha", noop).WithAliases("a", "alpha-old"),
				descriptor.New("beta.example", noop).
					WithFeatureGates("BetaGate").
					DisabledByDefault(),
				descriptor.New("gamma-1", noop).
					CloudProvider().
					StartFirst().
					WithoutLeaderElection(),
			},
		},
		{
			name: "no descriptors",
		},
		{
			name: "sharded",
			ds: []descriptor.Descriptor{
				descriptor.New("by-ns", noop).Sharded(shard.ByNamespace),
				descriptor.New("by-uid", noop).Sharded(shard.ByUID),
			},
		},
		{
			name: "sharded without leader election",
			ds: []descriptor.Descriptor{
				descriptor.New("a", noop).Sharded(shard.ByNamespace).WithoutLeaderElection(),
			},
			want: []string{`descriptor "a": Sharded and WithoutLeaderElection exclude each other`},
		},
		{
			name: "sharded and start first",
			ds: []descriptor.Descriptor{
				descriptor.New("a", noop).StartFirst().Sharded(shard.ByUID),
			},
			want: []string{`descriptor "a": Sharded and StartFirst exclude each other`},
		},
		{
			name: "when served and start first",
			ds: []descriptor.Descriptor{descriptor.New("a", noop).StartFirst().
				WhenServed(schema.GroupVersionResource{
					Group: "example.com", Version: "v1", Resource: "widgets"})},
			want: []string{`descriptor "a": WhenServed and StartFirst exclude each other`},
		},
		{
			name: "when served without a version",
			ds: []descriptor.Descriptor{descriptor.New("a", noop).
				WhenServed(schema.GroupVersionResource{Group: "example.com", Resource: "widgets"})},
			want: []string{`descriptor "a": WhenServed("example.com/, Resource=widgets"): ` +
				`a resource needs a version`},
		},
		{
			name: "sharded with an unknown keying",
			ds:   []descriptor.Descriptor{descriptor.New("a", noop).Sharded(shard.Keying(7))},
			want: []string{`descriptor "a": Sharded: shard keying 7 is unknown`},
		},
		{
			name: "empty name",
			ds:   []descriptor.Descriptor{descriptor.New("", noop)},
			want: []string{`descriptor #1: name "": must not be empty`},
		},
		{
			name: "uppercase name",
			ds: []descriptor.Descriptor{
				descriptor.New("ok", noop),
				descriptor.New("Deployment", noop),
			},
			want: []string{`descriptor #2: name "Deployment": must be a lowercase DNS-1123 name`},
		},
		{
			name: "name with spaces",
			ds:   []descriptor.Descriptor{descriptor.New("my controller", noop)},
			want: []string{
				`descriptor #1: name "my controller": must be a lowercase DNS-1123 name`,
			},
		},
		{
			name: "name with leading dash",
			ds:   []descriptor.Descriptor{descriptor.New("-x", noop)},
			want: []string{`descriptor #1: name "-x": must be a lowercase DNS-1123 name`},
		},
		{
			name: "nil InitFunc",
			ds:   []descriptor.Descriptor{descriptor.New("a", nil)},
			want: []string{`descriptor "a": InitFunc is nil`},
		},
		{
			name: "duplicate name",
			ds: []descriptor.Descriptor{
				descriptor.New("a", noop),
				descriptor.New("b", noop),
				descriptor.New("a", noop),
			},
			want: []string{`descriptor "a": registered twice`},
		},
		{
			name: "duplicate alias across descriptors",
			ds: []descriptor.Descriptor{
				descriptor.New("a", noop).WithAliases("x"),
				descriptor.New("b", noop).WithAliases("x"),
			},
			want: []string{`descriptor "b": alias "x" is already an alias of "a"`},
		},
		{
			name: "duplicate alias within one descriptor",
			ds:   []descriptor.Descriptor{descriptor.New("a", noop).WithAliases("x", "x")},
			want: []string{`descriptor "a": alias "x" repeated`},
		},
		{
			name: "alias equals a canonical name registered earlier",
			ds: []descriptor.Descriptor{
				descriptor.New("b", noop),
				descriptor.New("a", noop).WithAliases("b"),
			},
			want: []string{
				`descriptor "a": alias "b" is the canonical name of a registered controller`,
			},
		},
		{
			name: "alias equals a canonical name registered later",
			ds: []descriptor.Descriptor{
				descriptor.New("a", noop).WithAliases("b"),
				descriptor.New("b", noop),
			},
			want: []string{
				`descriptor "a": alias "b" is the canonical name of a registered controller`,
			},
		},
		{
			name: "alias equals own name",
			ds:   []descriptor.Descriptor{descriptor.New("a", noop).WithAliases("a")},
			want: []string{
				`descriptor "a": alias "a" is the canonical name of a registered controller`,
			},
		},
		{
			name: "invalid aliases",
			ds: []descriptor.Descriptor{
				descriptor.New("a", noop).WithAliases("Bad", "", "has space"),
			},
			want: []string{
				`descriptor "a": alias "Bad": must be a lowercase DNS-1123 name`,
				`descriptor "a": alias "": must not be empty`,
				`descriptor "a": alias "has space": must be a lowercase DNS-1123 name`,
			},
		},
		{
			name: "empty feature gate",
			ds:   []descriptor.Descriptor{descriptor.New("a", noop).WithFeatureGates("Good", "")},
			want: []string{`descriptor "a": empty feature gate`},
		},
		{
			name: "every problem at once",
			ds: []descriptor.Descriptor{
				descriptor.New("", noop),
				descriptor.New("Upper", noop),
				descriptor.New("sp ace", noop),
				descriptor.New("-lead", noop),
				descriptor.New("nil-init", nil),
				descriptor.New("dup", noop),
				descriptor.New("dup", noop),
				descriptor.New("one", noop).WithAliases("shared", "later", "one", "Bad-Alias"),
				descriptor.New("two", noop).WithAliases("shared").WithFeatureGates(""),
				descriptor.New("later", noop),
			},
			want: []string{
				`descriptor #1: name "": must not be empty`,
				`descriptor #2: name "Upper": must be a lowercase DNS-1123 name`,
				`descriptor #3: name "sp ace": must be a lowercase DNS-1123 name`,
				`descriptor #4: name "-lead": must be a lowercase DNS-1123 name`,
				`descriptor "nil-init": InitFunc is nil`,
				`descriptor "dup": registered twice`,
				`descriptor "one": alias "later" is the canonical name of a registered controller`,
				`descriptor "one": alias "one" is the canonical name of a registered controller`,
				`descriptor "one": alias "Bad-Alias": must be a lowercase DNS-1123 name`,
				`descriptor "two": alias "shared" is already an alias of "one"`,
				`descriptor "two": empty feature gate`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := descriptor.NewSet(tt.ds...)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("NewSet() error = %v, want nil", err)
				}
				if s == nil {
					t.Fatal("NewSet() = nil Set with nil error")
				}
				if got := len(s.All()); got != len(tt.ds) {
					t.Errorf("len(All()) = %d, want %d", got, len(tt.ds))
				}
				return
			}
			if err == nil {
				t.Fatalf("NewSet() error = nil, want one containing %q", tt.want)
			}
			if s != nil {
				t.Errorf("NewSet() returned a Set together with error %v", err)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q; error:\n%s", w, msg)
				}
			}
			wantCount := tt.wantCount
			if wantCount == 0 {
				wantCount = len(tt.want)
			}
			var joined interface{ Unwrap() []error }
			if !errors.As(err, &joined) {
				t.Fatalf("error %T is not a joined error", err)
			}
			if got := len(joined.Unwrap()); got != wantCount {
				t.Errorf("error joins %d problems, want %d; error:\n%s", got, wantCount, msg)
			}
		})
	}
}

func newTestSet(t *testing.T) *descriptor.Set {
	t.Helper()
	s, err := descriptor.NewSet(
		descriptor.New("zeta", noop).WithAliases("z", "zeta-old"),
		descriptor.New("alpha", noop).DisabledByDefault(),
		descriptor.New("mid", noop).WithAliases("m"),
		descriptor.New("beta", noop).DisabledByDefault().WithAliases("b"),
	)
	if err != nil {
		t.Fatalf("NewSet() error = %v", err)
	}
	return s
}

func names(ds []descriptor.Descriptor) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name()
	}
	return out
}

func TestSetAll(t *testing.T) {
	s := newTestSet(t)
	want := []string{"zeta", "alpha", "mid", "beta"}
	all := s.All()
	if got := names(all); !slices.Equal(got, want) {
		t.Fatalf("All() names = %q, want registration order %q", got, want)
	}
	all[0] = descriptor.New("replaced", noop)
	if got := names(s.All()); !slices.Equal(got, want) {
		t.Errorf("All() after modifying an earlier result = %q, want %q", got, want)
	}
}

func TestSetIgnoresLaterChangesToArguments(t *testing.T) {
	ds := []descriptor.Descriptor{descriptor.New("a", noop).WithAliases("x")}
	s, err := descriptor.NewSet(ds...)
	if err != nil {
		t.Fatalf("NewSet() error = %v", err)
	}
	ds[0] = descriptor.New("b", noop)
	if got := names(s.All()); !slices.Equal(got, []string{"a"}) {
		t.Errorf("All() = %q after modifying the argument slice, want [a]", got)
	}
	d, ok := s.Get("x")
	if !ok || d.Name() != "a" {
		t.Errorf(`Get("x") = %q, %v; want "a", true`, d.Name(), ok)
	}
	got := d.Aliases()
	got[0] = "mutated"
	if d, _ := s.Get("a"); !slices.Equal(d.Aliases(), []string{"x"}) {
		t.Errorf("aliases in the set = %q after modifying a getter result, want [x]", d.Aliases())
	}
}

func TestSetGetAndCanonical(t *testing.T) {
	s := newTestSet(t)
	tests := []struct {
		query  string
		want   string
		wantOK bool
	}{
		{"zeta", "zeta", true},
		{"z", "zeta", true},
		{"zeta-old", "zeta", true},
		{"alpha", "alpha", true},
		{"m", "mid", true},
		{"b", "beta", true},
		{"unknown", "", false},
		{"", "", false},
		{"Zeta", "", false},
	}
	for _, tt := range tests {
		t.Run("query="+tt.query, func(t *testing.T) {
			d, ok := s.Get(tt.query)
			if ok != tt.wantOK || d.Name() != tt.want {
				t.Errorf(
					"Get(%q) = %q, %v; want %q, %v",
					tt.query,
					d.Name(),
					ok,
					tt.want,
					tt.wantOK,
				)
			}
			if ok && d.Init() == nil {
				t.Errorf("Get(%q) returned a descriptor without its InitFunc", tt.query)
			}
			c, ok := s.Canonical(tt.query)
			if ok != tt.wantOK || c != tt.want {
				t.Errorf("Canonical(%q) = %q, %v; want %q, %v", tt.query, c, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSetNames(t *testing.T) {
	s := newTestSet(t)
	want := []string{"alpha", "beta", "mid", "zeta"}
	got := s.Names()
	if !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want sorted %q", got, want)
	}
	got[0] = "mutated"
	if got := s.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() after modifying an earlier result = %q, want %q", got, want)
	}
}

func TestSetAliases(t *testing.T) {
	s := newTestSet(t)
	want := map[string]string{"z": "zeta", "zeta-old": "zeta", "m": "mid", "b": "beta"}
	got := s.Aliases()
	if !maps.Equal(got, want) {
		t.Fatalf("Aliases() = %v, want %v", got, want)
	}
	got["z"] = "alpha"
	got["new"] = "mid"
	delete(got, "m")
	if got := s.Aliases(); !maps.Equal(got, want) {
		t.Errorf("Aliases() after modifying an earlier result = %v, want %v", got, want)
	}
	if c, ok := s.Canonical("z"); !ok || c != "zeta" {
		t.Errorf(
			`Canonical("z") = %q, %v after modifying Aliases() result; want "zeta", true`,
			c,
			ok,
		)
	}
}

func TestSetDisabledByDefault(t *testing.T) {
	tests := []struct {
		name string
		ds   []descriptor.Descriptor
		want []string
	}{
		{
			name: "some disabled",
			ds: []descriptor.Descriptor{
				descriptor.New("zz", noop).DisabledByDefault(),
				descriptor.New("on", noop),
				descriptor.New("aa", noop).DisabledByDefault(),
				descriptor.New("mm", noop).DisabledByDefault(),
			},
			want: []string{"aa", "mm", "zz"},
		},
		{
			name: "none disabled",
			ds:   []descriptor.Descriptor{descriptor.New("on", noop)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := descriptor.NewSet(tt.ds...)
			if err != nil {
				t.Fatalf("NewSet() error = %v", err)
			}
			if got := s.DisabledByDefault(); !slices.Equal(got, tt.want) {
				t.Errorf("DisabledByDefault() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestNewSetReportsProblemsOfSkippedDescriptors: a descriptor with a bad or
// duplicate name still has its other problems reported.
func TestNewSetReportsProblemsOfSkippedDescriptors(t *testing.T) {
	_, err := descriptor.NewSet(
		descriptor.New("a", noop),
		descriptor.New("a", nil).WithAliases("Bad").WithFeatureGates(""),
		descriptor.New("Bad-Name", nil).WithAliases("also bad"),
	)
	if err == nil {
		t.Fatal("NewSet succeeded")
	}
	for _, want := range []string{
		`descriptor "a": registered twice`,
		`descriptor "a": InitFunc is nil`,
		`descriptor "a": alias "Bad"`,
		`descriptor "a": empty feature gate`,
		`descriptor #3: name "Bad-Name"`,
		`descriptor #3: InitFunc is nil`,
		`descriptor #3: alias "also bad"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestNewSetRunsValidators(t *testing.T) {
	d := descriptor.New("workers-controller", noop).
		WithValidator(func() error { return errors.New("--concurrent-workers-syncs: must be at least 1, got -1") }).
		WithValidator(func() error { return nil })
	_, err := descriptor.NewSet(d)
	if err == nil ||
		!strings.Contains(
			err.Error(),
			`descriptor "workers-controller": --concurrent-workers-syncs: must be at least 1, got -1`,
		) {
		t.Fatalf("NewSet error = %v", err)
	}
	if _, err := descriptor.NewSet(descriptor.New("ok", noop).WithValidator(nil)); err == nil {
		t.Fatal("a nil validator was accepted")
	}
}
