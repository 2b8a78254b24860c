package serving

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// Tokens known to fakeAPI, and what its SubjectAccessReviews decide.
const (
	aliceToken = "alice-token" // may get /metrics and /debug/pprof/*
	bobToken   = "bob-token"   // may do nothing
	rootToken  = "root-token"  // in system:masters
)

// fakeAPI is a fake clientset answering TokenReviews and
// SubjectAccessReviews, counting them and recording the last review.
type fakeAPI struct {
	*fake.Clientset

	mu           sync.Mutex
	tokenReviews int
	sars         int
	lastSAR      authorizationv1.SubjectAccessReviewSpec
	tokenErr     error // returned by TokenReviews when set
	sarErr       error // returned by SubjectAccessReviews when set
}

func newFakeAPI() *fakeAPI {
	api := &fakeAPI{Clientset: fake.NewClientset()}
	users := map[string]authenticationv1.UserInfo{
		aliceToken: {Username: "alice", UID: "uid-alice", Groups: []string{"system:authenticated"},
			Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a", "b"}}},
		bobToken:  {Username: "bob", Groups: []string{"system:authenticated"}},
		rootToken: {Username: "root", Groups: []string{"system:masters", "system:authenticated"}},
	}
	api.PrependReactor(
		"create",
		"tokenreviews",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
			api.mu.Lock()
			defer api.mu.Unlock()
			api.tokenReviews++
			if api.tokenErr != nil {
				return true, nil, api.tokenErr
			}
			u, ok := users[tr.Spec.Token]
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: ok, User: u}
			return true, tr, nil
		},
	)
	api.PrependReactor(
		"create",
		"subjectaccessreviews",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
			api.mu.Lock()
			defer api.mu.Unlock()
			api.sars++
			api.lastSAR = sar.Spec
			if api.sarErr != nil {
				return true, nil, api.sarErr
			}
			nr := sar.Spec.NonResourceAttributes
			if sar.Spec.User == "alice" && nr != nil && nr.Verb == "get" &&
				(nr.Path == "/metrics" || strings.HasPrefix(nr.Path, "/debug/pprof/")) {
				sar.Status = authorizationv1.SubjectAccessReviewStatus{
					Allowed: true,
					Reason:  "test allows alice",
				}
			} else {
				sar.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
			}
			return true, sar, nil
		},
	)
	return api
}

func (api *fakeAPI) counts() (tokenReviews, sars int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.tokenReviews, api.sars
}

func (api *fakeAPI) setErrors(tokenErr, sarErr error) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.tokenErr, api.sarErr = tokenErr, sarErr
}

func (api *fakeAPI) authConfig(t *testing.T) AuthConfig {
	return AuthConfig{
		TokenReviews:         api.AuthenticationV1().TokenReviews(),
		SubjectAccessReviews: api.AuthorizationV1().SubjectAccessReviews(),
		Log:                  testr.New(t),
	}
}

// echo is the handler behind the filter: it answers 200 with the user it
// was given, and fails the request if the token leaked through.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		http.Error(w, "Authorization header reached the handler", http.StatusInternalServerError)
		return
	}
	u, _ := UserFrom(r.Context())
	_, _ = w.Write([]byte("user=" + u.Username))
})

func do(h http.Handler, method, path, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func mustFilter(t *testing.T, cfg AuthConfig) *AuthFilter {
	t.Helper()
	f, err := NewAuthFilter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAuthFilter(t *testing.T) {
	for _, tc := range []struct {
		name              string
		method, path, tok string
		tokenErr, sarErr  error
		wantCode          int
		wantBody          string
		wantTR, wantSAR   int
	}{
		{name: "health without token", path: "/healthz", wantCode: 200, wantBody: "user="},
		{name: "health check sub-path without token", path: "/readyz/informer-sync", wantCode: 200},
		{name: "livez trailing slash", path: "/livez/", wantCode: 200},
		{name: "health path with a bad token still open", path: "/healthz", tok: "bogus", wantCode: 200},
		{name: "dot segments do not ride on an open prefix", path: "/healthz/../metrics", wantCode: 401},
		{name: "double slash is not open", path: "//healthz", wantCode: 401},
		{name: "similar prefix is not open", path: "/healthzx", wantCode: 401},
		{name: "metrics without token", path: "/metrics", wantCode: 401},
		{name: "metrics with unknown token", path: "/metrics", tok: "bogus", wantCode: 401, wantTR: 1},
		{name: "metrics allowed", path: "/metrics", tok: aliceToken, wantCode: 200, wantBody: "user=alice", wantTR: 1, wantSAR: 1},
		{name: "metrics denied", path: "/metrics", tok: bobToken, wantCode: 403,
			wantBody: `user "bob" cannot get path "/metrics": no RBAC policy matched`, wantTR: 1, wantSAR: 1},
		{name: "verb is the lower-cased method", method: "POST", path: "/metrics", tok: aliceToken, wantCode: 403,
			wantBody: `cannot post path`, wantTR: 1, wantSAR: 1},
		{name: "system:masters needs no SubjectAccessReview", path: "/anything", tok: rootToken, wantCode: 200,
			wantBody: "user=root", wantTR: 1},
		{name: "TokenReview error fails closed", path: "/metrics", tok: aliceToken, tokenErr: errors.New("apiserver down"),
			wantCode: 401, wantTR: 1},
		{name: "SubjectAccessReview error fails closed", path: "/metrics", tok: aliceToken, sarErr: errors.New("apiserver down"),
			wantCode: 403, wantBody: "authorization check failed", wantTR: 1, wantSAR: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI()
			api.setErrors(tc.tokenErr, tc.sarErr)
			h := mustFilter(t, api.authConfig(t)).Wrap(echo)
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			w := do(h, method, tc.path, tc.tok)
			if w.Code != tc.wantCode || !strings.Contains(w.Body.String(), tc.wantBody) {
				t.Errorf(
					"%s %s = %d %q, want %d containing %q",
					method,
					tc.path,
					w.Code,
					w.Body.String(),
					tc.wantCode,
					tc.wantBody,
				)
			}
			if w.Code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if tr, sar := api.counts(); tr != tc.wantTR || sar != tc.wantSAR {
				t.Errorf(
					"API calls: %d TokenReviews, %d SubjectAccessReviews; want %d, %d",
					tr,
					sar,
					tc.wantTR,
					tc.wantSAR,
				)
			}
		})
	}
}

func TestAuthFilterSubjectAccessReviewCarriesTheUser(t *testing.T) {
	api := newFakeAPI()
	h := mustFilter(t, api.authConfig(t)).Wrap(echo)
	if w := do(h, http.MethodHead, "/metrics", aliceToken); w.Code != http.StatusForbidden {
		t.Fatalf("HEAD /metrics = %d, want 403 (alice may only get)", w.Code)
	}
	got := api.lastSAR
	if got.User != "alice" || got.UID != "uid-alice" || len(got.Groups) != 1 ||
		got.Groups[0] != "system:authenticated" ||
		len(got.Extra["scopes"]) != 2 ||
		got.NonResourceAttributes == nil ||
		*got.NonResourceAttributes != (authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "head"}) ||
		got.ResourceAttributes != nil {
		t.Errorf("SubjectAccessReview spec = %+v", got)
	}
}

func TestAuthFilterCache(t *testing.T) {
	const ttl = 10 * time.Second
	type step struct {
		advance         time.Duration
		tok, path       string
		wantCode        int
		wantTR, wantSAR int // cumulative
	}
	for _, tc := range []struct {
		name  string
		cfg   func(*AuthConfig)
		steps []step
	}{
		{name: "allowed decision cached for its TTL", steps: []step{
			{tok: aliceToken, path: "/metrics", wantCode: 200, wantTR: 1, wantSAR: 1},
			{advance: ttl - time.Millisecond, tok: aliceToken, path: "/metrics", wantCode: 200, wantTR: 1, wantSAR: 1},
			{advance: 2 * time.Millisecond, tok: aliceToken, path: "/metrics", wantCode: 200, wantTR: 2, wantSAR: 2},
		}},
		{name: "authorization keyed by path", steps: []step{
			{tok: aliceToken, path: "/metrics", wantCode: 200, wantTR: 1, wantSAR: 1},
			{tok: aliceToken, path: "/other", wantCode: 403, wantTR: 1, wantSAR: 2},
			{tok: aliceToken, path: "/other", wantCode: 403, wantTR: 1, wantSAR: 2},
		}},
		{name: "denial has its own TTL", cfg: func(c *AuthConfig) { c.UnauthorizedCacheTTL = time.Second }, steps: []step{
			{tok: bobToken, path: "/metrics", wantCode: 403, wantTR: 1, wantSAR: 1},
			{advance: 2 * time.Second, tok: bobToken, path: "/metrics", wantCode: 403, wantTR: 1, wantSAR: 2},
		}},
		{name: "unauthenticated token cached", steps: []step{
			{tok: "bogus", path: "/metrics", wantCode: 401, wantTR: 1},
			{tok: "bogus", path: "/metrics", wantCode: 401, wantTR: 1},
			{advance: ttl + time.Millisecond, tok: "bogus", path: "/metrics", wantCode: 401, wantTR: 2},
		}},
		{name: "negative TTLs disable caching", cfg: func(c *AuthConfig) {
			c.TokenCacheTTL, c.AuthorizedCacheTTL, c.UnauthorizedCacheTTL = -1, -1, -1
		}, steps: []step{
			{tok: aliceToken, path: "/metrics", wantCode: 200, wantTR: 1, wantSAR: 1},
			{tok: aliceToken, path: "/metrics", wantCode: 200, wantTR: 2, wantSAR: 2},
		}},
		{name: "cache size bounds the entries", cfg: func(c *AuthConfig) { c.CacheSize = 1 }, steps: []step{
			{tok: aliceToken, path: "/metrics", wantCode: 200, wantTR: 1, wantSAR: 1},
			{tok: bobToken, path: "/metrics", wantCode: 403, wantTR: 2, wantSAR: 2},
			{tok: aliceToken, path: "/metrics", wantCode: 200, wantTR: 3, wantSAR: 3}, // evicted by bob
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI()
			clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
			cfg := api.authConfig(t)
			cfg.Clock = clk
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			h := mustFilter(t, cfg).Wrap(echo)
			for i, s := range tc.steps {
				clk.SetTime(clk.Now().Add(s.advance))
				w := do(h, http.MethodGet, s.path, s.tok)
				tr, sar := api.counts()
				if w.Code != s.wantCode || tr != s.wantTR || sar != s.wantSAR {
					t.Errorf(
						"step %d: GET %s = %d after %d TokenReviews, %d SubjectAccessReviews; want %d, %d, %d",
						i,
						s.path,
						w.Code,
						tr,
						sar,
						s.wantCode,
						s.wantTR,
						s.wantSAR,
					)
				}
			}
		})
	}
}

func TestAuthFilterErrorsAreNotCached(t *testing.T) {
	api := newFakeAPI()
	h := mustFilter(t, api.authConfig(t)).Wrap(echo)

	api.setErrors(errors.New("down"), nil)
	if w := do(h, http.MethodGet, "/metrics", aliceToken); w.Code != http.StatusUnauthorized {
		t.Fatalf("TokenReview failing: %d, want 401", w.Code)
	}
	api.setErrors(nil, errors.New("down"))
	if w := do(h, http.MethodGet, "/metrics", aliceToken); w.Code != http.StatusForbidden {
		t.Fatalf("SubjectAccessReview failing: %d, want 403", w.Code)
	}
	api.setErrors(nil, nil)
	if w := do(h, http.MethodGet, "/metrics", aliceToken); w.Code != http.StatusOK {
		t.Fatalf("API back: %d, want 200", w.Code)
	}
	// The failed TokenReview was retried; the successful one was then
	// cached, and the failed SubjectAccessReview retried.
	if tr, sar := api.counts(); tr != 2 || sar != 2 {
		t.Errorf("%d TokenReviews, %d SubjectAccessReviews; want 2, 2", tr, sar)
	}
}

// TestAuthFilterTokenReviewStatusError: the API server reports an invalid
// token as status.error ("invalid bearer token"); that is a 401, and, as in
// the apiserver library, not cached.
func TestAuthFilterTokenReviewStatusError(t *testing.T) {
	api := newFakeAPI()
	var calls atomic.Int32
	api.PrependReactor(
		"create",
		"tokenreviews",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			calls.Add(1)
			tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
			tr.Status.Error = "invalid bearer token"
			return true, tr, nil
		},
	)
	h := mustFilter(t, api.authConfig(t)).Wrap(echo)
	for range 2 {
		if w := do(h, http.MethodGet, "/metrics", "bogus"); w.Code != http.StatusUnauthorized {
			t.Errorf("TokenReview with status.error: %d, want 401", w.Code)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d TokenReviews for 2 requests, want 2 (no caching)", n)
	}
}

func TestAuthFilterRespectsRequestContext(t *testing.T) {
	api := newFakeAPI()
	api.PrependReactor(
		"create",
		"tokenreviews",
		func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, context.DeadlineExceeded
		},
	)
	h := mustFilter(t, api.authConfig(t)).Wrap(echo)
	if w := do(h, http.MethodGet, "/metrics", aliceToken); w.Code != http.StatusUnauthorized {
		t.Errorf("TokenReview timing out: %d, want 401", w.Code)
	}
}

func TestNewAuthFilterErrors(t *testing.T) {
	api := newFakeAPI()
	for _, tc := range []struct {
		name string
		cfg  AuthConfig
		want []string
	}{
		{name: "no clients", cfg: AuthConfig{}, want: []string{"TokenReviews is required", "SubjectAccessReviews is required"}},
		{name: "bad pattern", cfg: AuthConfig{
			TokenReviews:         api.AuthenticationV1().TokenReviews(),
			SubjectAccessReviews: api.AuthorizationV1().SubjectAccessReviews(),
			AlwaysAllowPaths:     []string{"/ok", "/a*b"},
		}, want: []string{`AlwaysAllowPaths: "a*b": only a trailing * is allowed`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewAuthFilter(tc.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestPathMatcher(t *testing.T) {
	m, err := newPathMatcher([]string{"/healthz", "livez", "/debug/*", "/"})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"/":             true,
		"/healthz":      true,
		"/healthz/":     false, // exact means exact, as in KCM
		"/healthz/x":    false,
		"/livez":        true,
		"/debug/":       true,
		"/debug/pprof/": true,
		"/debug":        false,
		"/debug/../x":   false,
		"/debug//x":     false,
		"/metrics":      false,
		"":              false,
	} {
		if got := m.match(path); got != want {
			t.Errorf("match(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestErrorLogIsRateLimited(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	var logged []string
	log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
	l := &errorLog{log: log, clock: clk, every: 10 * time.Second}
	for range 3 {
		l.report("authentication", "failed", errors.New("x"))
	}
	l.report("authorization", "failed", errors.New("y"))
	clk.SetTime(clk.Now().Add(10 * time.Second))
	l.report("authentication", "failed", errors.New("z"))
	want := [][]string{
		{`"kind"="authentication"`, `"suppressedSinceLastLog"=0`, `"error"="x"`},
		{`"kind"="authorization"`, `"suppressedSinceLastLog"=0`, `"error"="y"`},
		{`"kind"="authentication"`, `"suppressedSinceLastLog"=2`, `"error"="z"`},
	}
	if len(logged) != len(want) {
		t.Fatalf(
			"logged %d lines, want %d:\n%s",
			len(logged),
			len(want),
			strings.Join(logged, "\n"),
		)
	}
	for i, parts := range want {
		for _, p := range parts {
			if !strings.Contains(logged[i], p) {
				t.Errorf("log %d = %s, want it to contain %s", i, logged[i], p)
			}
		}
	}
}
