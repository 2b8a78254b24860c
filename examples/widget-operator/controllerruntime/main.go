// Command widget-operator runs the widget and secret controllers of the widget
// operator on controller-runtime.
package main

import (
	"flag"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ctrlhost/ctrlhost/examples/widget-operator/controllerruntime/api/v1alpha1"
)

func main() {
	var (
		leaderElect          bool
		leaderElectID        string
		leaderElectNamespace string
		releaseOnCancel      bool
		probeAddr            string
		metricsAddr          string
	)
	flag.BoolVar(&leaderElect, "leader-elect", true,
		"Enable leader election, so that only one replica is active.")
	flag.StringVar(&leaderElectID, "leader-elect-id", "widget-operator",
		"Name of the leader election Lease.")
	flag.StringVar(&leaderElectNamespace, "leader-election-namespace", "",
		"Namespace of the leader election Lease (default: the pod's namespace).")
	flag.BoolVar(&releaseOnCancel, "leader-elect-release-on-cancel", false,
		"Release the leader election Lease on shutdown.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081",
		"Address of the health probe endpoints.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0",
		"Address of the metrics endpoint; 0 disables it.")
	flag.Parse()

	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("setup")

	if err := run(leaderElect, leaderElectID, leaderElectNamespace, releaseOnCancel,
		probeAddr, metricsAddr); err != nil {
		log.Error(err, "Operator failed")
		os.Exit(1)
	}
}

func run(leaderElect bool, leaderElectID, leaderElectNamespace string, releaseOnCancel bool,
	probeAddr, metricsAddr string) error {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:        probeAddr,
		LeaderElection:                leaderElect,
		LeaderElectionID:              leaderElectID,
		LeaderElectionNamespace:       leaderElectNamespace,
		LeaderElectionReleaseOnCancel: releaseOnCancel,
	})
	if err != nil {
		return err
	}
	if err := setupControllers(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// setupControllers adds the widget and secret controllers to mgr, joined by the
// channel on which the secret controller requeues Widgets.
func setupControllers(mgr ctrl.Manager) error {
	requeue := make(chan event.GenericEvent)
	widgets := &WidgetReconciler{
		Client:  mgr.GetClient(),
		Scheme:  mgr.GetScheme(),
		Requeue: requeue,
	}
	if err := widgets.SetupWithManager(mgr); err != nil {
		return err
	}
	secrets := &SecretReconciler{Widgets: requeue}
	return secrets.SetupWithManager(mgr)
}
