//go:build conformance && unix

package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/test/cluster"
)

var upgradeToFlag = flag.String("cluster.upgrade-to", string(cluster.Native),
	"TestRollingUpgrade: the ctrlhost controller manager upstream KCM is upgraded to: "+
		"native or dropin")

// handover is one change of leader in TestRollingUpgrade, each figure from
// the signal.
type handover struct {
	why        string // "SIGTERM", "SIGKILL" or "upgrade (SIGTERM)"
	composed   string // the replicas running when it began, as "2 upstream + 1 native"
	from, to   string
	acquired   time.Duration // the new leader's first Lease write
	firstWrite time.Duration // its controllers' first write
	converged  time.Duration // the Deployment scaled after the acquisition has every pod Ready
}

// TestRollingUpgrade upgrades a control plane of three controller manager
// replicas from upstream KCM to ctrlhost one replica at a time, as a
// distribution rolls its control-plane nodes: 2 upstream + 1 ctrlhost,
// then 1 + 2, then 0 + 3, all contending for the one
// kube-controller-manager Lease. At each step the leader is stopped with
// SIGTERM (and restarted, as a kubelet restarts a static pod), then the
// new leader with SIGKILL (a crash); between steps an upstream replica is
// replaced by a ctrlhost one. Every replica reaches the API server through
// a witness that records its writes: at no time may two replicas write as
// controllers (cluster.Overlaps finds none), every handover must end with
// a new leader whose controllers act (a Deployment scaled after it took
// the Lease has every pod Ready), and the test reports how long each
// handover took (docs/upstream.md).
func TestRollingUpgrade(t *testing.T) {
	to := cluster.Manager(*upgradeToFlag)
	bins, err := cluster.BuildManagers(t.Context(), t.TempDir(), os.Stderr, to)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if *dirFlag != "" {
		dir = *dirFlag
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Manager: cluster.None, Nodes: 3,
		Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	u := &upgrade{t: t, c: c, cs: kubernetes.NewForConfigOrDie(c.Config()), to: to,
		binary: bins[to], count: map[cluster.Manager]int{}}
	for _, m := range []cluster.Manager{cluster.Upstream, cluster.Upstream, to} {
		u.start(m)
	}
	if err := c.ServiceAccountPreflight(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	u.createWorkload()

	for step := range 3 {
		if step > 0 {
			u.replaceOneUpstream()
		}
		for _, sig := range []struct {
			sig  syscall.Signal
			name string
		}{{syscall.SIGTERM, "SIGTERM"}, {syscall.SIGKILL, "SIGKILL"}} {
			leader := u.leader()
			u.handover(leader, sig.sig, sig.name)
			u.start(leader.Manager()) // the node's static pod comes back
		}
	}

	writes := c.Writes()
	if over := cluster.Overlaps(writes, cluster.LeaseName); len(over) > 0 {
		for _, w := range over[:min(len(over), 20)] {
			t.Errorf("%s wrote after another replica had written since its last write: %s %s "+
				"at %s (%d)", w.Replica, w.Method, w.Path, w.At.Format(time.RFC3339Nano), w.Code)
		}
		t.Fatalf("%d writes of a replica overlapped another's, of %d writes", len(over),
			len(writes))
	}
	if wrong := cluster.NotHolding(writes, cluster.LeaseName); len(wrong) > 0 {
		for _, w := range wrong[:min(len(wrong), 20)] {
			t.Errorf("%s wrote while another replica held the Lease: %s %s at %s (%d, %s)",
				w.Replica, w.Method, w.Path, w.At.Format(time.RFC3339Nano), w.Code, w.UserAgent)
		}
		t.Fatalf("%d writes of a replica that did not hold the Lease, of %d writes", len(wrong),
			len(writes))
	}
	table := u.table()
	t.Logf("rolling upgrade, %d writes witnessed, none overlapping, each by the Lease's "+
		"holder; each handover from its signal:\n%s", len(writes), table)
	writeReport(t, table)
}

// upgrade is the state of TestRollingUpgrade.
type upgrade struct {
	t      *testing.T
	c      *cluster.Cluster
	cs     kubernetes.Interface
	to     cluster.Manager
	binary string

	count     map[cluster.Manager]int // replicas started, by manager, for their names
	alive     []*cluster.Replica      // in the order they started
	replicas  int32                   // the Deployment's replicas now
	handovers []handover
}

const upgradeNamespace = "upgrade"

func (u *upgrade) start(m cluster.Manager) {
	u.t.Helper()
	u.count[m]++
	o := cluster.ReplicaOptions{Name: fmt.Sprintf("%s-%d", m, u.count[m]), Manager: m}
	if m != cluster.Upstream {
		o.Binary = u.binary
	}
	r, err := u.c.StartReplica(u.t.Context(), o)
	if err != nil {
		u.t.Fatal(err)
	}
	u.alive = append(u.alive, r)
}

// composed says which replicas run, as "2 upstream + 1 native".
func (u *upgrade) composed() string {
	n := map[cluster.Manager]int{}
	for _, r := range u.alive {
		n[r.Manager()]++
	}
	return fmt.Sprintf("%d %s + %d %s", n[cluster.Upstream], cluster.Upstream, n[u.to], u.to)
}

func (u *upgrade) createWorkload() {
	u.t.Helper()
	ctx := u.t.Context()
	if _, err := u.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: upgradeNamespace}}, metav1.CreateOptions{}); err != nil {
		u.t.Fatal(err)
	}
	waitFor(u.t, "the namespace's default ServiceAccount", func(ctx context.Context) error {
		_, err := u.cs.CoreV1().ServiceAccounts(upgradeNamespace).Get(ctx, "default",
			metav1.GetOptions{})
		return err
	})
	u.replicas = 2
	createDeployment(u.t, u.cs, upgradeNamespace, "rolling", u.replicas, nil)
	u.waitConverged()
}

// leader waits for a replica to hold the Lease, and returns it.
func (u *upgrade) leader() *cluster.Replica {
	u.t.Helper()
	var leader *cluster.Replica
	since := time.Now().Add(-5 * time.Second) // a renewal every 2 s
	waitFor(u.t, "a leader among "+u.composed(), func(context.Context) error {
		name := cluster.LeaseHolder(u.c.Writes(), cluster.LeaseName, since)
		for _, r := range u.alive {
			if r.Name() == name {
				leader = r
				return nil
			}
		}
		return fmt.Errorf("the last Lease writer since %s is %q", since.Format(time.TimeOnly),
			name)
	})
	return leader
}

// handover stops leader with sig, waits for another replica to take the
// Lease, scales the Deployment, and records how long each step took.
func (u *upgrade) handover(leader *cluster.Replica, sig syscall.Signal, why string) {
	u.t.Helper()
	h := handover{why: why, composed: u.composed(), from: leader.Name()}
	signalled := time.Now()
	if err := leader.Signal(sig); err != nil {
		u.t.Fatal(err)
	}
	u.waitExit(leader)
	waitFor(u.t, "a new leader after "+leader.Name(), func(context.Context) error {
		h.to = cluster.LeaseHolder(u.c.Writes(), cluster.LeaseName, signalled)
		if h.to == "" || h.to == leader.Name() {
			return fmt.Errorf("no new leader yet (last writer %q)", h.to)
		}
		return nil
	})
	for _, w := range u.c.Writes() {
		if w.Replica != h.to || w.At.Before(signalled) {
			continue
		}
		if h.acquired == 0 && w.LeaseWrite(cluster.LeaseName) && w.Code/100 == 2 {
			h.acquired = w.At.Sub(signalled)
		}
	}
	u.replicas++
	if u.replicas > 4 {
		u.replicas = 2
	}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, u.replicas)
	if _, err := u.cs.AppsV1().Deployments(upgradeNamespace).Patch(u.t.Context(), "rolling",
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		u.t.Fatal(err)
	}
	u.waitConverged()
	h.converged = time.Since(signalled)
	for _, w := range u.c.Writes() {
		if w.Replica == h.to && !w.At.Before(signalled) && !w.Election(cluster.LeaseName) {
			h.firstWrite = w.At.Sub(signalled)
			break
		}
	}
	u.handovers = append(u.handovers, h)
	u.t.Logf("handover %d (%s, %s): %s -> %s, Lease taken after %v, first write after %v, "+
		"converged after %v", len(u.handovers), h.why, h.composed, h.from, h.to,
		h.acquired.Round(time.Millisecond), h.firstWrite.Round(time.Millisecond),
		h.converged.Round(time.Millisecond))
}

// waitExit waits for r to exit and forgets it.
func (u *upgrade) waitExit(r *cluster.Replica) {
	u.t.Helper()
	select {
	case <-r.Exited():
	case <-time.After(failureDeadline):
		u.t.Fatalf("replica %s did not exit within %v (log %s)", r.Name(), failureDeadline,
			r.LogPath())
	}
	for i, a := range u.alive {
		if a == r {
			u.alive = append(u.alive[:i], u.alive[i+1:]...)
			break
		}
	}
}

// replaceOneUpstream upgrades the oldest upstream replica: SIGTERM, then a
// ctrlhost replica in its place; if it led, that is a handover.
func (u *upgrade) replaceOneUpstream() {
	u.t.Helper()
	var old *cluster.Replica
	for _, r := range u.alive {
		if r.Manager() == cluster.Upstream {
			old = r
			break
		}
	}
	if old == nil {
		u.t.Fatal("no upstream replica left to upgrade")
	}
	if u.leader() == old {
		u.handover(old, syscall.SIGTERM, "upgrade (SIGTERM)")
	} else {
		if err := old.Signal(syscall.SIGTERM); err != nil {
			u.t.Fatal(err)
		}
		u.waitExit(old)
	}
	u.start(u.to)
}

// waitConverged waits until the Deployment has u.replicas Ready pods and
// no others.
func (u *upgrade) waitConverged() {
	u.t.Helper()
	waitFor(u.t, fmt.Sprintf("%d Ready pods", u.replicas), func(ctx context.Context) error {
		pods, err := deploymentPods(ctx, u.cs, upgradeNamespace, "rolling")
		if err != nil {
			return err
		}
		live := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				live++
			}
		}
		if n := readyPods(pods, ""); n != int(u.replicas) || live != n {
			return fmt.Errorf("%d Ready of %d pods", n, live)
		}
		return nil
	})
}

// table is the Markdown table of the handovers.
func (u *upgrade) table() string {
	var b strings.Builder
	b.WriteString("| # | replicas | stopped with | from | to | Lease taken | first write | " +
		"converged |\n|---:|---|---|---|---|---:|---:|---:|\n")
	for i, h := range u.handovers {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %.1f s | %.1f s | %.1f s |\n", i+1,
			h.composed, h.why, h.from, h.to, h.acquired.Seconds(), h.firstWrite.Seconds(),
			h.converged.Seconds())
	}
	return b.String()
}
