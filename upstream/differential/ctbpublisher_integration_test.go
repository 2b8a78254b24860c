//go:build integration

package differential_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ctrlhost/ctrlhost/controllers/ctbpublisher"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// ctbOtherSigner is a signer no controller publishes for.
const ctbOtherSigner = "example.com/differential"

// ctbOfSigner lists the bundles of signer.
func ctbOfSigner(signer string) metav1.ListOptions {
	return metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.signerName", signer).String()}
}

// ctbObserve returns the bundles of the serving signer and of the other.
func ctbObserve(ctx context.Context, cs kubernetes.Interface, _ string) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, signer := range []string{ctbpublisher.SignerName, ctbOtherSigner} {
		l, err := cs.CertificatesV1().ClusterTrustBundles().List(ctx, ctbOfSigner(signer))
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			l.Items[i].Kind = "ClusterTrustBundle"
		}
		out = append(out, objects(l.Items,
			func(b *certv1.ClusterTrustBundle) runtime.Object { return b })...)
	}
	return out, nil
}

// ctbCleanup deletes the bundles of both signers: no controller is left
// to, and the next side starts without them.
func ctbCleanup(ctx context.Context, cs kubernetes.Interface, _ string) error {
	for _, signer := range []string{ctbpublisher.SignerName, ctbOtherSigner} {
		err := cs.CertificatesV1().ClusterTrustBundles().DeleteCollection(ctx,
			metav1.DeleteOptions{}, ctbOfSigner(signer))
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// ctbTestCAs returns the testenv CA and another CA, PEM-encoded.
func ctbTestCAs(t *testing.T) (ca, other []byte) {
	t.Helper()
	ca, err := os.ReadFile(filepath.Clean(env(t).PKI().CAFile))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := certutil.NewSelfSignedCACert(
		certutil.Config{CommonName: "differential-other"}, key)
	if err != nil {
		t.Fatal(err)
	}
	other, err = certutil.EncodeCertificates(otherCA)
	if err != nil {
		t.Fatal(err)
	}
	return ca, other
}

// TestCTBPublisher: the kube-apiserver serving CA (the testenv CA: the
// upstream side reads it from --root-ca-file, the native side from its
// client configuration, as KCM does without the flag) is published in a
// bundle named after it; the signer's outdated bundle is deleted, and
// another signer's kept.
func TestCTBPublisher(t *testing.T) {
	ca, old := ctbTestCAs(t)
	res := compare(t, differential.Scenario{
		Name:       "clustertrustbundle-publisher publishes the serving CA",
		Controller: ctbpublisher.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, b := range []*certv1.ClusterTrustBundle{
				{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes.io:kube-apiserver-serving:" + ns},
					Spec: certv1.ClusterTrustBundleSpec{SignerName: ctbpublisher.SignerName,
						TrustBundle: string(old)}},
				{ObjectMeta: metav1.ObjectMeta{Name: "example.com:differential:" + ns},
					Spec: certv1.ClusterTrustBundleSpec{SignerName: ctbOtherSigner,
						TrustBundle: string(old)}},
			} {
				if _, err := cs.CertificatesV1().ClusterTrustBundles().Create(ctx, b,
					metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		Observe: ctbObserve,
		Settled: func(state []map[string]any) bool {
			published, outdated := false, false
			for _, o := range state {
				switch nameOf(o) {
				case ctbpublisher.BundleName(ca):
					published = true
				case "kubernetes.io:kube-apiserver-serving:<ns>":
					outdated = true
				}
			}
			return published && !outdated
		},
		Cleanup: ctbCleanup,
	})
	var names []string
	for _, o := range res.Native {
		names = append(names, nameOf(o))
	}
	if len(names) != 2 || names[0] != "example.com:differential:<ns>" ||
		names[1] != ctbpublisher.BundleName(ca) {
		t.Errorf("native side kept %q, want the other signer's and %s", names,
			ctbpublisher.BundleName(ca))
	}
}

// TestCTBPublisherCorrects: a bundle with the CA's name but other content
// gets the CA's.
func TestCTBPublisherCorrects(t *testing.T) {
	ca, other := ctbTestCAs(t)
	name := ctbpublisher.BundleName(ca)
	compare(t, differential.Scenario{
		Name:       "clustertrustbundle-publisher corrects its bundle",
		Controller: ctbpublisher.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			_, err := cs.CertificatesV1().ClusterTrustBundles().Create(ctx,
				&certv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: certv1.ClusterTrustBundleSpec{SignerName: ctbpublisher.SignerName,
						TrustBundle: string(other)}}, metav1.CreateOptions{})
			return err
		},
		Observe: ctbObserve,
		Settled: func(state []map[string]any) bool {
			for _, o := range state {
				spec, _ := o["spec"].(map[string]any)
				if nameOf(o) == name && spec["trustBundle"] == string(ca) {
					return true
				}
			}
			return false
		},
		Cleanup: ctbCleanup,
	})
}
