package testenv

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// RestartAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after a
// grace period) and starts it again on the same port against the same
// etcd, so every rest.Config and kubeconfig handed out before keeps
// working; data survives. It returns once the new process is ready, or
// with an error when the port could not be reused, the process failed, ctx
// ended or Options.StartTimeout passed. It must not be called concurrently
// with any other method of e.
func (e *Env) RestartAPIServer(ctx context.Context) error {
	e.mu.Lock()
	stopped, old := e.stopped, e.apiserver
	e.mu.Unlock()
	if stopped {
		return fmt.Errorf("testenv: RestartAPIServer after Stop")
	}
	if old == nil {
		return fmt.Errorf("testenv: RestartAPIServer: no kube-apiserver was started")
	}
	path := old.cmd.Path
	_, portStr, err := net.SplitHostPort(strings.TrimPrefix(e.apiserverURL, "https://"))
	if err != nil {
		return fmt.Errorf("testenv: RestartAPIServer: parsing %q: %w", e.apiserverURL, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("testenv: RestartAPIServer: port of %q: %w", e.apiserverURL, err)
	}
	if _, err := old.stop(); err != nil {
		return fmt.Errorf("testenv: RestartAPIServer: stopping kube-apiserver: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	pick := e.opts.pickPorts
	e.opts.pickPorts = func(int) ([]int, error) { return []int{port}, nil }
	defer func() { e.opts.pickPorts = pick }()
	begin := time.Now()
	if err := e.startAPIServer(ctx, path); err != nil {
		return fmt.Errorf("testenv: RestartAPIServer on port %d: %w", port, err)
	}
	e.opts.Logf("testenv: kube-apiserver restarted at %s after %v", e.apiserverURL,
		time.Since(begin).Round(time.Millisecond))
	return nil
}
