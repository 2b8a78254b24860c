package kcm

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	sacontroller "k8s.io/kubernetes/pkg/controller/serviceaccount"
	"k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// newTokensController builds upstream's service-account token controller
// with the host's own credentials (it mints what the others' credentials
// need), as KCM builds it with its root client builder. Without
// --service-account-private-key-file it does not start, as in KCM.
func newTokensController(ctx context.Context, uc app.ControllerContext,
	cc descriptor.Context) (app.Controller, error) {
	sa := uc.ComponentConfig.SAController
	if sa.ServiceAccountKeyFile == "" {
		logr.FromContextOrDiscard(ctx).Info("Not starting: no --service-account-private-key-file")
		return nil, nil
	}
	key, err := keyutil.PrivateKeyFromFile(sa.ServiceAccountKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--service-account-private-key-file %s: %w", sa.ServiceAccountKeyFile, err)
	}
	var rootCA []byte
	if sa.RootCAFile != "" {
		if rootCA, err = os.ReadFile(sa.RootCAFile); err != nil {
			return nil, fmt.Errorf("--root-ca-file: %w", err)
		}
		if _, err := certutil.ParseCertsPEM(rootCA); err != nil {
			return nil, fmt.Errorf("--root-ca-file %s: %w", sa.RootCAFile, err)
		}
	} else {
		cfg, err := cc.RootClientBuilder.Config("tokens-controller")
		if err != nil {
			return nil, err
		}
		rootCA = cfg.CAData
	}
	client, err := cc.RootClientBuilder.Client("tokens-controller")
	if err != nil {
		return nil, err
	}
	gen, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, key)
	if err != nil {
		return nil, fmt.Errorf("--service-account-private-key-file %s: token generator: %w",
			sa.ServiceAccountKeyFile, err)
	}
	tc, err := sacontroller.NewTokensController(logr.FromContextOrDiscard(ctx),
		uc.InformerFactory.Core().V1().ServiceAccounts(), uc.InformerFactory.Core().V1().Secrets(),
		client, sacontroller.TokensControllerOptions{TokenGenerator: gen, RootCA: rootCA})
	if err != nil {
		return nil, fmt.Errorf("service-account token controller: %w", err)
	}
	return tokensController{tc: tc, workers: int(sa.ConcurrentSATokenSyncs), name: cc.Name}, nil
}

type tokensController struct {
	tc      *sacontroller.TokensController
	workers int
	name    string
}

func (t tokensController) Name() string            { return t.name }
func (t tokensController) Run(ctx context.Context) { t.tc.Run(ctx, t.workers) }
