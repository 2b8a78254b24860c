package selection_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/selection"
)

func noop(context.Context, descriptor.Context) (descriptor.Controller, error) { return nil, nil }

// TestControllersTruthTable checks --controllers against KCM's rule: the
// first entry naming a controller wins, else "*" enables what is not
// disabled by default; aliases resolve to canonical names, keeping "-".
func TestControllersTruthTable(t *testing.T) {
	set, err := descriptor.NewSet(
		descriptor.New("a-controller", noop).WithAliases("a"),
		descriptor.New("b-controller", noop),
		descriptor.New("off-controller", noop).WithAliases("off").DisabledByDefault(),
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		flag []string
		want map[string]bool
	}{
		{
			[]string{"*"},
			map[string]bool{"a-controller": true, "b-controller": true, "off-controller": false},
		},
		{
			[]string{},
			map[string]bool{"a-controller": false, "b-controller": false, "off-controller": false},
		},
		{
			[]string{"b-controller"},
			map[string]bool{"a-controller": false, "b-controller": true, "off-controller": false},
		},
		{
			[]string{"*", "-a-controller"},
			map[string]bool{"a-controller": false, "b-controller": true, "off-controller": false},
		},
		{
			[]string{"-a-controller", "*"},
			map[string]bool{"a-controller": false, "b-controller": true, "off-controller": false},
		},
		{
			[]string{"a-controller", "-a-controller"},
			map[string]bool{"a-controller": true, "b-controller": false, "off-controller": false},
		},
		{
			[]string{"-a-controller", "a-controller"},
			map[string]bool{"a-controller": false, "b-controller": false, "off-controller": false},
		},
		{
			[]string{"*", "off-controller"},
			map[string]bool{"a-controller": true, "b-controller": true, "off-controller": true},
		},
		{
			[]string{"-off", "*", "off"},
			map[string]bool{"a-controller": true, "b-controller": true, "off-controller": false},
		},
		{
			[]string{"*", "-a"},
			map[string]bool{"a-controller": false, "b-controller": true, "off-controller": false},
		},
		{
			[]string{"a"},
			map[string]bool{"a-controller": true, "b-controller": false, "off-controller": false},
		},
		{
			[]string{"off"},
			map[string]bool{"a-controller": false, "b-controller": false, "off-controller": true},
		},
		{
			[]string{"-b-controller"},
			map[string]bool{"a-controller": false, "b-controller": false, "off-controller": false},
		},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.flag, ","), func(t *testing.T) {
			sel, err := selection.Resolve(set.All(), tt.flag)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range set.All() {
				if got := sel.Enabled(d); got != tt.want[d.Name()] {
					t.Errorf("%s: enabled = %v, want %v", d.Name(), got, tt.want[d.Name()])
				}
			}
		})
	}
}

// TestControllersUnknownListsKnown: one error names every unknown entry
// and the known controllers (with aliases) once, and matches
// ErrUnknownController; a single unknown entry reads "is not".
func TestControllersUnknownListsKnown(t *testing.T) {
	set, err := descriptor.NewSet(descriptor.New("a-controller", noop).WithAliases("a"),
		descriptor.New("b-controller", noop))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := selection.Resolve(set.All(), []string{"*", "-nope", "zzz", "a"})
	if !errors.Is(err, selection.ErrUnknownController) {
		t.Fatalf("error %v does not match ErrUnknownController", err)
	}
	if got := sel.Entries(); !slices.Equal(got, []string{"*", "a-controller"}) {
		t.Errorf("Entries = %v, want the known entries, canonical", got)
	}
	want := `--controllers: "nope", "zzz" are not known controllers; ` +
		`known controllers: a-controller, b-controller (aliases: a→a-controller)`
	if err.Error() != want {
		t.Errorf("error:\n%s\nwant:\n%s", err, want)
	}
	_, err = selection.Resolve(set.All(), []string{"nope"})
	want = `--controllers: "nope" is not a known controller; ` +
		`known controllers: a-controller, b-controller (aliases: a→a-controller)`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}
