// Command demo is what `make demo` runs: a local control plane (etcd and
// kube-apiserver from testenv) and the example controller manager against it.
// It walks through a short scenario, printing what happens, and cleans up.
//
//	go run ./hack/demo            # scripted walk-through, then exit
//	go run ./hack/demo --hold     # keep everything running until Ctrl-C
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/testenv"
)

func main() {
	hold := flag.Bool("hold", false, "keep the control plane and the controller manager running until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

func run(ctx context.Context, hold bool) (err error) {
	out := filepath.Join("_output", "demo")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}

	step("Building the example controller manager (examples/minimal)")
	bin, _ := filepath.Abs(filepath.Join(out, "minimal"))
	if err := runCmd(ctx, "go", "build", "-o", bin, "./examples/minimal"); err != nil {
		return err
	}

	step("Starting a local control plane: etcd + kube-apiserver %s", testenv.KubernetesVersion)
	start := time.Now()
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	kubeconfig, _ := filepath.Abs(filepath.Join(out, "kubeconfig"))
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	fmt.Printf("    ready in %v at %s\n    kubeconfig: %s\n", time.Since(start).Round(time.Millisecond), env.APIServerURL(), kubeconfig)

	port, err := freePort()
	if err != nil {
		return err
	}
	step("Running the controller manager: %s --kubeconfig=%s --secure-port=%d", bin, kubeconfig, port)
	cm := exec.Command(bin, "--kubeconfig="+kubeconfig, "--secure-port="+strconv.Itoa(port), "--controllers=*")
	cm.Stdout, cm.Stderr = prefixed("    [manager] "), prefixed("    [manager] ")
	if err := cm.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cm.Wait() }()
	defer func() {
		if cm.ProcessState == nil {
			_ = cm.Process.Signal(syscall.SIGTERM)
			<-exited
		}
	}()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	step("Waiting for %s/readyz", base)
	if err := poll(ctx, 30*time.Second, func() bool { code, _ := get(base + "/readyz"); return code == 200 }); err != nil {
		return fmt.Errorf("manager never became ready: %w", err)
	}
	for _, p := range []string{"/readyz?verbose", "/livez?verbose"} {
		_, body := get(base + p)
		fmt.Printf("    GET %s\n%s\n", p, indent(body))
	}

	step("Creating ConfigMap demo/hello; the controller logs it")
	client := kubernetes.NewForConfigOrDie(env.Config())
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := client.CoreV1().ConfigMaps("demo").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"}, Data: map[string]string{"greeting": "hi"},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}

	if hold {
		step("Holding; press Ctrl-C to stop (kubectl --kubeconfig=%s works meanwhile)", kubeconfig)
		select {
		case <-ctx.Done():
		case err := <-exited:
			return fmt.Errorf("controller manager exited: %v", err)
		}
	} else {
		// Give the log line a moment to appear by waiting for the manager to
		// have been up with the object in its cache: poll readiness again.
		_ = poll(ctx, 5*time.Second, func() bool { code, _ := get(base + "/readyz"); return code == 200 })
	}

	step("Sending SIGTERM to the controller manager; it stops its controllers within --controller-shutdown-timeout")
	t0 := time.Now()
	_ = cm.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		fmt.Printf("    exited in %v (%v)\n", time.Since(t0).Round(time.Millisecond), exitStatus(err))
	case <-time.After(20 * time.Second):
		_ = cm.Process.Kill()
		<-exited
		return errors.New("controller manager did not exit within 20s of SIGTERM")
	}
	step("Stopping the control plane")
	return nil
}

func runCmd(ctx context.Context, name string, args ...string) error {
	c := exec.CommandContext(ctx, name, args...)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	return c.Run()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func get(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

func indent(s string) string { return "      " + strings.ReplaceAll(s, "\n", "\n      ") }

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

type prefixWriter struct{ prefix string }

func prefixed(p string) io.Writer { return prefixWriter{p} }

func (w prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Println(w.prefix + line)
	}
	return len(b), nil
}
