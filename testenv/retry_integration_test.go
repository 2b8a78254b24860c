//go:build integration

package testenv

import (
	"context"
	"net"
	"sync"
	"testing"
)

// TestPortTakenRetry makes the first ports picked for etcd and for
// kube-apiserver ones this test holds, so both lose the race, and checks
// that Start recovers with fresh ports.
func TestPortTakenRetry(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port

	var mu sync.Mutex
	calls := map[int]int{} // ports requested -> calls
	pick := func(n int) ([]int, error) {
		mu.Lock()
		calls[n]++
		first := calls[n] == 1
		mu.Unlock()
		ports, err := freePorts(n)
		if err == nil && first {
			ports[0] = taken
		}
		return ports, err
	}

	env, err := Start(context.Background(), Options{Logf: t.Logf, pickPorts: pick})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	mu.Lock()
	defer mu.Unlock()
	// etcd asks for two ports, kube-apiserver for one.
	if calls[2] != 2 || calls[1] != 2 {
		t.Errorf("port picks: %v, want two for etcd and two for kube-apiserver", calls)
	}
	if env.EtcdURL() == "http://"+loopback(taken) || env.APIServerURL() == "https://"+loopback(taken) {
		t.Errorf("env uses the taken port %d: %s %s", taken, env.EtcdURL(), env.APIServerURL())
	}
}
