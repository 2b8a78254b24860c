package metrics_test

import (
	"fmt"
	"net/http"

	"github.com/ctrlhost/ctrlhost/internal/metrics"
)

// Wiring the metrics of a controller host.
func Example() {
	metrics.InstallClientGoProviders() // once per process; later calls do nothing

	reg := metrics.NewRegistry() // go_* and process_*
	if err := metrics.RegisterClientGo(reg); err != nil {
		fmt.Println(err)
		return
	}
	controllers := metrics.NewControllers("my-controller-manager")
	if err := controllers.Register(reg); err != nil {
		fmt.Println(err)
		return
	}

	controllers.Started("deployment")
	defer controllers.Stopped("deployment")

	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(reg))
	fmt.Println(metrics.Namespace("my-controller-manager"))
	// Output: my_controller_manager
}
