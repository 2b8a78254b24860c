package deployment_test

import (
	"testing"

	"github.com/ctrlhost/ctrlhost/controllers/deployment"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/shard"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		deployment.Descriptor(deployment.NewOptions()),
		controllertest.Identity{
			Name: "deployment-controller", Alias: "deployment",
		},
	)
	o := deployment.NewOptions()
	f := controllertest.ParseFlag(
		t,
		o.AddFlags,
		"concurrent-deployment-syncs",
		"--concurrent-deployment-syncs=9",
	)
	if f.DefValue != "5" ||
		f.Usage != "The number of deployment objects that are allowed to sync concurrently. Larger number = more responsive deployments, but more CPU (and network) load" {
		t.Errorf("default %q usage %q", f.DefValue, f.Usage)
	}
	if o.ConcurrentDeploymentSyncs != 9 {
		t.Errorf("ConcurrentDeploymentSyncs %d, want 9", o.ConcurrentDeploymentSyncs)
	}
	if keying, sharded := deployment.Descriptor(o).IsSharded(); !sharded ||
		keying != shard.ByNamespace {
		t.Errorf(
			"IsSharded = %v, %v; want sharded by namespace (a Deployment, its ReplicaSets and pods share one)",
			keying,
			sharded,
		)
	}
	if specs := deployment.FeatureSpecs(); !specs[deployment.FeatureTerminatingReplicas].Default {
		t.Errorf(
			"%s must default to on, as in Kubernetes 1.37",
			deployment.FeatureTerminatingReplicas,
		)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       deployment.Options
		wantErr []string
	}{
		{"defaults", deployment.NewOptions(), nil},
		{"zero workers", deployment.Options{},
			[]string{
				`descriptor "deployment-controller": --concurrent-deployment-syncs: must be at least 1, got 0`,
			}},
		{"negative workers", deployment.Options{ConcurrentDeploymentSyncs: -2},
			[]string{"--concurrent-deployment-syncs: must be at least 1, got -2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, deployment.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

// TestRunWithCancelledContext: Run returns and releases the queue (its
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, deployment.Descriptor(deployment.NewOptions()))
}
