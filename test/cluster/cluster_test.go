//go:build unix

package cluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/ctrlhost/ctrlhost/testenv"
)

// The stages render to YAML documents kwok reads: each a Stage of a Node
// or a Pod, with the jq expressions and versions filled in.
func TestRenderStages(t *testing.T) {
	out, err := renderStages("v1.37.1", "v0.8.0")
	if err != nil {
		t.Fatal(err)
	}
	type stage struct {
		APIVersion string
		Kind       string
		Metadata   struct{ Name string }
		Spec       struct {
			ResourceRef struct{ APIGroup, Kind string }
			Selector    struct {
				MatchExpressions []struct {
					Key, Operator string
					Values        []string
				}
			}
		}
	}
	var names []string
	for doc := range bytes.SplitSeq(out, []byte("\n---\n")) {
		var s stage
		if err := yaml.Unmarshal(doc, &s); err != nil {
			t.Fatalf("a stage does not parse: %v\n%s", err, doc)
		}
		if s.APIVersion != "kwok.x-k8s.io/v1alpha1" || s.Kind != "Stage" {
			t.Errorf("stage %q: %s %s", s.Metadata.Name, s.APIVersion, s.Kind)
		}
		if ref := s.Spec.ResourceRef; ref.APIGroup != "v1" || (ref.Kind != "Node" && ref.Kind != "Pod") {
			t.Errorf("stage %q acts on %+v", s.Metadata.Name, ref)
		}
		for _, e := range s.Spec.Selector.MatchExpressions {
			if strings.Contains(e.Key, "[[") || strings.Contains(e.Key, "\n") {
				t.Errorf("stage %q: key %q was not filled in on one line", s.Metadata.Name, e.Key)
			}
		}
		names = append(names, s.Metadata.Name)
	}
	want := []string{"node-ready", "node-heartbeat", "pod-image-pull-backoff", "pod-start",
		"pod-exit-zero", "pod-exit-nonzero", "pod-restart-on-failure", "pod-stop", "pod-remove"}
	if !slices.Equal(names, want) {
		t.Errorf("stages %q, want %q", names, want)
	}
	for _, s := range []string{"kubeletVersion: v1.37.1", "kwok://v0.8.0", `test("RANDOM")`,
		`test(":(404|non-existent|nonexistent)$")`} {
		if !bytes.Contains(out, []byte(s)) {
			t.Errorf("the stages lack %q", s)
		}
	}
}

func TestKubeadmArgs(t *testing.T) {
	args := KubeadmArgs(testenv.PKIFiles{CAFile: "ca.crt", CAKeyFile: "ca.key",
		FrontProxyCAFile: "fp.crt", ServiceAccountKeyFile: "sa.key"}, "cm.conf")
	for _, want := range []string{
		"--controllers=*,bootstrapsigner,tokencleaner", "--use-service-account-credentials=true",
		"--kubeconfig=cm.conf", "--cluster-signing-key-file=ca.key", "--allocate-node-cidrs=true",
		"--cluster-cidr=" + ClusterCIDR, "--service-account-private-key-file=sa.key",
		"--requestheader-client-ca-file=fp.crt", "--leader-elect=true",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("kubeadm's command line lacks %s: %q", want, args)
		}
	}
}

func TestOptions(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"kube-scheduler", "kwok", "kube-controller-manager"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o, err := Options{Manager: Upstream, BinDir: bin}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Nodes != 3 || o.ManagerBinary != filepath.Join(bin, "kube-controller-manager") ||
		len(o.NodeGroups) != 1 || o.NodeGroups[0].Name != "fake" || o.NodeGroups[0].Nodes != 3 {
		t.Errorf("defaults: %+v", o)
	}
	o, err = Options{Manager: Upstream, BinDir: bin, NodeGroups: []NodeGroup{{Name: "a", Nodes: 2},
		{Name: "b", Nodes: 1}}}.withDefaults()
	if err != nil || o.Nodes != 3 {
		t.Errorf("two groups of 2 and 1 nodes: %v, %d nodes", err, o.Nodes)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Manager: "kcm", BinDir: bin}, `Manager "kcm" is none of`},
		{Options{Manager: Native, BinDir: bin}, "ManagerBinary is required for native"},
		{Options{Manager: Upstream, BinDir: bin, Nodes: 251}, "not within 1-250"},
		{Options{Manager: Upstream, BinDir: bin, Nodes: 501, NodeCIDRMaskSize: 25},
			"not within 1-500 (a /25 each"},
		{Options{Manager: Upstream, BinDir: bin, NodeCIDRMaskSize: 30}, "not within 17-28"},
		{Options{Manager: Upstream, BinDir: bin, NodeCIDRMaskSize: 26},
			"NodePods 110 is more than a /26 holds (62)"},
		{Options{Manager: Upstream, BinDir: bin, NodeCPU: "lots"}, `capacity "lots"`},
		{Options{Manager: DropIn, BinDir: bin, ManagerBinary: filepath.Join(bin, "nope")},
			"not executable: " + filepath.Join(bin, "nope")},
		{Options{Manager: Upstream, BinDir: bin, NodeGroups: []NodeGroup{{Name: "Zone_A", Nodes: 1}}},
			`NodeGroups[0].Name "Zone_A"`},
		{Options{Manager: Upstream, BinDir: bin, NodeGroups: []NodeGroup{{Name: "a", Nodes: 1},
			{Name: "a", Nodes: 2}}}, `NodeGroups[1].Name "a" is used twice`},
		{Options{Manager: Upstream, BinDir: bin, NodeGroups: []NodeGroup{{Name: "a"}}},
			"NodeGroups[0] (a) has 0 nodes"},
		{Options{Manager: Upstream, BinDir: bin, Nodes: 2, NodeGroups: []NodeGroup{{Name: "a",
			Nodes: 3}}}, "Options.Nodes is 2 but NodeGroups have 3 nodes"},
	} {
		if _, err := c.o.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.o, err, c.want)
		}
	}
}

func TestModuleRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := moduleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if root != filepath.Dir(filepath.Dir(wd)) {
		t.Errorf("module root %s, from %s", root, wd)
	}
	if _, err := moduleRoot(t.TempDir()); err == nil {
		t.Error("a temporary directory is inside the module")
	}
}

// Nodes are numbered across the groups in order: a group's nodes are the
// next ones after the group before it.
func TestNodesOf(t *testing.T) {
	c := &Cluster{opts: Options{Nodes: 4, NodeGroups: []NodeGroup{{Name: "a", Nodes: 1},
		{Name: "b", Nodes: 3}}}}
	if got := c.NodesOf("a"); !slices.Equal(got, []string{"kwok-node-0"}) {
		t.Errorf("group a: %q", got)
	}
	if got := c.NodesOf("b"); !slices.Equal(got,
		[]string{"kwok-node-1", "kwok-node-2", "kwok-node-3"}) {
		t.Errorf("group b: %q", got)
	}
	if got := c.NodesOf("c"); got != nil {
		t.Errorf("no group c: %q", got)
	}
	if err := c.FailNodeGroup("c"); err == nil || !strings.Contains(err.Error(), `no node group "c"`) {
		t.Errorf("failing group c: %v", err)
	}
}

// The test process's own usage reads as a running process's: some CPU
// time, and a peak resident set of at least a megabyte.
func TestProcessUsage(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := processUsage(os.Getpid()); err == nil {
			t.Fatal("no error off Linux")
		}
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for u, err := processUsage(os.Getpid()); u.CPU == 0; u, err = processUsage(os.Getpid()) {
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no CPU time after 10 s of spinning")
		}
		for i := 0; i < 1e6; i++ {
			_ = fmt.Sprint(i)
		}
	}
	u, err := processUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.PeakRSS < 1<<20 {
		t.Errorf("peak RSS %d bytes", u.PeakRSS)
	}
	if _, err := processUsage(1 << 30); err == nil {
		t.Error("no error for a pid that does not exist")
	}
}
