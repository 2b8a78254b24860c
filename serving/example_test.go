package serving_test

import (
	"context"
	"net/http"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/serving"
)

// A controller host serves its endpoints as kube-controller-manager does:
// bind first, so that a taken port fails before any controller starts,
// then serve until the context ends.
func Example() {
	run := func(ctx context.Context, args []string, endpoints http.Handler, client kubernetes.Interface, log logr.Logger) error {
		opts := serving.NewOptions()
		fs := pflag.NewFlagSet("example", pflag.ContinueOnError)
		opts.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			return err
		}
		srv, err := serving.New(opts, endpoints, client, log)
		if err != nil {
			return err
		}
		if _, err := srv.Listen(ctx); err != nil {
			return err
		}
		// ... start controllers here; on failure, srv.Close().
		return srv.Serve(ctx) // until ctx is done
	}
	_ = run
}
