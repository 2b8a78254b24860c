package ctbpublisher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// key is the loop's one key: there is one bundle to keep, the signer's.
const key = SignerName

// controller keeps one ClusterTrustBundle of the signer, named after the
// CA it holds, and deletes the signer's others.
type controller struct {
	client  kubernetes.Interface
	bundles certlisters.ClusterTrustBundleLister
	ca      string
	metrics *metrics
	loop    *workloop.Loop
}

// newController builds the publisher, or returns nil when the API server
// does not serve certificates.k8s.io/v1 ClusterTrustBundles.
func newController(ctx context.Context, cc descriptor.Context, ca []byte) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	served, err := bundlesServed(client)
	if err != nil {
		return nil, err
	}
	if !served {
		logr.FromContextOrDiscard(ctx).Info("Not starting: the API server does not serve " +
			"certificates.k8s.io/v1 clustertrustbundles")
		return nil, nil
	}
	m, err := metricsOn(cc.Metrics)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Certificates().V1().ClusterTrustBundles()
	c := &controller{client: client, bundles: informer.Lister(), ca: string(ca), metrics: m}
	// The loop exists before the handler: a running informer (warm
	// standby) calls it at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	err = c.loop.Watch(informer.Informer(), workloop.EnqueueMapped(signerKey), ofSigner,
		workloop.ResourceVersionChanged())
	if err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// bundlesServed asks discovery whether certificates.k8s.io/v1 serves
// ClusterTrustBundles: not found is "no", any other failure an error (a
// partial answer that names them is "yes").
func bundlesServed(client kubernetes.Interface) (bool, error) {
	list, err := client.Discovery().ServerResourcesForGroupVersion(
		certv1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if list != nil {
		for _, r := range list.APIResources {
			if r.Name == bundles.Resource {
				return true, nil
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("discovering ClusterTrustBundles: %w", err)
	}
	return false, nil
}

// Run syncs once the cache has, then after every change of the signer's
// bundles, until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Publishing the kube-apiserver serving CA in a ClusterTrustBundle",
		"signerName", SignerName)
	defer log.Info("Stopped publishing the kube-apiserver serving CA")
	c.loop.Add(key)
	return c.loop.RunWorkers(ctx, 1)
}

// ofSigner passes the changes of the signer's bundles.
func ofSigner(_, obj any) bool {
	b, ok := obj.(*certv1.ClusterTrustBundle)
	return ok && b.Spec.SignerName == SignerName
}

func signerKey(any) []string { return []string{key} }

// BundleName is the name of the signer's bundle holding ca, KCM's: the
// signer name with its slashes made colons, a colon, and the first twelve
// bytes of the bundle's SHA-256 in hex.
func BundleName(ca []byte) string {
	sum := sha256.Sum256(ca)
	return strings.ReplaceAll(SignerName, "/", ":") + ":" + hex.EncodeToString(sum[:12])
}

// sync creates the bundle of the CA, or corrects its content, then deletes
// the signer's other bundles. A failed deletion does not stop the others;
// the last failure is returned, for the sync to be retried.
func (c *controller) sync(ctx context.Context, _ string) (err error) {
	start := time.Now()
	defer func() { c.metrics.observe(start, err) }()
	log := logr.FromContextOrDiscard(ctx)
	name := BundleName([]byte(c.ca))
	bundle, err := c.bundles.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.client.CertificatesV1().ClusterTrustBundles().Create(ctx,
			&certv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: certv1.ClusterTrustBundleSpec{SignerName: SignerName, TrustBundle: c.ca}},
			metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating ClusterTrustBundle %s: %w", name, err)
		}
		log.V(2).Info("Created the ClusterTrustBundle", "clusterTrustBundle", name)
	case err != nil:
		return err
	case bundle.Spec.TrustBundle != c.ca:
		next := bundle.DeepCopy()
		next.Spec.TrustBundle = c.ca
		if _, err := c.client.CertificatesV1().ClusterTrustBundles().Update(ctx, next,
			metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating ClusterTrustBundle %s: %w", name, err)
		}
		log.V(2).Info("Corrected the ClusterTrustBundle", "clusterTrustBundle", name)
	}
	all, err := c.bundles.List(labels.Everything())
	if err != nil {
		return err
	}
	var failed error
	for _, b := range all {
		if b.Spec.SignerName != SignerName || b.Name == name {
			continue
		}
		err := c.client.CertificatesV1().ClusterTrustBundles().Delete(ctx, b.Name,
			metav1.DeleteOptions{})
		switch {
		case err == nil:
			log.V(2).Info("Deleted an outdated ClusterTrustBundle", "clusterTrustBundle", b.Name)
		case apierrors.IsNotFound(err):
		default:
			log.Error(err, "Deleting an outdated ClusterTrustBundle", "clusterTrustBundle", b.Name)
			failed = fmt.Errorf("deleting ClusterTrustBundle %s: %w", b.Name, err)
		}
	}
	return failed
}
