package contract_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/internal/fakeapi"
	"github.com/ctrlhost/ctrlhost/test/integration/contract"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestContractInMemory runs the table against the in-memory API server,
// with the resources managertest.NewAPI serves.
func TestContractInMemory(t *testing.T) {
	s := fakeapi.New()
	contract.Run(t, &contract.Target{
		Name:     "in-memory API",
		InMemory: true,
		Config:   fakeapi.Config(s, nil),
		Restart: func(context.Context) error {
			s.DropWatches()
			return nil
		},
		Serve: func(_ context.Context, r contract.CustomResource) error {
			s.AddResource(fakeapi.CustomResource(r.GVR(), r.Kind, true, r.Status))
			return nil
		},
		Unserve: func(_ context.Context, r contract.CustomResource) error {
			s.RemoveResource(r.GVR())
			return nil
		},
	})
}
