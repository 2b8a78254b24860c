// Package ordie adapts a descriptor.ClientBuilder to the builder
// interfaces of k8s.io/controller-manager and k8s.io/cloud-provider, for the
// upstream and cloud modules' adapters only: a controller written for
// ctrlhost uses descriptor.ClientBuilder, whose methods return errors.
//
// Guarantee: the …OrDie methods never end the process; they panic with the
// client's name, and the host recovers a panic in an InitFunc or Run and
// fails that controller. Non-guarantee: a panic in a goroutine the upstream
// code starts itself is outside the host's reach.
package ordie

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Builder adds the …OrDie methods upstream's builder interfaces require,
// panicking where they would end the process.
type Builder struct{ descriptor.ClientBuilder }

// ConfigOrDie is Config, panicking on an error.
func (b Builder) ConfigOrDie(name string) *rest.Config {
	cfg, err := b.Config(name)
	if err != nil {
		panic(fmt.Errorf("client config for %q: %w", name, err))
	}
	return cfg
}

// ClientOrDie is Client, panicking on an error.
func (b Builder) ClientOrDie(name string) kubernetes.Interface {
	cs, err := b.Client(name)
	if err != nil {
		panic(fmt.Errorf("client for %q: %w", name, err))
	}
	return cs
}
