package kcm

import (
	"context"
	"net/http"

	"k8s.io/controller-manager/controller"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// adapted runs an upstream controller as a ctrlhost one: Run returns when
// upstream's returns (upstream's Run ends its goroutines before it
// returns), and the controller's own health check and debug handler, when
// it has them, are ctrlhost's.
type adapted struct{ c app.Controller }

func adapt(c app.Controller) descriptor.Controller { return adapted{c} }

func (a adapted) Run(ctx context.Context) error {
	a.c.Run(ctx)
	return nil
}

// HealthCheck answers with upstream's check; a controller without one
// passes, as upstream's ping check does.
func (a adapted) HealthCheck(req *http.Request) error {
	if hc, ok := a.c.(controller.HealthCheckable); ok {
		if check := hc.HealthChecker(); check != nil {
			return check.Check(req)
		}
	}
	return nil
}

// DebuggingHandler serves upstream's debug handler (the garbage collector's
// graph), or nil.
func (a adapted) DebuggingHandler() http.Handler {
	if d, ok := a.c.(controller.Debuggable); ok {
		return d.DebuggingHandler()
	}
	return nil
}

var (
	_ descriptor.HealthChecker = adapted{}
	_ descriptor.Debuggable    = adapted{}
)
