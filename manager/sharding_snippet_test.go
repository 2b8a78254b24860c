package manager_test

import (
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/shard"
)

// docs/sharding.md's snippet, compiled; test/docs keeps the two identical.
//
// snippet:begin
func shardedManager(cfg *rest.Config, initFunc descriptor.InitFunc) (*manager.Manager, error) {
	opts := manager.NewOptions()
	opts.Sharding = shard.Options{Enabled: true} // --enable-sharding; --shard-slots is 16 by default
	return manager.NewBuilder("my-controller-manager").
		WithRESTConfig(cfg).
		WithOptions(opts).
		Register(descriptor.New("my-controller", initFunc).Sharded(shard.ByNamespace)). // or shard.ByUID
		Build()
}

// snippet:end

var _ = shardedManager
