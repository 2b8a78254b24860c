package serving

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"os"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RequestHeaderOptions configure front-proxy authentication: a client
// certificate signed by ClientCAFile (and, when AllowedNames is not empty,
// with one of those common names) may assert the user in request headers,
// as the API server's aggregation layer does when it proxies a request.
type RequestHeaderOptions struct {
	// ClientCAFile is the PEM bundle of CAs that sign front-proxy client
	// certificates. Empty: no front-proxy authentication, unless looked up
	// in the cluster (see Options.SkipLookup).
	ClientCAFile string
	// AllowedNames are the client certificate common names allowed to
	// assert users; empty allows any certificate the CA signed.
	AllowedNames []string
	// UsernameHeaders, UIDHeaders, GroupHeaders are the headers to read the
	// user name, uid and groups from (the first non-empty username header
	// wins; groups accumulate); ExtraHeaderPrefixes prefix headers carrying
	// extra user information. Defaults: X-Remote-User, none, X-Remote-Group,
	// X-Remote-Extra-, as KCM.
	UsernameHeaders     []string
	UIDHeaders          []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
}

// Defaults of RequestHeaderOptions, as the apiserver library's.
var (
	DefaultRequestHeaderUsernameHeaders     = []string{"X-Remote-User"}
	DefaultRequestHeaderGroupHeaders        = []string{"X-Remote-Group"}
	DefaultRequestHeaderExtraHeaderPrefixes = []string{"X-Remote-Extra-"}
)

func (o RequestHeaderOptions) withDefaults() RequestHeaderOptions {
	if o.UsernameHeaders == nil {
		o.UsernameHeaders = slices.Clone(DefaultRequestHeaderUsernameHeaders)
	}
	if o.GroupHeaders == nil {
		o.GroupHeaders = slices.Clone(DefaultRequestHeaderGroupHeaders)
	}
	if o.ExtraHeaderPrefixes == nil {
		o.ExtraHeaderPrefixes = slices.Clone(DefaultRequestHeaderExtraHeaderPrefixes)
	}
	return o
}

// RequestHeaderConfig is front-proxy authentication ready for AuthConfig.
type RequestHeaderConfig struct {
	// CAs verify the proxy's client certificate. Required.
	CAs                 *x509.CertPool
	AllowedNames        []string
	UsernameHeaders     []string
	UIDHeaders          []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
}

// headers lists every header the config reads, so that they can be removed
// from every request.
func (c *RequestHeaderConfig) strip(h http.Header) {
	for _, name := range slices.Concat(c.UsernameHeaders, c.UIDHeaders, c.GroupHeaders) {
		h.Del(name)
	}
	for name := range h {
		for _, p := range c.ExtraHeaderPrefixes {
			if strings.HasPrefix(strings.ToLower(name), strings.ToLower(p)) {
				delete(h, name)
			}
		}
	}
}

// readCAs loads a PEM bundle of CA certificates; errors name flag and path.
func readCAs(flag, path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", flag, path, err)
	}
	return parseCAs(flag+" "+path, data)
}

func parseCAs(what string, data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf(
			"%s: no PEM-encoded certificate found; it must hold the CA certificate(s)",
			what,
		)
	}
	return pool, nil
}

// verifiedChains verifies r's client certificate against pool for client
// authentication; nil when r has none or it does not verify.
func verifiedChains(r *http.Request, pool *x509.CertPool) [][]*x509.Certificate {
	if pool == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil
	}
	return chains
}

// certUser is the user of a verified client certificate: its common name
// and, as groups, its organizations.
func certUser(r *http.Request, pool *x509.CertPool) (authenticationv1.UserInfo, bool) {
	if verifiedChains(r, pool) == nil {
		return authenticationv1.UserInfo{}, false
	}
	leaf := r.TLS.PeerCertificates[0]
	if leaf.Subject.CommonName == "" {
		return authenticationv1.UserInfo{}, false
	}
	return authenticationv1.UserInfo{
		Username: leaf.Subject.CommonName,
		Groups:   slices.Clone(leaf.Subject.Organization),
	}, true
}

// headerUser is the user a verified front proxy asserts in r's headers.
func headerUser(r *http.Request, c *RequestHeaderConfig) (authenticationv1.UserInfo, bool) {
	if c == nil || verifiedChains(r, c.CAs) == nil {
		return authenticationv1.UserInfo{}, false
	}
	if len(c.AllowedNames) > 0 &&
		!slices.Contains(c.AllowedNames, r.TLS.PeerCertificates[0].Subject.CommonName) {
		return authenticationv1.UserInfo{}, false
	}
	var u authenticationv1.UserInfo
	for _, h := range c.UsernameHeaders {
		if v := strings.TrimSpace(r.Header.Get(h)); v != "" {
			u.Username = v
			break
		}
	}
	if u.Username == "" {
		return authenticationv1.UserInfo{}, false
	}
	for _, h := range c.UIDHeaders {
		if v := strings.TrimSpace(r.Header.Get(h)); v != "" {
			u.UID = v
			break
		}
	}
	for _, h := range c.GroupHeaders {
		u.Groups = append(u.Groups, r.Header.Values(h)...)
	}
	for name, values := range r.Header {
		for _, p := range c.ExtraHeaderPrefixes {
			lower := strings.ToLower(name)
			if !strings.HasPrefix(lower, strings.ToLower(p)) {
				continue
			}
			if u.Extra == nil {
				u.Extra = map[string]authenticationv1.ExtraValue{}
			}
			key := strings.ToLower(unescapeExtraKey(lower[len(p):]))
			u.Extra[key] = append(u.Extra[key], values...)
		}
	}
	return u, true
}

// unescapeExtraKey undoes the percent-encoding the API server applies to
// extra keys in header names.
func unescapeExtraKey(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+3], "%02x", &v); err == nil {
				b.WriteByte(v)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// The ConfigMap in which the API server publishes its client CA and
// front-proxy settings.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
)

// lookedUp is what the cluster's authentication ConfigMap says.
type lookedUp struct {
	clientCAs     *x509.CertPool
	requestHeader *RequestHeaderConfig
}

// lookUp reads the API server's authentication ConfigMap. A missing
// ConfigMap, or missing keys, configure nothing; a failure to read it is an
// error naming the fix.
func lookUp(ctx context.Context, client kubernetes.Interface) (lookedUp, error) {
	cm, err := client.CoreV1().
		ConfigMaps(authConfigMapNamespace).
		Get(ctx, authConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return lookedUp{}, nil
	case err != nil:
		return lookedUp{}, fmt.Errorf(
			"looking up configmap/%s in %s for the client CA and front-proxy settings: %w; grant the "+
				"host's user the role %s/extension-apiserver-authentication-reader, or pass --client-ca-file "+
				"and --requestheader-client-ca-file, or --authentication-skip-lookup, or "+
				"--authentication-tolerate-lookup-failure",
			authConfigMapName,
			authConfigMapNamespace,
			err,
			authConfigMapNamespace,
		)
	}
	var out lookedUp
	var errs []error
	if data := cm.Data["client-ca-file"]; data != "" {
		if out.clientCAs, err = parseCAs("configmap "+authConfigMapName+" client-ca-file",
			[]byte(data)); err != nil {
			errs = append(errs, err)
		}
	}
	if data := cm.Data["requestheader-client-ca-file"]; data != "" {
		rh := &RequestHeaderConfig{}
		if rh.CAs, err = parseCAs("configmap "+authConfigMapName+" requestheader-client-ca-file",
			[]byte(data)); err != nil {
			errs = append(errs, err)
		}
		for key, into := range map[string]*[]string{
			"requestheader-allowed-names":        &rh.AllowedNames,
			"requestheader-username-headers":     &rh.UsernameHeaders,
			"requestheader-uid-headers":          &rh.UIDHeaders,
			"requestheader-group-headers":        &rh.GroupHeaders,
			"requestheader-extra-headers-prefix": &rh.ExtraHeaderPrefixes,
		} {
			if v := cm.Data[key]; v != "" {
				if err := json.Unmarshal([]byte(v), into); err != nil {
					errs = append(
						errs,
						fmt.Errorf(
							"configmap %s %s: not a JSON list of strings: %w",
							authConfigMapName,
							key,
							err,
						),
					)
				}
			}
		}
		for _, hs := range []*[]string{&rh.UsernameHeaders, &rh.UIDHeaders, &rh.GroupHeaders,
			&rh.ExtraHeaderPrefixes} {
			for i, h := range *hs {
				(*hs)[i] = textproto.CanonicalMIMEHeaderKey(h)
			}
		}
		out.requestHeader = rh
	}
	return out, errors.Join(errs...)
}
