package term

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/internal/satoken"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
)

// hostClients are the clients of a host built from a REST config, as a
// Manager's Build makes them.
func hostClients(cfg *rest.Config, serviceAccounts bool) *Clients {
	return &Clients{RESTConfig: cfg, Client: fake.NewClientset(), ServiceAccounts: serviceAccounts,
		Credentials: &satoken.Credentials{Namespace: "kube-system", Client: fake.NewClientset(),
			Config: cfg}}
}

// A controller's client config is the host's, with a user agent naming
// the controller, and its own budget where it has one.
func TestAControllersConfigNamesItAndTakesItsBudget(t *testing.T) {
	h := hostClients(&rest.Config{Host: "https://127.0.0.1:1", QPS: 7, Burst: 9,
		UserAgent: "my-manager"}, false)
	h.Budgets = map[string]Budget{"b-controller": {QPS: 30}}
	for _, tc := range []struct {
		name      string
		wantQPS   float32
		wantBurst int
	}{
		{"a-controller", 7, 9},
		{"b-controller", 30, 9},
	} {
		cfg, err := clientBuilder{host: h}.Config(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if want := "my-manager/" + tc.name; cfg.UserAgent != want || cfg.QPS != tc.wantQPS ||
			cfg.Burst != tc.wantBurst {
			t.Errorf("%s: UserAgent %q QPS %v Burst %d, want %q %v %d", tc.name, cfg.UserAgent,
				cfg.QPS, cfg.Burst, want, tc.wantQPS, tc.wantBurst)
		}
	}
}

// With service-account credentials, ClientBuilder drops the host's bearer
// token (the controller authenticates as its ServiceAccount) while
// RootClientBuilder keeps it.
func TestRootClientBuilderKeepsHostCredentials(t *testing.T) {
	for _, useSA := range []bool{false, true} {
		h := hostClients(&rest.Config{Host: "https://127.0.0.1:1", BearerToken: "host-token"}, useSA)
		ctrl, _ := clientBuilder{host: h}.Config("x-controller")
		root, _ := clientBuilder{host: h, root: true}.Config("x-controller")
		if got, want := ctrl.BearerToken != "", !useSA; got != want {
			t.Errorf("useSA=%v: ClientBuilder keeps the host token = %v, want %v", useSA, got, want)
		}
		if root.BearerToken != "host-token" {
			t.Errorf("useSA=%v: RootClientBuilder token = %q, want the host's", useSA,
				root.BearerToken)
		}
		if !strings.HasSuffix(root.UserAgent, "/x-controller") {
			t.Errorf("useSA=%v: RootClientBuilder user agent %q does not name the controller",
				useSA, root.UserAgent)
		}
	}
}

// The clients one controller gets in different slot terms share one rate
// limiter (its budget per replica), apart from its root client's and other
// controllers'; outside shard groups every client limits itself, as in KCM.
func TestSlotTermsShareAControllersRateLimiter(t *testing.T) {
	h := hostClients(&rest.Config{Host: "https://127.0.0.1:1", QPS: 7, Burst: 9}, false)
	limiters := shardgroup.NewLimiters()
	config := func(b clientBuilder, name string) *rest.Config {
		t.Helper()
		cfg, err := b.Config(name)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	slot1 := config(clientBuilder{host: h, limiters: limiters}, "a-controller")
	slot2 := config(clientBuilder{host: h, limiters: limiters}, "a-controller")
	root := config(clientBuilder{host: h, limiters: limiters, root: true}, "a-controller")
	other := config(clientBuilder{host: h, limiters: limiters}, "b-controller")
	switch {
	case slot1.RateLimiter == nil:
		t.Fatal("a slot term's client has no shared rate limiter")
	case slot1.RateLimiter != slot2.RateLimiter:
		t.Error("two slot terms' clients of one controller have rate limiters of their own")
	case root.RateLimiter == slot1.RateLimiter, other.RateLimiter == slot1.RateLimiter:
		t.Error("a root client or another controller shares the controller's rate limiter")
	}
	if qps := slot1.RateLimiter.QPS(); qps != 7 {
		t.Errorf("shared limiter QPS %v, want --kube-api-qps 7", qps)
	}
	if plain := config(clientBuilder{host: h}, "a-controller"); plain.RateLimiter != nil {
		t.Error("a client outside shard groups got a shared rate limiter")
	}
}
