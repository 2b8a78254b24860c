package satoken_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/internal/satoken"
)

func tokenReactor(cs *fake.Clientset, failures int32) *atomic.Int32 {
	var calls atomic.Int32
	cs.PrependReactor(
		"create",
		"serviceaccounts",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "token" {
				return false, nil, nil
			}
			if calls.Add(1) <= failures {
				return true, nil, errors.New("injected: unavailable")
			}
			req := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
			exp := time.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second)
			return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
				Token: "tok", ExpirationTimestamp: metav1.NewTime(exp)}}, nil
		},
	)
	return &calls
}

func TestTokenCreatesTheServiceAccountAndRefreshesEarly(t *testing.T) {
	cs := fake.NewClientset()
	calls := tokenReactor(cs, 1) // one transient failure is retried
	tok, err := satoken.Source(context.Background(), cs, "kube-system", "widget-controller").Token()
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "tok" || tok.TokenType != "Bearer" {
		t.Errorf("token = %+v", tok)
	}
	if left := time.Until(tok.Expiry); left > 49*time.Minute || left < 47*time.Minute {
		t.Errorf("expiry in %v, want 80%% of an hour (48m)", left)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d TokenRequests, want 2 (one failure retried)", n)
	}
	if _, err := cs.CoreV1().ServiceAccounts("kube-system").Get(t.Context(), "widget-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("ServiceAccount not created: %v", err)
	}
}

func TestTokenKeepsAnExistingServiceAccount(t *testing.T) {
	sa := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "c",
			Namespace: "ns",
			Labels:    map[string]string{"keep": "me"},
		},
	}
	cs := fake.NewClientset(sa)
	tokenReactor(cs, 0)
	if _, err := satoken.Source(context.Background(), cs, "ns", "c").Token(); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ServiceAccounts("ns").Get(t.Context(), "c", metav1.GetOptions{})
	if err != nil || got.Labels["keep"] != "me" {
		t.Errorf("ServiceAccount replaced: %+v, %v", got, err)
	}
}

// A source whose context ended fails at once, without a request: a term's
// controllers that were told to stop mint no token.
func TestSourceStopsWithItsContext(t *testing.T) {
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := satoken.Source(ctx, cs, "ns", "c").Token(); err == nil {
		t.Fatal("Token on a done context succeeded")
	}
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("%d requests made after the context ended: %v", n, cs.Actions())
	}
}
