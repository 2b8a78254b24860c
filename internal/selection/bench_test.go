package selection_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/selection"
)

// BenchmarkResolve100 resolves a KCM-like --controllers value over 100
// descriptors with aliases, a tenth of them disabled by default.
func BenchmarkResolve100(b *testing.B) {
	nop := func(context.Context, descriptor.Context) (descriptor.Controller, error) { return nil, nil }
	var ds []descriptor.Descriptor
	for i := range 100 {
		d := descriptor.New(fmt.Sprintf("c%d-controller", i), nop).WithAliases(fmt.Sprintf("c%d", i))
		if i%10 == 0 {
			d = d.DisabledByDefault()
		}
		ds = append(ds, d)
	}
	entries := []string{"*", "c10", "-c3", "c20-controller", "-c99-controller", "c30"}
	b.ReportAllocs()
	for b.Loop() {
		sel, err := selection.Resolve(ds, entries)
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range ds {
			sel.Enabled(d)
		}
	}
}
