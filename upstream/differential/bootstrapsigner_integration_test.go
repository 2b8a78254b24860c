//go:build integration

package differential_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/ctrlhost/ctrlhost/controllers/bootstrapsigner"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// The scenario's tokens (kube-system) and the two kubeconfigs it signs.
// cluster-info is one fixed ConfigMap: each side makes it in Setup and
// deletes it in Cleanup.
const (
	signerToken     = "dsign0" // valid, signing
	signerSecret    = "0123456789abcdef"
	nonSigningToken = "dnosig" // valid, not for signing
	expiredToken    = "dexpir" // signing, expired
	signedKubecfg1  = "apiVersion: v1\nkind: Config\nclusters:\n- name: one\n"
	signedKubecfg2  = "apiVersion: v1\nkind: Config\nclusters:\n- name: two\n"
	// The marks Act leaves on cluster-info as the tokens' life goes on.
	verifiedOne      = "differential/verified-kubeconfig-one"
	verifiedTwo      = "differential/verified-kubeconfig-two"
	signatureRemoved = "differential/signature-removed"
)

// TestBootstrapSigner: cluster-info is signed by the one valid signing
// token only (its signature verified with cluster-bootstrap's check), the
// stale and expired signatures go, a changed kubeconfig is signed again,
// and the signature goes with its token.
func TestBootstrapSigner(t *testing.T) {
	secret := func(ns, id string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem,
				Name: "bootstrap-token-" + id, Labels: map[string]string{"differential": ns}},
			Type: corev1.SecretTypeBootstrapToken,
			StringData: map[string]string{"token-id": id,
				"token-secret": signerSecret},
		}
		maps.Copy(s.StringData, data)
		return s
	}
	tokens := func(ns string) []*corev1.Secret {
		return []*corev1.Secret{
			secret(ns, signerToken, map[string]string{"usage-bootstrap-signing": "true",
				"usage-bootstrap-authentication": "true"}),
			secret(ns, nonSigningToken,
				map[string]string{"usage-bootstrap-authentication": "true"}),
			secret(ns, expiredToken, map[string]string{"usage-bootstrap-signing": "true",
				"expiration": "2020-01-02T03:04:05Z"}),
		}
	}
	cmAPI := func(cs kubernetes.Interface) func() (*corev1.ConfigMap, error) {
		return func() (*corev1.ConfigMap, error) {
			return cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(context.Background(),
				"cluster-info", metav1.GetOptions{})
		}
	}
	signatures := func(cm *corev1.ConfigMap) []string {
		var keys []string
		for k := range cm.Data {
			if strings.HasPrefix(k, bootstrapsigner.SignatureKeyPrefix) {
				keys = append(keys, k)
			}
		}
		return keys
	}
	// signedBy reports whether cm's only signature is signerToken's and
	// verifies its kubeconfig, content.
	signedBy := func(cm *corev1.ConfigMap, content string) bool {
		key := bootstrapsigner.SignatureKeyPrefix + signerToken
		return cm.Data["kubeconfig"] == content && slices.Equal(signatures(cm), []string{key}) &&
			jws.DetachedTokenIsValid(cm.Data[key], content, signerToken, signerSecret)
	}
	deleteAll := func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		err := cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Delete(ctx, "cluster-info",
			metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		for _, s := range tokens(ns) {
			err := cs.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	}
	res := compare(t, differential.Scenario{
		Name:       "bootstrap tokens through their life, signatures verified",
		Controller: bootstrapsigner.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := deleteAll(ctx, cs, ns); err != nil { // a failed run's leftovers
				return err
			}
			for _, s := range tokens(ns) {
				if _, err := cs.CoreV1().Secrets(s.Namespace).Create(ctx, s,
					metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			// A signature of a token that does not exist, and one of the
			// expired token: both go.
			_, err := cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Create(ctx,
				&corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: "cluster-info",
						Labels: map[string]string{"differential": ns}},
					Data: map[string]string{
						"kubeconfig": signedKubecfg1,
						bootstrapsigner.SignatureKeyPrefix + "dstale":     "stale..signature",
						bootstrapsigner.SignatureKeyPrefix + expiredToken: "expired..signature",
					},
				}, metav1.CreateOptions{})
			return err
		},
		// Each step waits for the controller's answer to the last: the
		// first kubeconfig signed (and verified) -> change it; the second
		// signed (and verified) -> marked, then the token deleted; no
		// signature left -> done. Each is marked on cluster-info before
		// the next step, so a conflicting write only delays it.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			cm, err := cmAPI(cs)()
			if err != nil {
				return err
			}
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			a := cm.Annotations
			switch {
			case a[verifiedOne] == "" && signedBy(cm, signedKubecfg1):
				a[verifiedOne] = "true"
				cm.Data["kubeconfig"] = signedKubecfg2
			case a[verifiedOne] != "" && a[verifiedTwo] == "" && signedBy(cm, signedKubecfg2):
				a[verifiedTwo] = "true"
			case a[verifiedTwo] != "" && a[signatureRemoved] == "":
				err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx,
					"bootstrap-token-"+signerToken, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				if len(signatures(cm)) != 0 {
					return nil
				}
				a[signatureRemoved] = "true"
			default:
				return nil
			}
			_, err = cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Update(ctx, cm,
				metav1.UpdateOptions{})
			return err
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			cm, err := cmAPI(cs)()
			if err != nil {
				return nil, err
			}
			cm.Kind = "ConfigMap"
			out := []runtime.Object{cm}
			l, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx,
				metav1.ListOptions{LabelSelector: "differential=" + ns})
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "Secret"
				out = append(out, &l.Items[i])
			}
			return out, nil
		},
		Settled: func(state []map[string]any) bool {
			for _, o := range state {
				md, _ := o["metadata"].(map[string]any)
				a, _ := md["annotations"].(map[string]any)
				if o["kind"] == "ConfigMap" && a[signatureRemoved] == "true" {
					return true
				}
			}
			return false
		},
		Cleanup: deleteAll,
	})
	if count(res.Native, "Secret") != 2 {
		t.Errorf("native side ended with %d tokens, want the 2 not deleted",
			count(res.Native, "Secret"))
	}
}
