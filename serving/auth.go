package serving

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
)

// AuthConfig configures NewAuthFilter. Zero fields take the defaults their
// comments state.
type AuthConfig struct {
	// TokenReviews creates the TokenReviews that authenticate bearer
	// tokens. Required.
	TokenReviews authenticationv1client.TokenReviewInterface
	// SubjectAccessReviews creates the SubjectAccessReviews that authorize
	// requests. Required.
	SubjectAccessReviews authorizationv1client.SubjectAccessReviewInterface

	// ClientCAs, when set, authenticate requests with a client certificate
	// they sign (for client authentication): the user is the certificate's
	// common name, its organizations the groups. The server must request
	// client certificates (Server does when this is set).
	ClientCAs *x509.CertPool
	// RequestHeader, when set, lets a front proxy with a certificate its
	// CAs sign assert the user in request headers. Its headers are removed
	// from every request before the handler sees it.
	RequestHeader *RequestHeaderConfig

	// AlwaysAllowPaths are passed through without credentials; see
	// Options.AlwaysAllowPaths. Default: DefaultAlwaysAllowPaths. An empty
	// non-nil slice opens nothing.
	AlwaysAllowPaths []string
	// AlwaysAllowGroups are allowed every path without a
	// SubjectAccessReview. Default: DefaultAlwaysAllowGroups. An empty
	// non-nil slice allows no group this way.
	AlwaysAllowGroups []string

	// TokenCacheTTL, AuthorizedCacheTTL, UnauthorizedCacheTTL: how long
	// answers are cached. Default: 10s each; negative disables that cache.
	// Errors are never cached.
	TokenCacheTTL        time.Duration
	AuthorizedCacheTTL   time.Duration
	UnauthorizedCacheTTL time.Duration
	// CacheSize bounds each of the two caches, in entries; the least
	// recently used entry goes first. Default: 4096.
	CacheSize int
	// ReviewTimeout bounds each TokenReview and SubjectAccessReview call.
	// Default: 10s.
	ReviewTimeout time.Duration
	// ErrorLogInterval is the least time between two logs of review
	// failures of one kind; failures in between are counted and the count
	// logged with the next. Default: 10s.
	ErrorLogInterval time.Duration

	// Clock times cache entries and error logs. Default: the real clock.
	Clock clock.PassiveClock
	// Log receives review failures (Error) and decisions (V(4)).
	// Default: discard.
	Log logr.Logger
}

// Defaults of AuthConfig beyond those shared with Options.
const (
	DefaultCacheSize        = 4096
	DefaultReviewTimeout    = 10 * time.Second
	DefaultErrorLogInterval = 10 * time.Second
)

func (c AuthConfig) withDefaults() AuthConfig {
	c.AlwaysAllowPaths = copyOr(c.AlwaysAllowPaths, DefaultAlwaysAllowPaths)
	c.AlwaysAllowGroups = copyOr(c.AlwaysAllowGroups, DefaultAlwaysAllowGroups)
	for _, ttl := range []*time.Duration{&c.TokenCacheTTL, &c.AuthorizedCacheTTL,
		&c.UnauthorizedCacheTTL} {
		if *ttl == 0 {
			*ttl = DefaultCacheTTL
		}
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.ReviewTimeout == 0 {
		c.ReviewTimeout = DefaultReviewTimeout
	}
	if c.ErrorLogInterval == 0 {
		c.ErrorLogInterval = DefaultErrorLogInterval
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return c
}

// AuthFilter authenticates and authorizes requests by delegating to the API
// server, as kube-controller-manager does for its secure port. Build one
// with NewAuthFilter and put it in front of a handler with Wrap. It is safe
// for concurrent use.
type AuthFilter struct {
	cfg      AuthConfig
	open     pathMatcher
	tokens   *cache.LRUExpireCache // [32]byte token hash → authnResult
	verdicts *cache.LRUExpireCache // [32]byte attributes hash → authzResult
	errLog   *errorLog
}

type authnResult struct {
	ok   bool
	user authenticationv1.UserInfo
}

type authzResult struct {
	allowed bool
	reason  string
}

// NewAuthFilter validates cfg and returns the filter. Errors name the
// field.
func NewAuthFilter(cfg AuthConfig) (*AuthFilter, error) {
	cfg = cfg.withDefaults()
	var errs []error
	if cfg.TokenReviews == nil {
		errs = append(errs, errors.New("AuthConfig.TokenReviews is required"))
	}
	if cfg.RequestHeader != nil && cfg.RequestHeader.CAs == nil {
		errs = append(
			errs,
			errors.New("AuthConfig.RequestHeader.CAs is required when RequestHeader is set"),
		)
	}
	if cfg.SubjectAccessReviews == nil {
		errs = append(errs, errors.New("AuthConfig.SubjectAccessReviews is required"))
	}
	open, err := newPathMatcher(cfg.AlwaysAllowPaths)
	if err != nil {
		errs = append(errs, fmt.Errorf("AuthConfig.AlwaysAllowPaths: %w", err))
	}
	if cfg.CacheSize < 0 {
		errs = append(
			errs,
			fmt.Errorf("AuthConfig.CacheSize must not be negative, got %d", cfg.CacheSize),
		)
	}
	if cfg.ReviewTimeout < 0 {
		errs = append(
			errs,
			fmt.Errorf("AuthConfig.ReviewTimeout must not be negative, got %v", cfg.ReviewTimeout),
		)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &AuthFilter{
		cfg:      cfg,
		open:     open,
		tokens:   cache.NewLRUExpireCacheWithClock(cfg.CacheSize, cfg.Clock),
		verdicts: cache.NewLRUExpireCacheWithClock(cfg.CacheSize, cfg.Clock),
		errLog:   &errorLog{log: cfg.Log, clock: cfg.Clock, every: cfg.ErrorLogInterval},
	}, nil
}

// Wrap returns next behind the filter: always-allowed paths pass as they
// are; other requests pass only with an authenticated and authorized
// bearer token, without their Authorization header and with the user in
// their context (see UserFrom). Others get 401 or 403.
func (f *AuthFilter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.open.match(r.URL.Path) {
			next.ServeHTTP(w, f.withoutCredentials(r.Context(), r))
			return
		}
		user, ok := f.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ctrlhost"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(r.Method) // as the API server does for non-resource requests
		if allowed, reason := f.authorize(r.Context(), user, r.URL.Path, verb); !allowed {
			msg := fmt.Sprintf(
				"Forbidden: user %q cannot %s path %q",
				user.Username,
				verb,
				r.URL.Path,
			)
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, f.withoutCredentials(withUser(r.Context(), user), r))
	})
}

// withoutCredentials returns r with ctx, without its Authorization header
// and without the front-proxy user headers, so that the wrapped handler can
// neither leak the caller's token nor trust an asserted user.
func (f *AuthFilter) withoutCredentials(ctx context.Context, r *http.Request) *http.Request {
	r = r.Clone(ctx)
	r.Header.Del("Authorization")
	if f.cfg.RequestHeader != nil {
		f.cfg.RequestHeader.strip(r.Header)
	}
	return r
}

// authenticate returns the user of r: asserted by a verified front proxy,
// else of a verified client certificate, else of its bearer token; false
// when none of them authenticates it.
func (f *AuthFilter) authenticate(r *http.Request) (authenticationv1.UserInfo, bool) {
	if u, ok := headerUser(r, f.cfg.RequestHeader); ok {
		return u, true
	}
	if u, ok := certUser(r, f.cfg.ClientCAs); ok {
		return u, true
	}
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		f.cfg.Log.V(4).Info("Unauthorized: no bearer token", "path", r.URL.Path)
		return authenticationv1.UserInfo{}, false
	}
	key := sha256.Sum256([]byte(token))
	if v, ok := f.tokens.Get(key); ok {
		res := v.(authnResult)
		return res.user, res.ok
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.cfg.ReviewTimeout)
	defer cancel()
	tr, err := f.cfg.TokenReviews.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		f.errLog.report("authentication", "TokenReview failed; answering 401", err)
		return authenticationv1.UserInfo{}, false
	}
	if !tr.Status.Authenticated && tr.Status.Error != "" {
		// The API server says why ("invalid bearer token", or a failing
		// authenticator behind it). Like the apiserver library, do not
		// cache it: it may be transient.
		f.cfg.Log.V(4).
			Info("Unauthorized: token not authenticated", "path", r.URL.Path, "error", tr.Status.Error)
		return authenticationv1.UserInfo{}, false
	}
	res := authnResult{ok: tr.Status.Authenticated, user: tr.Status.User}
	if f.cfg.TokenCacheTTL > 0 {
		f.tokens.Add(key, res, f.cfg.TokenCacheTTL)
	}
	if !res.ok {
		f.cfg.Log.V(4).Info("Unauthorized: token not authenticated", "path", r.URL.Path)
	}
	return res.user, res.ok
}

// authorize reports whether user may use verb on the non-resource path,
// and the reason the API server gave.
func (f *AuthFilter) authorize(
	ctx context.Context,
	user authenticationv1.UserInfo,
	path, verb string,
) (bool, string) {
	for _, g := range user.Groups {
		if slices.Contains(f.cfg.AlwaysAllowGroups, g) {
			return true, ""
		}
	}
	spec := authorizationv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		User:                  user.Username,
		Groups:                user.Groups,
		UID:                   user.UID,
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	// The whole spec is the key: JSON sorts the Extra map's keys.
	raw, err := json.Marshal(spec)
	if err != nil { // cannot happen for these types; fail closed anyway
		f.errLog.report(
			"authorization",
			"encoding the SubjectAccessReview failed; answering 403",
			err,
		)
		return false, ""
	}
	key := sha256.Sum256(raw)
	if v, ok := f.verdicts.Get(key); ok {
		res := v.(authzResult)
		return res.allowed, res.reason
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.ReviewTimeout)
	defer cancel()
	sar, err := f.cfg.SubjectAccessReviews.Create(
		ctx,
		&authorizationv1.SubjectAccessReview{Spec: spec},
		metav1.CreateOptions{},
	)
	if err != nil {
		f.errLog.report("authorization", "SubjectAccessReview failed; answering 403", err)
		return false, "authorization check failed"
	}
	res := authzResult{allowed: sar.Status.Allowed, reason: sar.Status.Reason}
	if ttl := f.ttl(res.allowed); ttl > 0 {
		f.verdicts.Add(key, res, ttl)
	}
	if !res.allowed {
		f.cfg.Log.V(4).Info("Forbidden", "user", user.Username, "verb", verb, "path", path,
			"reason", res.reason, "evaluationError", sar.Status.EvaluationError)
	}
	return res.allowed, res.reason
}

func (f *AuthFilter) ttl(allowed bool) time.Duration {
	if allowed {
		return f.cfg.AuthorizedCacheTTL
	}
	return f.cfg.UnauthorizedCacheTTL
}

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// header; the scheme is case-insensitive, as in the API server.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

type userKey struct{}

func withUser(ctx context.Context, u authenticationv1.UserInfo) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user an AuthFilter authenticated for the request
// whose context is ctx; false on always-allowed paths and without a filter.
func UserFrom(ctx context.Context) (authenticationv1.UserInfo, bool) {
	u, ok := ctx.Value(userKey{}).(authenticationv1.UserInfo)
	return u, ok
}

// pathMatcher matches request paths against KCM's
// --authorization-always-allow-paths patterns: an exact path, or a prefix
// ending in "*"; the leading "/" is optional.
type pathMatcher struct {
	exact    map[string]bool
	prefixes []string
}

func newPathMatcher(patterns []string) (pathMatcher, error) {
	m := pathMatcher{exact: map[string]bool{}}
	var errs []error
	for _, p := range patterns {
		p = strings.TrimPrefix(p, "/")
		if p == "" {
			m.exact[""] = true
			continue
		}
		if strings.Contains(p[:len(p)-1], "*") {
			errs = append(errs, fmt.Errorf("%q: only a trailing * is allowed", p))
			continue
		}
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			m.prefixes = append(m.prefixes, prefix)
		} else {
			m.exact[p] = true
		}
	}
	return m, errors.Join(errs...)
}

// match reports whether p is always allowed. Paths not in clean form
// (dot segments, double slashes) never match, so that "/healthz/../metrics"
// cannot ride on "/healthz/*" to a handler that does not clean paths.
func (m pathMatcher) match(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	if p != "/" && path.Clean(p) != strings.TrimSuffix(p, "/") {
		return false
	}
	p = p[1:]
	if m.exact[p] {
		return true
	}
	for _, prefix := range m.prefixes {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// errorLog logs failures of one kind at most once per interval, with the
// number suppressed since the last log.
type errorLog struct {
	log   logr.Logger
	clock clock.PassiveClock
	every time.Duration

	mu    sync.Mutex
	kinds map[string]*errorKind
}

type errorKind struct {
	last       time.Time
	suppressed int
}

func (l *errorLog) report(kind, msg string, err error) {
	l.mu.Lock()
	if l.kinds == nil {
		l.kinds = map[string]*errorKind{}
	}
	k := l.kinds[kind]
	now := l.clock.Now()
	if k != nil && now.Sub(k.last) < l.every {
		k.suppressed++
		l.mu.Unlock()
		return
	}
	if k == nil {
		k = &errorKind{}
		l.kinds[kind] = k
	}
	suppressed := k.suppressed
	k.last, k.suppressed = now, 0
	l.mu.Unlock()
	l.log.Error(err, msg, "kind", kind, "suppressedSinceLastLog", suppressed)
}
