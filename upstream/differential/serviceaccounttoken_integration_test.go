//go:build integration

package differential_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/controllers/serviceaccounttoken"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

const (
	tokenController     = "serviceaccount-token-controller"
	legacyTokenLastUsed = "kubernetes.io/legacy-token-last-used"
)

func tokenSA(name string, secrets ...string) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, s := range secrets {
		sa.Secrets = append(sa.Secrets, corev1.ObjectReference{Name: s})
	}
	return sa
}

// tokenSecret is a token secret for the ServiceAccount saName; saUID, when
// set, is its uid annotation.
func tokenSecret(name, saName, saUID string, data map[string][]byte) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{corev1.ServiceAccountNameKey: saName}},
		Type:       corev1.SecretTypeServiceAccountToken,
		Data:       data,
	}
	if saUID != "" {
		s.Annotations[corev1.ServiceAccountUIDKey] = saUID
	}
	return s
}

// tokenObserver returns an Observe that lists the namespace's
// ServiceAccounts and Secrets and, for each secret with a token, a
// TokenSummary: the token's header, its claims without the
// ServiceAccount uid (it differs by run; whether it is the
// ServiceAccount's is recorded instead, as is whether the secret's uid
// annotation is), the user the API server
// authenticates the token as (a SelfSubjectReview made with it, without
// any other credential), whether ca.crt is the cluster CA and the
// namespace data. The secrets' data is replaced by its sorted keys
// (stringData.keys). A
// summary of the namespace's event reasons closes the list.
func tokenObserver(e *testenv.Env, ca []byte) func(context.Context, kubernetes.Interface, string) ([]runtime.Object, error) {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
		sas, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		uids := map[string]string{}
		var out []runtime.Object
		for i := range sas.Items {
			sa := &sas.Items[i]
			uids[sa.Name] = string(sa.UID)
			sa.Kind = "ServiceAccount"
			out = append(out, sa)
		}
		secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range secrets.Items {
			s := &secrets.Items[i]
			if tok := s.Data[corev1.ServiceAccountTokenKey]; len(tok) > 0 {
				sum, err := tokenSummary(ctx, e, s, string(tok), uids, ca)
				if err != nil {
					return nil, err
				}
				out = append(out, sum)
			}
			keys := make([]string, 0, len(s.Data))
			for k := range s.Data {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			s.Data, s.StringData = nil, map[string]string{"keys": strings.Join(keys, ",")}
			// The API server stamps the day a legacy token was last used:
			// the same on both sides unless a run spans midnight UTC.
			if _, ok := s.Labels[legacyTokenLastUsed]; ok {
				s.Labels[legacyTokenLastUsed] = "<day>"
			}
			s.Kind = "Secret"
			out = append(out, s)
		}
		events, err := differential.EventSummary(ctx, cs, ns, nil)
		if err != nil {
			return nil, err
		}
		return append(out, events), nil
	}
}

func tokenSummary(ctx context.Context, e *testenv.Env, s *corev1.Secret, tok string, uids map[string]string, ca []byte) (runtime.Object, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("secret %s: token is not a compact JWS", s.Name)
	}
	header, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, fmt.Errorf("secret %s: token header: %w", s.Name, err)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("secret %s: token payload: %w", s.Name, err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, fmt.Errorf("secret %s: token claims: %w", s.Name, err)
	}
	uidClaim := claims[serviceaccounttoken.ClaimServiceAccountUID]
	delete(claims, serviceaccounttoken.ClaimServiceAccountUID)
	saName, _ := claims[serviceaccounttoken.ClaimServiceAccountName].(string)
	rest, err := json.Marshal(claims) // keys sorted
	if err != nil {
		return nil, err
	}
	user, err := tokenUser(ctx, e, tok)
	if err != nil {
		return nil, err
	}
	sum := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.Name}, Data: map[string]string{
		"header":                          string(header),
		"claims":                          string(rest),
		"uidClaimIsServiceAccounts":       fmt.Sprint(uidClaim != nil && uidClaim == uids[saName]),
		"uidAnnotationIsServiceAccounts":  fmt.Sprint(s.Annotations[corev1.ServiceAccountUIDKey] == uids[saName]),
		"user":                            user,
		"caIsClusterCA":                   fmt.Sprint(bytes.Equal(s.Data[corev1.ServiceAccountRootCAKey], ca)),
		corev1.ServiceAccountNamespaceKey: string(s.Data[corev1.ServiceAccountNamespaceKey]),
	}}
	sum.Kind = "TokenSummary"
	return sum, nil
}

// tokenUser is the user the API server authenticates tok as, or why it
// refused it.
func tokenUser(ctx context.Context, e *testenv.Env, tok string) (string, error) {
	admin := e.Config()
	cfg := &rest.Config{Host: admin.Host, BearerToken: tok, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	switch {
	case apierrors.IsUnauthorized(err):
		return "<unauthorized>", nil
	case err != nil:
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

func clusterCA(t *testing.T, e *testenv.Env) []byte {
	t.Helper()
	ca, err := os.ReadFile(e.PKI().CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// stateOf returns the normalised object of that kind and name.
func stateOf(state []map[string]any, kind, name string) map[string]any {
	for _, o := range state {
		if md, _ := o["metadata"].(map[string]any); o["kind"] == kind && md["name"] == name {
			return o
		}
	}
	return nil
}

func summaryField(state []map[string]any, name, field string) string {
	o := stateOf(state, "TokenSummary", name)
	if o == nil {
		return ""
	}
	d, _ := o["data"].(map[string]any)
	s, _ := d[field].(string)
	return s
}

// TestServiceAccountTokenFilled: two token secrets of one ServiceAccount,
// one naming it only by name, one by name and uid with a stale ca.crt and
// its own namespace data, get a usable token, the cluster CA and (the
// first) the namespace; the first gets the uid annotation. A third,
// created while the controller runs, is filled too.
func TestServiceAccountTokenFilled(t *testing.T) {
	e := env(t)
	ca := clusterCA(t, e)
	res := compare(t, differential.Scenario{
		Name: "token secrets filled", Controller: tokenController,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			sa, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, tokenSA("app"), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			for _, s := range []*corev1.Secret{
				tokenSecret("app-token", "app", "", nil),
				tokenSecret("app-token-preset", "app", string(sa.UID), map[string][]byte{
					corev1.ServiceAccountNamespaceKey: []byte("custom"), corev1.ServiceAccountRootCAKey: []byte("stale")}),
			} {
				if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		// The test's part: once app-token is filled, a third token
		// secret is created while the controller runs.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, "app-token", metav1.GetOptions{})
			if err != nil || len(s.Data[corev1.ServiceAccountTokenKey]) == 0 {
				return err
			}
			_, err = cs.CoreV1().Secrets(ns).Create(ctx, tokenSecret("app-token-late", "app", "", nil), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		},
		Observe: tokenObserver(e, ca),
		Settled: func(state []map[string]any) bool {
			return count(state, "TokenSummary") == 3 &&
				summaryField(state, "app-token", "user") == "system:serviceaccount:<ns>:app" &&
				summaryField(state, "app-token-preset", "user") == "system:serviceaccount:<ns>:app" &&
				summaryField(state, "app-token-late", "user") == "system:serviceaccount:<ns>:app"
		},
	})
	for _, name := range []string{"app-token", "app-token-preset", "app-token-late"} {
		if got := summaryField(res.Native, name, "caIsClusterCA"); got != "true" {
			t.Errorf("native %s: ca.crt is the cluster CA: %s", name, got)
		}
		for _, f := range []string{"uidClaimIsServiceAccounts", "uidAnnotationIsServiceAccounts"} {
			if got := summaryField(res.Native, name, f); got != "true" {
				t.Errorf("native %s: %s: %s", name, f, got)
			}
		}
	}
	if got := summaryField(res.Native, "app-token-preset", "namespace"); got != "custom" {
		t.Errorf("native app-token-preset: namespace data %q, want it kept as %q", got, "custom")
	}
}

// TestServiceAccountTokenOrphansDeleted: a token secret of a ServiceAccount
// that does not exist and one whose uid annotation is not its
// ServiceAccount's are deleted; an Opaque secret naming the missing
// ServiceAccount and the valid token secret stay.
func TestServiceAccountTokenOrphansDeleted(t *testing.T) {
	e := env(t)
	compare(t, differential.Scenario{
		Name: "orphan token secrets deleted", Controller: tokenController,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, tokenSA("real"), metav1.CreateOptions{}); err != nil {
				return err
			}
			opaque := tokenSecret("ghost-opaque", "ghost", "", map[string][]byte{"k": []byte("v")})
			opaque.Type = corev1.SecretTypeOpaque
			for _, s := range []*corev1.Secret{
				tokenSecret("ghost-token", "ghost", "", nil),
				tokenSecret("stale-uid-token", "real", "00000000-0000-0000-0000-000000000000", nil),
				tokenSecret("real-token", "real", "", nil),
				opaque,
			} {
				if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		Observe: tokenObserver(e, clusterCA(t, e)),
		Settled: func(state []map[string]any) bool {
			return count(state, "Secret") == 2 && stateOf(state, "Secret", "ghost-opaque") != nil &&
				summaryField(state, "real-token", "user") == "system:serviceaccount:<ns>:real"
		},
	})
}

// TestServiceAccountTokenDeletions: once the tokens are filled the test
// deletes a ServiceAccount, whose two token secrets then go, and a token
// secret listed in another ServiceAccount's secrets, which is then
// removed from that list (the other listed secret stays listed).
func TestServiceAccountTokenDeletions(t *testing.T) {
	e := env(t)
	compare(t, differential.Scenario{
		Name: "service account and token deletions", Controller: tokenController,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, sa := range []*corev1.ServiceAccount{tokenSA("doomed"), tokenSA("keeper", "keeper-token", "keeper-other")} {
				if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			for _, s := range []*corev1.Secret{
				tokenSecret("doomed-token-1", "doomed", "", nil),
				tokenSecret("doomed-token-2", "doomed", "", nil),
				tokenSecret("keeper-token", "keeper", "", nil),
			} {
				if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		// The test's part: once every token is filled, delete the
		// ServiceAccount "doomed" and the secret "keeper-token" (both
		// only once: a NotFound afterwards is expected).
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			l, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			filled := 0
			for _, s := range l.Items {
				if len(s.Data[corev1.ServiceAccountTokenKey]) > 0 {
					filled++
				}
			}
			if filled < 3 {
				return nil
			}
			err = cs.CoreV1().ServiceAccounts(ns).Delete(ctx, "doomed", metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			err = cs.CoreV1().Secrets(ns).Delete(ctx, "keeper-token", metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		},
		Observe: tokenObserver(e, clusterCA(t, e)),
		Settled: func(state []map[string]any) bool {
			keeper := stateOf(state, "ServiceAccount", "keeper")
			return count(state, "Secret") == 0 && stateOf(state, "ServiceAccount", "doomed") == nil &&
				keeper != nil && fmt.Sprint(keeper["secrets"]) == "[map[name:keeper-other]]"
		},
	})
}
