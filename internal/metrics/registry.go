package metrics

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a new registry holding the Go runtime collector
// (go_*) and the process collector (process_*), as /metrics of every
// Kubernetes component has them. It holds nothing else; add the client-go
// series with RegisterClientGo and controller series with
// Controllers.Register.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves the metrics g gathers in the Prometheus exposition format
// the scraper asks for. A collector that fails does not fail the scrape:
// the handler serves what it could gather and logs nothing (the error is
// visible as a missing series, and as promhttp_metric_handler_errors_total
// when g is also a prometheus.Registerer).
func Handler(g prometheus.Gatherer) http.Handler {
	opts := promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 10,
	}
	if r, ok := g.(prometheus.Registerer); ok {
		opts.Registry = r
	}
	return promhttp.HandlerFor(g, opts)
}

// Namespace turns a component name into a Prometheus metric namespace:
// every character other than an ASCII letter, digit or '_' ('-', '.', …)
// becomes '_', and a leading digit gets a '_' prefix. For example
// "my-controller-manager" becomes "my_controller_manager".
func Namespace(component string) string {
	var b strings.Builder
	for i, r := range component {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
