package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// checkClient makes the readiness requests. It keeps no connections open
// between requests, so it leaves no goroutines behind.
type checkClient struct {
	client    *http.Client
	transport *http.Transport
}

// newCheckClient returns a client that trusts only the CA in caPEM, or a
// plain HTTP client when caPEM is nil.
func newCheckClient(caPEM []byte) (*checkClient, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	if caPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("testenv: the generated CA certificate does not parse")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &checkClient{client: &http.Client{Transport: tr}, transport: tr}, nil
}

func (c *checkClient) close() { c.transport.CloseIdleConnections() }

// get fetches url and returns the status code and up to 64 KiB of the body.
func (c *checkClient) get(ctx context.Context, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, string(body), nil
}

// etcdHealthy succeeds when etcd's /health reports a healthy member.
func (c *checkClient) etcdHealthy(ctx context.Context, base string) error {
	code, body, err := c.get(ctx, base+"/health", "")
	if err != nil {
		return err
	}
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		return fmt.Errorf("GET /health: %d: unexpected body %q", code, truncate(body, 200))
	}
	if code != http.StatusOK || h.Health != "true" {
		return fmt.Errorf("GET /health: %d: health=%s reason=%q", code, h.Health, h.Reason)
	}
	return nil
}

// apiserverReady succeeds when /readyz answers ok, which includes the RBAC
// bootstrap roles being in place, and the default and kube-system namespaces
// exist, so that callers can create objects there right away.
func (c *checkClient) apiserverReady(ctx context.Context, base, token string) error {
	code, body, err := c.get(ctx, base+"/readyz?verbose", token)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		var failing []string
		for line := range strings.Lines(body) {
			if strings.HasPrefix(line, "[-]") {
				failing = append(failing, strings.TrimSpace(line))
			}
		}
		if len(failing) == 0 {
			return fmt.Errorf("GET /readyz: %d: %s", code, truncate(strings.TrimSpace(body), 300))
		}
		return fmt.Errorf("GET /readyz: %d: %s", code, strings.Join(failing, "; "))
	}
	for _, ns := range []string{"default", "kube-system"} {
		code, body, err := c.get(ctx, base+"/api/v1/namespaces/"+ns, token)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("namespace %s: GET: %d: %s", ns, code, truncate(strings.TrimSpace(body), 300))
		}
	}
	return nil
}
