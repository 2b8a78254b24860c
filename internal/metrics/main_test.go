package metrics_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"k8s.io/client-go/util/workqueue"

	"github.com/ctrlhost/ctrlhost/internal/metrics"
)

func TestMain(m *testing.M) {
	// This must run before any test calls InstallClientGoProviders, which
	// cannot be undone.
	if err := nothingBeforeInstall(); err != nil {
		fmt.Fprintln(os.Stderr, "before InstallClientGoProviders:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// nothingBeforeInstall checks that importing the package registered nothing
// in the default registry and that a work queue built before
// InstallClientGoProviders reports nothing.
func nothingBeforeInstall() error {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return err
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "go_") && !strings.HasPrefix(mf.GetName(), "process_") {
			return fmt.Errorf("default registry holds %s", mf.GetName())
		}
	}

	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "early"})
	q.Add("a")
	item, _ := q.Get()
	q.Done(item)
	q.ShutDown()

	reg := prometheus.NewRegistry()
	if err := metrics.RegisterClientGo(reg); err != nil {
		return err
	}
	if mfs, err = reg.Gather(); err != nil {
		return err
	}
	// Only the unlabelled rest_client_transport_cache_entries gauge exists,
	// at 0; every vector is empty.
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) > 0 || m.GetGauge().GetValue() != 0 {
				return fmt.Errorf("registry with client-go collectors gathers %s %v", mf.GetName(), m)
			}
		}
	}
	return nil
}
