package healthz_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ctrlhost/ctrlhost/healthz"
)

func ExampleRegistry() {
	var reg healthz.Registry
	reg.Add(
		healthz.Check{Name: "ping", Checker: healthz.Ping},
		healthz.EndpointHealthz,
		healthz.EndpointLivez,
		healthz.EndpointReadyz,
	)
	reg.Add(healthz.Check{Name: "informer-sync", Checker: func(*http.Request) error {
		return errors.New("2 informers not synced")
	}}, healthz.EndpointHealthz, healthz.EndpointReadyz)

	h, err := reg.Handler()
	if err != nil {
		fmt.Println(err)
		return
	}

	for _, target := range []string{"/livez", "/readyz", "/readyz?verbose", "/readyz?exclude=informer-sync", "/readyz/informer-sync"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		fmt.Printf("GET %s: %d\n%s\n", target, rec.Code, rec.Body)
	}
	fmt.Println(h.Paths())

	// Output:
	// GET /livez: 200
	// ok
	// GET /readyz: 500
	// [+]ping ok
	// [-]informer-sync failed: reason withheld
	// readyz check failed
	//
	// GET /readyz?verbose: 500
	// [+]ping ok
	// [-]informer-sync failed: 2 informers not synced
	// readyz check failed
	//
	// GET /readyz?exclude=informer-sync: 200
	// ok
	// GET /readyz/informer-sync: 500
	// internal server error: 2 informers not synced
	//
	// [/healthz /healthz/informer-sync /healthz/ping /livez /livez/ping /readyz /readyz/informer-sync /readyz/ping]
}
