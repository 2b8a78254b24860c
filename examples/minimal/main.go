// Command minimal is the smallest controller manager built on ctrlhost: one
// controller that logs every ConfigMap it sees, with KCM's host flags.
//
//	go run ./examples/minimal --kubeconfig=$HOME/.kube/config --secure-port=10257
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
)

// configMapLogger logs ConfigMaps as its informer sees them.
func configMapLogger() descriptor.Descriptor {
	return descriptor.New("configmap-logger", func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		log := logr.FromContextOrDiscard(ctx)
		informer := cc.InformerFactory.Core().V1().ConfigMaps().Informer()
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if cm, ok := obj.(*corev1.ConfigMap); ok {
					log.Info("ConfigMap seen", "namespace", cm.Namespace, "name", cm.Name)
				}
			},
		}); err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
				return nil // stopped before the cache synced
			}
			log.Info("Cache synced; watching ConfigMaps")
			<-ctx.Done()
			return nil
		}), nil
	}).
		WithAliases("cm-logger")
}

func main() {
	opts := manager.NewOptions()
	fs := pflag.NewFlagSet("minimal", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(opts manager.Options) error {
	// The logger comes first, and client-go's klog is routed into it, so
	// that Build already logs in the chosen format.
	log, done, err := logging.ForProgram(opts.Logging, os.Stderr)
	if err != nil {
		return err
	}
	defer done()
	m, err := manager.NewBuilder("minimal-controller-manager").
		WithOptions(opts).
		WithLogger(log).
		Register(configMapLogger()).
		Build()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return m.Run(ctx)
}
