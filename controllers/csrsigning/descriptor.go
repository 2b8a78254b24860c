package csrsigning

import (
	"context"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. Invalid options are
// reported by manager.Builder.Build; the CA files are read when the
// controller is built, each term.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		clk := o.Clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		files := o.files()
		log := logr.FromContextOrDiscard(ctx)
		if len(files) == 0 {
			log.Info("Not starting: no CA given (--cluster-signing-cert-file and " +
				"--cluster-signing-key-file, or the per-signer --cluster-signing-*-file flags)")
			return nil, nil
		}
		for _, signer := range signerNames {
			if _, ok := files[signer]; !ok {
				log.Info("Not signing for this signer: per-signer CA files are set for others only",
					"signer", signer)
			}
		}
		return newController(ctx, cc, files, o.ClusterSigningDuration, clk)
	}).WithAliases(Alias).WithValidator(o.Validate).
		WithInformers(certv1.SchemeGroupVersion.WithResource("certificatesigningrequests")).
		WithClientName(clientName)
}
