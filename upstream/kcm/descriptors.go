package kcm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmconfig "k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	ctrlconfig "k8s.io/kubernetes/pkg/controller/apis/config"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Config is what Descriptors needs.
type Config struct {
	// Component is the configuration upstream's controllers read; build it
	// with Options.Config. Required.
	Component *ctrlconfig.KubeControllerManagerConfiguration
}

// Descriptors returns one ctrlhost descriptor per controller of upstream's
// app.NewControllerDescriptors(), sorted by name: the same canonical name,
// aliases, required feature gates and disabled-by-default flag, and the
// controller that needs special handling (the service-account token
// controller) marked StartFirst, as KCM starts it before all others.
//
// Each InitFunc builds upstream's controller over an app.ControllerContext
// filled from the term's descriptor.Context (see the package doc); the
// controllers of one term share one ControllerContext, and nothing of it
// outlives the term.
func Descriptors(cfg Config) ([]descriptor.Descriptor, error) {
	if cfg.Component == nil {
		return nil, fmt.Errorf("kcm.Config.Component is required: build it with " +
			"kcm.NewOptions and Options.Config")
	}
	up := app.NewControllerDescriptors()
	h := &host{cfg: cfg, terms: map[<-chan struct{}]*termContext{}}
	out := make([]descriptor.Descriptor, 0, len(up))
	for _, name := range slices.Sorted(maps.Keys(up)) {
		u := up[name]
		d := descriptor.New(name, h.initFunc(u)).WithAliases(u.GetAliases()...)
		if gates := u.GetRequiredFeatureGates(); len(gates) > 0 {
			d = d.WithFeatureGates(gates...)
		}
		if u.IsDisabledByDefault() {
			d = d.DisabledByDefault()
		}
		if u.RequiresSpecialHandling() {
			d = d.StartFirst()
		}
		out = append(out, d)
	}
	return out, nil
}

// host builds upstream controllers for every term of one Manager.
type host struct {
	cfg Config

	mu    sync.Mutex
	terms map[<-chan struct{}]*termContext // by the term's InformersStarted
}

// initFunc adapts one upstream descriptor.
func (h *host) initFunc(u *app.ControllerDescriptor) descriptor.InitFunc {
	return func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		uc, err := h.term(ctx, cc).get(ctx, cc, h.cfg, usesGraph[u.Name()])
		if err != nil {
			return nil, err
		}
		var c app.Controller
		if u.Name() == names.ServiceAccountTokenController {
			// Upstream's descriptor carries its root client builder from
			// Run; ctrlhost's term provides it instead.
			c, err = newTokensController(ctx, uc, cc)
		} else {
			c, err = u.BuildController(ctx, uc)
		}
		if err != nil || c == nil {
			if c == nil && err == nil {
				logr.FromContextOrDiscard(ctx).Info("Upstream controller chose not to " +
					"start with this configuration")
			}
			return nil, err
		}
		return adapt(c), nil
	}
}

// term returns the shared context of the term cc belongs to, creating it
// on the term's first InitFunc; it is forgotten when the term's context
// ends.
func (h *host) term(ctx context.Context, cc descriptor.Context) *termContext {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.terms[cc.InformersStarted]; ok {
		return t
	}
	t := &termContext{}
	h.terms[cc.InformersStarted] = t
	key := cc.InformersStarted
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		delete(h.terms, key)
		h.mu.Unlock()
	})
	return t
}

// AlwaysOn returns --controllers entries under which the controllers that
// KCM starts whatever --controllers says (those needing special handling:
// the service-account token controller, which itself only starts given
// --service-account-private-key-file) are enabled: their names come first,
// and the first entry naming a controller wins. Pass the result as
// manager.Options.Controllers to select exactly as KCM does.
func AlwaysOn(controllers []string) []string {
	var first []string
	for name, d := range app.NewControllerDescriptors() {
		if d.RequiresSpecialHandling() {
			first = append(first, name)
		}
	}
	slices.Sort(first)
	if len(controllers) == 0 {
		controllers = []string{"*"}
	}
	return append(first, controllers...)
}

// UpstreamSelection returns, sorted, the controllers kube-controller-manager
// itself would start for the --controllers entries, decided by upstream's
// own code (its option groups resolve aliases, IsControllerEnabled decides,
// the special controllers always start, then the required feature gates of
// utilfeature.DefaultFeatureGate). A Manager given AlwaysOn(controllers) and
// Descriptors selects the same set; it is here to check that, and to tell
// an operator what KCM would have run.
func UpstreamSelection(controllers []string) ([]string, error) {
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	s.Generic.Controllers = controllers
	s.SecureServing.BindPort = 0
	var c kcmconfig.Config
	if err := s.ApplyTo(&c, app.KnownControllers(), app.ControllersDisabledByDefault(),
		app.ControllerAliases()); err != nil {
		return nil, err
	}
	uc := app.ControllerContext{ComponentConfig: c.ComponentConfig}
	var out []string
	for name, d := range app.NewControllerDescriptors() {
		on := d.RequiresSpecialHandling() || uc.IsControllerEnabled(d)
		for _, g := range d.GetRequiredFeatureGates() {
			on = on && utilfeature.DefaultFeatureGate.Enabled(g)
		}
		if on {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}
