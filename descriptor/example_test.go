package descriptor_test

import (
	"context"
	"fmt"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

func ExampleNew() {
	d := descriptor.New("endpointslice-mirroring", func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}), nil
	}).
		WithAliases("endpointslicemirroring", "eps-mirroring").
		DisabledByDefault()

	fmt.Println("name:", d.Name())
	fmt.Println("aliases:", d.Aliases())
	fmt.Println("disabled by default:", d.IsDisabledByDefault())
	fmt.Println("cloud provider:", d.IsCloudProvider())
	fmt.Println("start first:", d.IsStartFirst())
	fmt.Println("needs leader election:", d.NeedsLeaderElection())

	s, err := descriptor.NewSet(d)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	name, _ := s.Canonical("eps-mirroring")
	fmt.Println("eps-mirroring is", name)
	// Output:
	// name: endpointslice-mirroring
	// aliases: [endpointslicemirroring eps-mirroring]
	// disabled by default: true
	// cloud provider: false
	// start first: false
	// needs leader election: true
	// eps-mirroring is endpointslice-mirroring
}
