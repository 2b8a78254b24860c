package metrics

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// REST client metrics, named as kube-controller-manager exposes them (the
// names and buckets of k8s.io/component-base/metrics/prometheus/restclient).
// Labels carry the API server's host[:port], never a path, so their
// cardinality is the number of servers talked to. Process-wide; see the
// package documentation.
var (
	latencyBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	sizeBuckets    = []float64{
		64,
		256,
		512,
		1024,
		4096,
		16384,
		65536,
		262144,
		1048576,
		4194304,
		16777216,
	}

	restRequestLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Request latency in seconds. Broken down by verb, and host.",
		Buckets: latencyBuckets,
	}, []string{"verb", "host"})

	restResolverLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_dns_resolution_duration_seconds",
		Help:    "DNS resolver latency in seconds. Broken down by host.",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30},
	}, []string{"host"})

	restRequestSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_size_bytes",
		Help:    "Request size in bytes. Broken down by verb and host.",
		Buckets: sizeBuckets,
	}, []string{"verb", "host"})

	restResponseSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_response_size_bytes",
		Help:    "Response size in bytes. Broken down by verb and host.",
		Buckets: sizeBuckets,
	}, []string{"verb", "host"})

	restRateLimiterLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_rate_limiter_duration_seconds",
		Help:    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
		Buckets: latencyBuckets,
	}, []string{"verb", "host"})

	restRequestResult = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of HTTP requests, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})

	restRequestRetry = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_request_retries_total",
		Help: "Number of request retries, partitioned by status code, verb, and host.",
	}, []string{"code", "verb", "host"})

	restTransportCacheEntries = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rest_client_transport_cache_entries",
		Help: "Number of transport entries in the internal cache.",
	})

	restTransportCreateCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_transport_create_calls_total",
		Help: "Number of calls to get a new transport, partitioned by the result of the operation " +
			"hit: obtained from the cache, miss: created and added to the cache, " +
			"miss-gc: recreated and added back to the cache after being garbage collected, " +
			"uncacheable: created and not cached",
	}, []string{"result"})

	restCollectors = []prometheus.Collector{
		restRequestLatency, restResolverLatency, restRequestSize, restResponseSize,
		restRateLimiterLatency, restRequestResult, restRequestRetry,
		restTransportCacheEntries, restTransportCreateCalls,
	}
)

// restRegisterOpts are the hooks InstallClientGoProviders hands to
// client-go. Hooks left nil (exec plugin metrics, certificate expiry and
// rotation, CA reloads, transport GC) keep client-go's no-op.
func restRegisterOpts() clientmetrics.RegisterOpts {
	return clientmetrics.RegisterOpts{
		RequestLatency:        urlLatency{restRequestLatency},
		ResolverLatency:       resolverLatency{restResolverLatency},
		RequestSize:           size{restRequestSize},
		ResponseSize:          size{restResponseSize},
		RateLimiterLatency:    urlLatency{restRateLimiterLatency},
		RequestResult:         result{restRequestResult},
		RequestRetry:          retry{restRequestRetry},
		TransportCacheEntries: transportCacheEntries{restTransportCacheEntries},
		TransportCreateCalls:  transportCreateCalls{restTransportCreateCalls},
	}
}

// urlLatency records a latency by verb and the URL's host only.
type urlLatency struct{ v *prometheus.HistogramVec }

func (l urlLatency) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	l.v.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

type resolverLatency struct{ v *prometheus.HistogramVec }

func (l resolverLatency) Observe(_ context.Context, host string, d time.Duration) {
	l.v.WithLabelValues(host).Observe(d.Seconds())
}

type size struct{ v *prometheus.HistogramVec }

func (s size) Observe(_ context.Context, verb, host string, n float64) {
	s.v.WithLabelValues(verb, host).Observe(n)
}

type result struct{ v *prometheus.CounterVec }

func (r result) Increment(_ context.Context, code, method, host string) {
	r.v.WithLabelValues(code, method, host).Inc()
}

type retry struct{ v *prometheus.CounterVec }

func (r retry) IncrementRetry(_ context.Context, code, method, host string) {
	r.v.WithLabelValues(code, method, host).Inc()
}

type transportCacheEntries struct{ g prometheus.Gauge }

func (t transportCacheEntries) Observe(n int) { t.g.Set(float64(n)) }

type transportCreateCalls struct{ v *prometheus.CounterVec }

func (t transportCreateCalls) Increment(result string) { t.v.WithLabelValues(result).Inc() }
