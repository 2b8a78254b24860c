package selection_test

import (
	"context"
	"fmt"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/selection"
)

func Example() {
	nop := func(context.Context, descriptor.Context) (descriptor.Controller, error) { return nil, nil }
	ds := []descriptor.Descriptor{
		descriptor.New("replicaset-controller", nop).WithAliases("replicaset"),
		descriptor.New("podgc-controller", nop),
		descriptor.New("token-cleaner-controller", nop).WithAliases("tokencleaner").DisabledByDefault(),
	}
	// KCM's rule: the first entry naming a controller wins, else "*".
	sel, err := selection.Resolve(ds, []string{"-replicaset", "*", "tokencleaner"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range ds {
		fmt.Println(d.Name(), sel.Enabled(d))
	}
	// Output:
	// replicaset-controller false
	// podgc-controller true
	// token-cleaner-controller true
}
