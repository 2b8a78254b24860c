//go:build unix

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// LeaseName is the Lease the controller managers of a cluster contend for
// (kubeadm's command line keeps KCM's default).
const LeaseName = "kube-controller-manager"

// ReplicaOptions configures StartReplica.
type ReplicaOptions struct {
	// Name names the replica (its log is controller-manager-<Name>.log,
	// its writes carry it). Required, unique in the cluster.
	Name string
	// Manager is what it runs: Upstream, Native or DropIn.
	Manager Manager
	// Binary is its program; for Upstream, default the
	// kube-controller-manager beside kube-apiserver.
	Binary string
	// ExtraArgs are appended to kubeadm's command line.
	ExtraArgs []string
}

// Replica is a controller manager process started by StartReplica: one
// of several contending for the cluster's Lease, as the replicas of a
// control plane of several nodes do. It reaches the API server through a
// witness of its own, which records every write it sends (Cluster.Writes).
type Replica struct {
	name    string
	manager Manager
	proc    *process
	witness *witness
}

// StartReplica starts a controller manager with kubeadm's command line,
// its kubeconfig naming its own witness, and returns once it answers
// /healthz (it may follow or lead by then). Stop stops it, if the test did
// not.
func (c *Cluster) StartReplica(ctx context.Context, o ReplicaOptions) (*Replica, error) {
	switch o.Manager {
	case Upstream, Native, DropIn:
	default:
		return nil, fmt.Errorf("cluster: replica %q: Manager %q is none of %s, %s, %s", o.Name,
			o.Manager, Upstream, Native, DropIn)
	}
	if o.Binary == "" && o.Manager == Upstream {
		o.Binary = c.opts.bin("kube-controller-manager")
	}
	c.replicasMu.Lock()
	taken := o.Name == "" || slices.ContainsFunc(c.replicas, func(r *Replica) bool {
		return r.name == o.Name
	})
	c.replicasMu.Unlock()
	if taken || o.Binary == "" {
		return nil, fmt.Errorf("cluster: replica %q: a unique Name and a Binary are required",
			o.Name)
	}
	w, err := newWitness(o.Name, c.env.Config(), &c.writes, &c.writesMu)
	if err != nil {
		return nil, err
	}
	conf := c.path("controller-manager-" + o.Name + ".kubeconfig")
	if err := c.writeWitnessKubeconfig(conf, w); err != nil {
		_ = w.close()
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		_ = w.close()
		return nil, fmt.Errorf("cluster: a port for replica %s: %w", o.Name, err)
	}
	args := append(c.managerArgs(conf), "--secure-port="+strconv.Itoa(port))
	args = append(args, o.ExtraArgs...)
	name := "controller-manager-" + o.Name
	p, err := startProcess(name, o.Binary, args, nil, c.path(name+".log"))
	if err != nil {
		_ = w.close()
		return nil, err
	}
	r := &Replica{name: o.Name, manager: o.Manager, proc: p, witness: w}
	c.replicasMu.Lock()
	c.replicas = append(c.replicas, r)
	c.replicasMu.Unlock()
	c.opts.Logf("cluster: started replica %s (%s, pid %d)", o.Name, o.Manager, p.cmd.Process.Pid)
	ctx, cancel := p.watch(ctx)
	defer cancel()
	if err := waitHealthy(ctx, port); err != nil {
		return nil, fmt.Errorf("cluster: replica %s: %w", o.Name, err)
	}
	return r, nil
}

// writeWitnessKubeconfig writes the kubeconfig of system:kube-controller-manager
// with w as its server.
func (c *Cluster) writeWitnessKubeconfig(path string, w *witness) error {
	if err := c.env.WriteClientCertKubeconfig(path, "system:kube-controller-manager"); err != nil {
		return err
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = w.url()
		cl.CertificateAuthorityData = w.caPEM
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// Name is the replica's name.
func (r *Replica) Name() string { return r.name }

// Manager is what the replica runs.
func (r *Replica) Manager() Manager { return r.manager }

// Signal sends sig to the replica's process group. SIGTERM asks it to stop
// as a kubelet stopping a static pod does; SIGKILL is a crash.
func (r *Replica) Signal(sig syscall.Signal) error {
	if r.proc.exited() {
		return fmt.Errorf("cluster: replica %s has exited", r.name)
	}
	if err := syscall.Kill(-r.proc.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("cluster: signalling replica %s: %w", r.name, err)
	}
	return nil
}

// Exited is closed once the replica's process has ended.
func (r *Replica) Exited() <-chan struct{} { return r.proc.done }

// ExitErr is how the process ended (Wait's error); call it once Exited is
// closed.
func (r *Replica) ExitErr() error { return r.proc.err }

// Requests counts what the replica has asked of the API server so far
// (each restart of a replica is a replica of its own).
func (r *Replica) Requests() Requests { return r.witness.requests() }

// Usage is what a process has used so far.
type Usage struct {
	// CPU is its user and system time, every thread's.
	CPU time.Duration
	// PeakRSS is the high-water mark of its resident set, in bytes.
	PeakRSS int64
}

// Usage reads what the replica's process has used so far (Linux only: it
// reads /proc). The process must still run.
func (r *Replica) Usage() (Usage, error) {
	if r.proc.exited() {
		return Usage{}, fmt.Errorf("cluster: replica %s has exited", r.name)
	}
	return processUsage(r.proc.cmd.Process.Pid)
}

// LogPath is the replica's log file.
func (r *Replica) LogPath() string { return r.proc.logPath }

// Writes returns what the replicas' witnesses saw, ordered by when each
// write reached its witness.
func (c *Cluster) Writes() []Write {
	c.writesMu.Lock()
	out := slices.Clone(c.writes)
	c.writesMu.Unlock()
	slices.SortStableFunc(out, func(a, b Write) int { return a.At.Compare(b.At) })
	return out
}

// LeaseHolder returns the replica whose witness last passed a successful
// write of Lease lease (an acquisition or a renewal) received after since,
// or "" if none did.
func LeaseHolder(writes []Write, lease string, since time.Time) string {
	holder := ""
	for _, w := range writes {
		if !w.At.Before(since) && w.Code/100 == 2 && w.LeaseWrite(lease) &&
			w.Method != http.MethodDelete {
			holder = w.Replica
		}
	}
	return holder
}
