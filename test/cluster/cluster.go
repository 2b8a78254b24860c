//go:build unix

package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
	"github.com/ctrlhost/ctrlhost/testenv"
)

const (
	// ClusterCIDR is the pod network: the controller manager's
	// --cluster-cidr (kubeadm's), node-ipam gives each node a /24 of it,
	// and kwok gives pods addresses from their node's range.
	ClusterCIDR = "10.244.0.0/16"

	defaultNodes        = 3
	defaultStartTimeout = 3 * time.Minute
	pollInterval        = 200 * time.Millisecond
	// nodeLeaseSeconds is the duration of the node Leases kwok renews.
	nodeLeaseSeconds = 40
)

// Options configures Start.
type Options struct {
	// Manager is the controller manager under test. Required.
	Manager Manager
	// ManagerBinary is its program. Default for Upstream: the
	// kube-controller-manager beside kube-apiserver (BuildCluster's); for
	// Native and DropIn it is required (BuildManagers builds both).
	ManagerBinary string
	// ExtraManagerArgs are appended to the controller manager's command
	// line, after kubeadm's flags.
	ExtraManagerArgs []string
	// ExtraSchedulerArgs are appended to kube-scheduler's command line,
	// such as --kube-api-qps for a load run.
	ExtraSchedulerArgs []string

	// Nodes is how many kwok nodes to create. Default: 3, or the sum of
	// NodeGroups' when they are given (Nodes must then be 0 or that sum).
	Nodes int
	// NodeGroups, if set, splits the nodes into groups whose kubelet is a
	// kwok process of their own, in order: node i (NodeName(i)) belongs
	// to the group its index falls in. FailNodeGroup kills one group's
	// kwok, which is how a test makes nodes fail: their Leases and status
	// are no longer renewed, and their pods are left as they were, as
	// when a node's kubelet dies. Default: one group of every node, run by
	// a kwok logging to kwok.log.
	NodeGroups []NodeGroup
	// NodeCPU, NodeMemory and NodePods are each node's capacity (and
	// allocatable). Defaults: 32 CPUs, 256Gi, 110 pods.
	NodeCPU, NodeMemory string
	NodePods            int
	// NodeCIDRMaskSize is the size of the pod range node-ipam gives each
	// node out of ClusterCIDR (the controller manager's
	// --node-cidr-mask-size, added to its command line unless it is
	// kubeadm's 24). It bounds Nodes (at most 250 for 24, 500 for 25, …)
	// and NodePods (at most the range's addresses). Default: 24.
	NodeCIDRMaskSize int

	// BinDir holds etcd, kube-apiserver (testenv's) and the cluster
	// binaries of testbin.BuildCluster. Default: testenv's directory.
	BinDir string
	// Dir receives the components' logs and files, and is kept; by
	// default a temporary directory is used and removed by Stop.
	Dir string
	// StartTimeout bounds Start. Default: 3 minutes.
	StartTimeout time.Duration
	// Logf receives progress lines. Default: discard.
	Logf func(format string, args ...any)
}

// NodeGroup is a group of nodes whose kubelet is one kwok process.
type NodeGroup struct {
	// Name names the group (a DNS label): its kwok logs to
	// kwok-<Name>.log, and its nodes carry NodeAnnotation=<Name>.
	Name string
	// Nodes is how many nodes it has (at least one).
	Nodes int
	// Labels are added to its nodes' labels, such as
	// topology.kubernetes.io/zone.
	Labels map[string]string
}

// defaultGroup is the annotation value of the nodes of a cluster started
// without NodeGroups: kwok's own convention.
const defaultGroup = "fake"

// Cluster is a running cluster: etcd and kube-apiserver (testenv), kwok
// with its nodes, kube-scheduler and one controller manager.
type Cluster struct {
	opts       Options
	env        *testenv.Env
	dir        string
	removeDir  bool
	kubeconfig string
	cs         kubernetes.Interface

	// The components, in the order they were started.
	procs []*process
	// kubelets are the kwok processes by node group.
	kubelets map[string]*process

	replicasMu sync.Mutex
	replicas   []*Replica
	writes     []Write // what the replicas' witnesses saw, in the order they saw it end
	writesMu   sync.Mutex

	stopOnce sync.Once
	stopErr  error
}

// Start starts a cluster and returns once it works end to end: every node
// is Ready, the controller manager answers /healthz, and a probe pod was
// scheduled, run by kwok and removed. On error everything started has been
// stopped; the error quotes the log of the component that failed.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	c := &Cluster{opts: opts, dir: opts.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "ctrlhost-cluster-"); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		c.removeDir = true
	} else if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := c.start(ctx); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return c, nil
}

func (o Options) withDefaults() (Options, error) {
	switch o.Manager {
	case Upstream, Native, DropIn, None:
	default:
		return o, fmt.Errorf("cluster: Options.Manager %q is none of %s, %s, %s, %s",
			o.Manager, Upstream, Native, DropIn, None)
	}
	if err := o.checkGroups(); err != nil {
		return o, err
	}
	if o.Nodes == 0 {
		o.Nodes = defaultNodes
	}
	if len(o.NodeGroups) == 0 {
		o.NodeGroups = []NodeGroup{{Name: defaultGroup, Nodes: o.Nodes}}
	}
	if o.NodeCIDRMaskSize == 0 {
		o.NodeCIDRMaskSize = 24
	}
	if o.NodeCIDRMaskSize < 17 || o.NodeCIDRMaskSize > 28 {
		return o, fmt.Errorf("cluster: Options.NodeCIDRMaskSize %d is not within 17-28 "+
			"(a node's range out of %s)", o.NodeCIDRMaskSize, ClusterCIDR)
	}
	// As many nodes as ranges, less a fortieth kept free as kubeadm's
	// 250 of 256 /24s do.
	if most := (1 << (o.NodeCIDRMaskSize - 16)) * 250 / 256; o.Nodes < 0 || o.Nodes > most {
		return o, fmt.Errorf("cluster: Options.Nodes %d is not within 1-%d (a /%d each of %s; "+
			"a larger NodeCIDRMaskSize makes room for more)", o.Nodes, most,
			o.NodeCIDRMaskSize, ClusterCIDR)
	}
	if o.NodeCPU == "" {
		o.NodeCPU = "32"
	}
	if o.NodeMemory == "" {
		o.NodeMemory = "256Gi"
	}
	if o.NodePods == 0 {
		o.NodePods = 110
	}
	if most := 1<<(32-o.NodeCIDRMaskSize) - 2; o.NodePods > most {
		return o, fmt.Errorf("cluster: Options.NodePods %d is more than a /%d holds (%d); "+
			"lower NodeCIDRMaskSize", o.NodePods, o.NodeCIDRMaskSize, most)
	}
	for _, q := range []string{o.NodeCPU, o.NodeMemory} {
		if _, err := resource.ParseQuantity(q); err != nil {
			return o, fmt.Errorf("cluster: node capacity %q: %w", q, err)
		}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = defaultStartTimeout
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.BinDir == "" {
		apiserver, _, err := testenv.BinaryPaths(testenv.Options{})
		if err != nil {
			return o, err
		}
		o.BinDir = filepath.Dir(apiserver)
	}
	if o.ManagerBinary == "" && o.Manager != None {
		if o.Manager != Upstream {
			return o, fmt.Errorf("cluster: Options.ManagerBinary is required for %s", o.Manager)
		}
		o.ManagerBinary = filepath.Join(o.BinDir, testbin.ControllerManagerBinary)
	}
	var missing []string
	for _, p := range []string{o.ManagerBinary, o.bin(testbin.SchedulerBinary),
		o.bin(testbin.KwokBinary)} {
		if p == "" {
			continue // no manager
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return o, fmt.Errorf("cluster: not executable: %s (make clusterbin builds the cluster "+
			"binaries; BuildManagers the native and drop-in controller managers)",
			strings.Join(missing, ", "))
	}
	return o, nil
}

// checkGroups checks NodeGroups, and sets Nodes to their sum.
func (o *Options) checkGroups() error {
	if len(o.NodeGroups) == 0 {
		return nil
	}
	sum := 0
	seen := map[string]bool{}
	for i, g := range o.NodeGroups {
		if errs := validation.IsDNS1123Label(g.Name); len(errs) > 0 {
			return fmt.Errorf("cluster: Options.NodeGroups[%d].Name %q: %s", i, g.Name,
				strings.Join(errs, "; "))
		}
		if seen[g.Name] {
			return fmt.Errorf("cluster: Options.NodeGroups[%d].Name %q is used twice", i, g.Name)
		}
		seen[g.Name] = true
		if g.Nodes < 1 {
			return fmt.Errorf("cluster: Options.NodeGroups[%d] (%s) has %d nodes; give it at least 1",
				i, g.Name, g.Nodes)
		}
		sum += g.Nodes
	}
	if o.Nodes != 0 && o.Nodes != sum {
		return fmt.Errorf("cluster: Options.Nodes is %d but NodeGroups have %d nodes; "+
			"leave Nodes 0 with NodeGroups", o.Nodes, sum)
	}
	o.Nodes = sum
	return nil
}

func (o Options) bin(name string) string { return filepath.Join(o.BinDir, name) }

func (c *Cluster) path(name string) string { return filepath.Join(c.dir, name) }

func (c *Cluster) start(ctx context.Context) error {
	begin := time.Now()
	env, err := testenv.Start(ctx, testenv.Options{BinDir: c.opts.BinDir, Logf: c.opts.Logf,
		StartTimeout: c.opts.StartTimeout})
	if err != nil {
		return err
	}
	c.env = env
	cfg := env.Config()
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.kubeconfig = c.path("admin.kubeconfig")
	if err := env.WriteKubeconfig(c.kubeconfig); err != nil {
		return err
	}
	if err := c.startKwok(); err != nil {
		return err
	}
	if err := c.createNodes(ctx); err != nil {
		return err
	}
	if err := c.startScheduler(); err != nil {
		return err
	}
	port := 0
	if c.opts.Manager != None {
		if port, err = freePort(); err != nil {
			return fmt.Errorf("cluster: a port for the controller manager: %w", err)
		}
		if err := c.startManager(port); err != nil {
			return err
		}
	}
	// From here on, a component that exits ends the wait with its log.
	for _, p := range c.procs {
		var cancel func()
		ctx, cancel = p.watch(ctx)
		defer cancel()
	}
	if err := c.waitNodesReady(ctx); err != nil {
		return err
	}
	if port != 0 {
		if err := waitHealthy(ctx, port); err != nil {
			return err
		}
	}
	// New nodes carry the not-ready taint until node-lifecycle removes it:
	// without a controller manager no pod is scheduled yet.
	if c.opts.Manager != None {
		if err := c.probe(ctx); err != nil {
			return err
		}
	}
	c.opts.Logf("cluster: %s with %d kwok nodes ready after %v (logs in %s)", c.opts.Manager,
		c.opts.Nodes, time.Since(begin).Round(time.Millisecond), c.dir)
	return nil
}

func (c *Cluster) run(name, path string, args, env []string) error {
	p, err := startProcess(name, path, args, env, c.path(name+".log"))
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	c.opts.Logf("cluster: started %s (pid %d)", name, p.cmd.Process.Pid)
	return nil
}

func (c *Cluster) startKwok() error {
	kubeVersion := testenv.KubernetesVersion
	versions, err := testbin.ClusterModuleVersions()
	if err != nil {
		return err
	}
	stages, err := renderStages(kubeVersion, versions.Kwok)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.path("kwok-stages.yaml"), stages, 0o644); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.kubelets = map[string]*process{}
	for _, g := range c.opts.NodeGroups {
		name := "kwok"
		if g.Name != defaultGroup {
			name += "-" + g.Name
		}
		// kwok reads ~/.kwok/kwok.yaml when it exists: each has a home of
		// its own.
		home := c.path(name + "-home")
		if err := os.MkdirAll(home, 0o755); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		err := c.run(name, c.opts.bin(testbin.KwokBinary), []string{
			"--kubeconfig=" + c.kubeconfig,
			"--config=" + c.path("kwok-stages.yaml"),
			"--manage-nodes-with-annotation-selector=" + NodeAnnotation + "=" + g.Name,
			"--cidr=" + ClusterCIDR,
			"--node-lease-duration-seconds=" + strconv.Itoa(nodeLeaseSeconds),
		}, []string{"HOME=" + home, "KWOK_WORKDIR=" + home})
		if err != nil {
			return err
		}
		c.kubelets[g.Name] = c.procs[len(c.procs)-1]
	}
	return nil
}

// NodeName is the name of the i-th kwok node.
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// createNodes registers the nodes, as kubelets would (with their capacity
// and address); kwok then reports them Ready and renews their Leases.
func (c *Cluster) createNodes(ctx context.Context) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(c.opts.NodeCPU),
		corev1.ResourceMemory: resource.MustParse(c.opts.NodeMemory),
		corev1.ResourcePods: *resource.NewQuantity(int64(c.opts.NodePods),
			resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	for i := range c.opts.Nodes {
		name := NodeName(i)
		group := c.groupOf(i)
		labels := map[string]string{
			"kubernetes.io/hostname": name,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			"type":                   "kwok",
		}
		maps.Copy(labels, group.Labels)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{NodeAnnotation: group.Name},
				Labels:      labels,
			},
			Status: corev1.NodeStatus{
				Capacity:    capacity,
				Allocatable: capacity,
				Addresses: []corev1.NodeAddress{
					{Type: corev1.NodeInternalIP,
						Address: fmt.Sprintf("10.200.%d.%d", i/250, i%250+1)},
					{Type: corev1.NodeHostName, Address: name},
				},
			},
		}
		if _, err := c.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("cluster: creating node %s: %w", name, err)
		}
	}
	return nil
}

// groupOf returns the node group of node i.
func (c *Cluster) groupOf(i int) NodeGroup {
	for _, g := range c.opts.NodeGroups {
		if i < g.Nodes {
			return g
		}
		i -= g.Nodes
	}
	panic(fmt.Sprintf("cluster: node %d is in no group", i)) // withDefaults makes them add up
}

// NodesOf returns the names of group's nodes, or nil if there is no such
// group.
func (c *Cluster) NodesOf(group string) []string {
	var out []string
	for i := range c.opts.Nodes {
		if c.groupOf(i).Name == group {
			out = append(out, NodeName(i))
		}
	}
	return out
}

// FailNodeGroup kills the kwok process of group (SIGKILL), as when a
// node's kubelet dies: its nodes' Leases and status are no longer
// renewed, and nothing acts on their pods any more. Stop does not count
// it as a component that failed.
func (c *Cluster) FailNodeGroup(group string) error {
	p, ok := c.kubelets[group]
	if !ok {
		return fmt.Errorf("cluster: no node group %q", group)
	}
	return p.kill()
}

func (c *Cluster) startScheduler() error {
	conf := c.path("scheduler.kubeconfig")
	if err := c.env.WriteClientCertKubeconfig(conf, "system:kube-scheduler"); err != nil {
		return err
	}
	args := append([]string{
		"--kubeconfig=" + conf,
		"--authentication-kubeconfig=" + conf,
		"--authorization-kubeconfig=" + conf,
		"--leader-elect=false",
		"--secure-port=0",
	}, c.opts.ExtraSchedulerArgs...)
	return c.run("kube-scheduler", c.opts.bin(testbin.SchedulerBinary), args, nil)
}

func (c *Cluster) startManager(port int) error {
	conf := c.path("controller-manager.kubeconfig")
	if err := c.env.WriteClientCertKubeconfig(conf, "system:kube-controller-manager"); err != nil {
		return err
	}
	args := append(c.managerArgs(conf), "--secure-port="+strconv.Itoa(port))
	args = append(args, c.opts.ExtraManagerArgs...)
	return c.run("controller-manager-"+string(c.opts.Manager), c.opts.ManagerBinary, args, nil)
}

// managerArgs is kubeadm's command line for a controller manager of this
// cluster, authenticating with kubeconfig.
func (c *Cluster) managerArgs(kubeconfig string) []string {
	args := KubeadmArgs(c.env.PKI(), kubeconfig)
	if c.opts.NodeCIDRMaskSize != 24 {
		args = append(args, "--node-cidr-mask-size="+strconv.Itoa(c.opts.NodeCIDRMaskSize))
	}
	return args
}

// waitNodesReady waits until kwok reports every node Ready.
func (c *Cluster) waitNodesReady(ctx context.Context) error {
	return poll(ctx, "every node Ready", func(ctx context.Context) (bool, error) {
		nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready < c.opts.Nodes {
			return false, fmt.Errorf("%d of %d nodes Ready", ready, c.opts.Nodes)
		}
		return true, nil
	})
}

// waitHealthy waits until the controller manager answers /healthz with
// 200 (it serves a self-signed certificate; /healthz needs no
// credentials).
func waitHealthy(ctx context.Context, port int) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	url := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/healthz"
	return poll(ctx, "the controller manager's /healthz", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("%s: %s", url, resp.Status)
		}
		return true, nil
	})
}

// probe runs a pod through the scheduler and kwok and deletes it, in a
// namespace of its own with a ServiceAccount it creates itself: the
// controller manager's part is not probed here (see ServiceAccountPreflight).
func (c *Cluster) probe(ctx context.Context) error {
	const ns, name = "cluster-probe", "probe"
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster: creating the probe namespace: %w", err)
	}
	if _, err := c.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster: creating the probe's ServiceAccount: %w", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName:           name,
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{
				{Name: "probe", Image: "registry.k8s.io/pause:3.10"},
			},
		},
	}
	if _, err := c.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster: creating the probe pod: %w", err)
	}
	err := poll(ctx, "the probe pod Running with an IP", func(ctx context.Context) (bool, error) {
		p, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return false, fmt.Errorf("on node %q, phase %s, IP %q", p.Spec.NodeName,
				p.Status.Phase, p.Status.PodIP)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if err := c.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("cluster: deleting the probe pod: %w", err)
	}
	return poll(ctx, "the probe pod gone", func(ctx context.Context) (bool, error) {
		_, err := c.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// ServiceAccountPreflight creates a namespace and waits up to timeout for
// the controller manager to give it its default ServiceAccount, which
// every pod of the namespace needs (the API server's admission refuses
// pods without it). Upstream's e2e framework waits for it in every test's
// namespace; a controller manager that does not make it fails every test.
func (c *Cluster) ServiceAccountPreflight(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "preflight-"}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cluster: creating the preflight namespace: %w", err)
	}
	return poll(ctx, "namespace "+ns.Name+"'s default ServiceAccount, made by "+
		string(c.opts.Manager), func(ctx context.Context) (bool, error) {
		_, err := c.cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}

// poll calls cond every pollInterval until it returns true or ctx ends;
// the error then names what was awaited, ctx's cause (a component's exit,
// the deadline) and cond's last error.
func poll(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, last := cond(ctx)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for %s: %w (last: %v)", what,
				context.Cause(ctx), last)
		case <-tick.C:
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Kubeconfig is the path of an administrator's kubeconfig (system:masters).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Config is an administrator's rest.Config.
func (c *Cluster) Config() *rest.Config { return c.env.Config() }

// Dir holds the components' logs (<component>.log) and files.
func (c *Cluster) Dir() string { return c.dir }

// Manager is the controller manager under test.
func (c *Cluster) Manager() Manager { return c.opts.Manager }

// Alive returns an error quoting the log of the first component that has
// exited on its own, or nil while all run (a failed node group's kwok
// excepted).
func (c *Cluster) Alive() error {
	for _, p := range c.procs {
		if p.failed() {
			return p.exitError()
		}
	}
	return nil
}

// Stop stops the components in the reverse order of their start (SIGTERM,
// SIGKILL after 10 s), then kube-apiserver and etcd, keeps the API server's
// log as kube-apiserver.log, and removes the directory if Start made it. It
// is bounded, idempotent, and safe on a nil Cluster. A component that
// exited on its own before Stop is reported as an error.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	var errs []error
	c.replicasMu.Lock()
	replicas := c.replicas
	c.replicasMu.Unlock()
	for _, r := range replicas {
		if _, err := r.proc.stop(); err != nil {
			errs = append(errs, err)
		}
		if err := r.witness.close(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p.exited() {
			if p.failed() {
				errs = append(errs, p.exitError())
			}
			continue
		}
		killed, err := p.stop()
		if err != nil {
			errs = append(errs, err)
		} else if killed {
			c.opts.Logf("cluster: %s ignored SIGTERM for %v and was killed", p.name, stopGrace)
		}
	}
	if c.env != nil {
		envErr := c.env.Stop()
		if err := os.WriteFile(c.path("kube-apiserver.log"), []byte(c.env.APIServerLog()),
			0o644); err != nil && !c.removeDir {
			errs = append(errs, err)
		}
		if envErr != nil {
			errs = append(errs, envErr)
		}
	}
	if c.removeDir {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
