// Command demo is what `make demo` runs: a local control plane (etcd and
// kube-apiserver from testenv) and two replicas of the example controller
// manager (examples/kcm, every built-in controller, KCM's flags) against it.
// It walks through a short scenario, printing what happens, and cleans up.
//
//	go run ./hack/demo            # scripted walk-through, then exit
//	go run ./hack/demo --hold     # keep everything running until Ctrl-C
package main

import (
	"context"
	"crypto/tls"
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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/testenv"
)

func main() {
	hold := flag.Bool(
		"hold",
		false,
		"keep the control plane and the controller managers running until interrupted",
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

// replica is one controller-manager process.
type replica struct {
	name   string
	port   int
	cmd    *exec.Cmd
	exited chan error
}

func run(ctx context.Context, hold bool) (err error) {
	out := filepath.Join("_output", "demo")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}

	step("Building the example controller manager (examples/kcm: every built-in, KCM's flags)")
	bin, _ := filepath.Abs(filepath.Join(out, "kube-controller-manager"))
	if err := runCmd(ctx, "go", "build", "-o", bin, "./examples/kcm"); err != nil {
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
	caFile := filepath.Join(env.Dir(), "ca.crt")
	fmt.Printf(
		"    ready in %v at %s\n    kubeconfig: %s\n",
		time.Since(start).Round(time.Millisecond),
		env.APIServerURL(),
		kubeconfig,
	)
	client := kubernetes.NewForConfigOrDie(env.Config())
	adminToken, err := env.Token(testenv.AdminUser)
	if err != nil {
		return err
	}

	var replicas []*replica
	defer func() {
		for _, r := range replicas {
			if r.cmd.ProcessState == nil {
				_ = r.cmd.Process.Signal(syscall.SIGTERM)
				<-r.exited
			}
		}
	}()
	for _, name := range []string{"kcm-a", "kcm-b"} {
		port, err := freePort()
		if err != nil {
			return err
		}
		args := []string{
			"--kubeconfig=" + kubeconfig, "--controllers=*,tokencleaner", "--leader-elect=true",
			"--root-ca-file=" + caFile, "--secure-port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
			"--concurrent-replicaset-syncs=5", "--terminated-pod-gc-threshold=12500",
		}
		step("Starting replica %s: kube-controller-manager %s", name, strings.Join(args, " "))
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = prefixed("    ["+name+"] "), prefixed("    ["+name+"] ")
		if err := cmd.Start(); err != nil {
			return err
		}
		r := &replica{name: name, port: port, cmd: cmd, exited: make(chan error, 1)}
		go func() { r.exited <- cmd.Wait() }()
		replicas = append(replicas, r)
	}

	step(
		"Waiting for both replicas to be ready (the leader runs the controllers; the " +
			"follower knows its leader)",
	)
	for _, r := range replicas {
		if err := poll(ctx, 60*time.Second, func() bool {
			code, _ := get(r.url("/readyz"), "")
			return code == 200
		}); err != nil {
			return fmt.Errorf("%s never became ready: %w", r.name, err)
		}
	}
	leader, follower, err := whoLeads(replicas, adminToken)
	if err != nil {
		return err
	}
	fmt.Printf("    leader: %s, follower: %s\n", leader.name, follower.name)
	_, body := get(leader.url("/readyz?verbose"), "")
	fmt.Printf(
		"    GET https://127.0.0.1:%d/readyz?verbose (no credentials needed)\n%s\n",
		leader.port,
		indent(body),
	)
	code, _ := get(leader.url("/metrics"), "")
	fmt.Printf("    GET /metrics without a token: %d; with the admin token: ", code)
	code, body = get(leader.url("/metrics"), adminToken)
	fmt.Printf(
		"%d, %d lines, e.g.\n%s\n",
		code,
		strings.Count(body, "\n"),
		indent(
			grepLines(
				body,
				"kube_controller_manager_controller_running",
				"leader_election_master_status",
			),
		),
	)

	step(
		"Creating namespace demo: the serviceaccount and root-ca-cert-publisher controllers fill it",
	)
	if _, err := client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := poll(ctx, 30*time.Second, func() bool {
		_, e1 := client.CoreV1().ServiceAccounts("demo").Get(ctx, "default", metav1.GetOptions{})
		_, e2 := client.CoreV1().ConfigMaps("demo").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return e1 == nil && e2 == nil
	}); err != nil {
		return errors.New(
			"namespace demo never got its default ServiceAccount and kube-root-ca.crt",
		)
	}
	fmt.Println("    serviceaccount/default and configmap/kube-root-ca.crt exist")

	step(
		"Creating ReplicaSet demo/web with 3 replicas (no kubelet here: pods are created, never run)",
	)
	three := int32(3)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &three,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{
						{Name: "web", Image: "registry.k8s.io/pause:3.10"},
					},
				},
			},
		},
	}
	if _, err := client.AppsV1().ReplicaSets("demo").Create(ctx, rs,
		metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitPods(ctx, client, 3); err != nil {
		return err
	}

	if hold {
		step("Holding; press Ctrl-C to stop (kubectl --kubeconfig=%s works meanwhile)", kubeconfig)
		<-ctx.Done()
		return nil
	}

	step(
		"SIGTERM to the leader %s: it stops its controllers, releases the lease, the follower takes over",
		leader.name,
	)
	t0 := time.Now()
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-leader.exited:
		fmt.Printf(
			"    %s exited in %v (%v)\n",
			leader.name,
			time.Since(t0).Round(time.Millisecond),
			exitStatus(err),
		)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s did not exit within 30s of SIGTERM", leader.name)
	}
	if err := poll(ctx, 30*time.Second, func() bool {
		_, body := get(follower.url("/metrics"), adminToken)
		return strings.Contains(body, `leader_election_master_status{name="kube-controller-manager"} 1`)
	}); err != nil {
		return errors.New("the follower never took over")
	}
	fmt.Printf(
		"    %s leads %v after the SIGTERM\n",
		follower.name,
		time.Since(t0).Round(time.Millisecond),
	)

	step("Scaling demo/web to 1: the new leader removes 2 pods")
	if _, err := client.AppsV1().ReplicaSets("demo").Patch(ctx, "web", "application/merge-patch+json",
		[]byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	if err := waitPods(ctx, client, 1); err != nil {
		return err
	}

	step("Stopping %s and the control plane", follower.name)
	_ = follower.cmd.Process.Signal(syscall.SIGTERM)
	fmt.Printf("    %s: %v\n", follower.name, exitStatus(<-follower.exited))
	return nil
}

func (r *replica) url(
	path string,
) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", r.port, path)
}

// whoLeads asks each replica's /metrics which one holds the lease.
func whoLeads(rs []*replica, token string) (leader, follower *replica, err error) {
	for _, r := range rs {
		_, body := get(r.url("/metrics"), token)
		if strings.Contains(
			body,
			`leader_election_master_status{name="kube-controller-manager"} 1`,
		) {
			leader = r
		} else {
			follower = r
		}
	}
	if leader == nil || follower == nil {
		return nil, nil, errors.New("could not tell the leader from the follower")
	}
	return leader, follower, nil
}

func waitPods(ctx context.Context, client kubernetes.Interface, want int) error {
	sel := labels.SelectorFromSet(labels.Set{"app": "web"}).String()
	var n int
	err := poll(ctx, 30*time.Second, func() bool {
		pods, err := client.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false
		}
		n = 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				n++
			}
		}
		return n == want
	})
	if err != nil {
		return fmt.Errorf("want %d pods of demo/web, have %d", want, n)
	}
	fmt.Printf("    demo/web has %d pods\n", want)
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

// get fetches url from a replica. The replicas serve a self-signed
// certificate generated at start, on loopback, so the demo does not verify
// it; a real deployment passes --tls-cert-file / --tls-private-key-file.
func get(url, token string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true,
		}, //nolint:gosec // demo on loopback, see above
	}}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
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

func grepLines(body string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
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
