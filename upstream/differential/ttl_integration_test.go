//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/controllers/ttl"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// The cluster sizes the scenario walks through: the edge of KCM's first
// band (0s up to 100 nodes, 15s above), the bottom of the second band
// (15s down to 90 nodes, on the way down), and one below it.
const (
	ttlFirstEdge = 100
	ttlBottom    = 90
	ttlBelow     = 89
	ttlSeen      = "ttl-seen" // the ConfigMap where Act writes what it saw
	ttlTouched   = "differential/touched"
)

// TestTTL: nodes get the TTL of the cluster's size. At 100 nodes they get
// 0s; the 101st node gets 15s at once, the others at their next update;
// down to 90 nodes the band holds (a node added then gets 15s); at 89 it
// falls (a node added then gets 0s), and every node's next update brings
// it to 0s. The probes' first TTLs are recorded as Act sees them: later
// they may change with the events of the controller's own patches, which
// race with the scenario's steps on either side.
func TestTTL(t *testing.T) {
	newNode := func(ns, name, role string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name,
			Labels: map[string]string{"differential": ns, "role": role}}}
	}
	mine := func(ns string) metav1.ListOptions {
		return metav1.ListOptions{LabelSelector: "differential=" + ns}
	}
	probes := []string{"up", "mid", "down"}
	res := compare(t, differential.Scenario{
		Name:       "ttl follows the cluster size",
		Controller: ttl.Name,
		// Nodes are cluster-scoped: the scenario's are named after ns and
		// labelled with it. Nodes of others count too: the scenario makes
		// the cluster 100 nodes in all.
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			all, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			// It deletes 13 of its own nodes on the way down.
			if len(all.Items) > ttlFirstEdge-20 {
				return fmt.Errorf("%d nodes are left from elsewhere; the scenario "+
					"needs at most %d", len(all.Items), ttlFirstEdge-20)
			}
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: ttlSeen},
				Data:       map[string]string{"others": strconv.Itoa(len(all.Items))},
			}, metav1.CreateOptions{}); err != nil {
				return err
			}
			for i := range ttlFirstEdge - len(all.Items) {
				if _, err := cs.CoreV1().Nodes().Create(ctx,
					newNode(ns, fmt.Sprintf("base-%03d", i), "base"),
					metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			return ttlAct(ctx, cs, ns, newNode, probes)
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			l, err := cs.CoreV1().Nodes().List(ctx, mine(ns))
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "Node"
			}
			seen, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, ttlSeen, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			seen.Kind = "ConfigMap"
			return append(objects(l.Items, func(n *corev1.Node) runtime.Object { return n }),
				seen), nil
		},
		Settled: ttlSettled,
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			return cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, mine(ns))
		},
	})
	// Both sides agreeing is not enough: the bands are KCM's.
	for _, o := range res.Native {
		if o["kind"] != "ConfigMap" {
			continue
		}
		data, _ := o["data"].(map[string]any)
		for p, want := range map[string]string{"up": "15", "mid": "15", "down": "0"} {
			if data[p] != want {
				t.Errorf("probe %s's first TTL %v, want %s", p, data[p], want)
			}
		}
		others, _ := strconv.Atoi(fmt.Sprint(data["others"]))
		if n := count(res.Native, "Node"); n != ttlBelow+1-others {
			t.Errorf("the native side ended with %d of the scenario's nodes, want %d",
				n, ttlBelow+1-others)
		}
	}
}

// ttlAct plays the scenario's next step, judged from what is there.
func ttlAct(ctx context.Context, cs kubernetes.Interface, ns string,
	newNode func(ns, name, role string) *corev1.Node, probes []string) error {
	all, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	seen, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, ttlSeen, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var base []*corev1.Node
	probe := map[string]*corev1.Node{}
	for i := range all.Items {
		n := &all.Items[i]
		if n.Labels["differential"] != ns {
			continue
		}
		if n.Labels["role"] == "base" {
			base = append(base, n)
		} else {
			probe[strings.TrimPrefix(n.Name, ns+"-")] = n
		}
	}
	slices.SortFunc(base, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	ttlOf := func(n *corev1.Node) (string, bool) {
		v, ok := n.Annotations[ttl.Annotation]
		return v, ok
	}
	// Record each probe's first TTL.
	for _, p := range probes {
		if n := probe[p]; n != nil && seen.Data[p] == "" {
			if v, ok := ttlOf(n); ok {
				return ttlPatchData(ctx, cs, ns, p, v)
			}
		}
	}
	allBase := func(ok func(*corev1.Node) bool) bool {
		return !slices.ContainsFunc(base,
			func(n *corev1.Node) bool { return !ok(n) })
	}
	touch := func(nodes []*corev1.Node, round string) error {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, ttlTouched, round)
		for _, n := range nodes {
			if n.Labels[ttlTouched] == round {
				continue
			}
			if _, err := cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType,
				[]byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
	// shrinkTo deletes the last base nodes until the cluster has size
	// nodes, then adds the probe.
	shrinkTo := func(size int, name string) error {
		for i := len(base) - 1; i >= 0 && len(all.Items)-(len(base)-i-1) > size; i-- {
			err := cs.CoreV1().Nodes().Delete(ctx, base[i].Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		_, err := cs.CoreV1().Nodes().Create(ctx, newNode(ns, name, "probe"),
			metav1.CreateOptions{})
		return err
	}
	up, mid, down := probe["up"], probe["mid"], probe["down"]
	switch {
	case up == nil: // 1. every node has its TTL: one node more
		if allBase(func(n *corev1.Node) bool { _, ok := ttlOf(n); return ok }) {
			_, err := cs.CoreV1().Nodes().Create(ctx, newNode(ns, "up", "probe"),
				metav1.CreateOptions{})
			return err
		}
	case seen.Data["up"] == "": // 2. wait for its TTL
	case mid == nil: // 3. update every node; once they have up's TTL, shrink
		if err := touch(base, "1"); err != nil {
			return err
		}
		if allBase(func(n *corev1.Node) bool { v, _ := ttlOf(n); return v == seen.Data["up"] }) {
			return shrinkTo(ttlBottom, "mid")
		}
	case seen.Data["mid"] == "": // 4. wait for its TTL
	case down == nil: // 5. shrink below the overlap
		return shrinkTo(ttlBelow, "down")
	case seen.Data["down"] == "": // 6. wait for its TTL
	default: // 7. update every node
		nodes := append(base, up, mid, down)
		return touch(nodes, "2")
	}
	return nil
}

// ttlPatchData records value under key in the scenario's ConfigMap.
func ttlPatchData(ctx context.Context, cs kubernetes.Interface, ns, key, value string) error {
	patch := fmt.Sprintf(`{"data":{%q:%q}}`, key, value)
	_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, ttlSeen, types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{})
	return err
}

// ttlSettled: the last probe's TTL is recorded, and every node was updated
// the second time and has that TTL.
func ttlSettled(state []map[string]any) bool {
	field := func(m map[string]any, path ...string) string {
		for _, p := range path[:len(path)-1] {
			m, _ = m[p].(map[string]any)
		}
		v, _ := m[path[len(path)-1]].(string)
		return v
	}
	var last string
	nodes := 0
	for _, o := range state {
		if o["kind"] == "ConfigMap" {
			last = field(o, "data", "down")
		}
	}
	for _, o := range state {
		if o["kind"] != "Node" {
			continue
		}
		nodes++
		if field(o, "metadata", "labels", ttlTouched) != "2" ||
			field(o, "metadata", "annotations", ttl.Annotation) != last {
			return false
		}
	}
	return last != "" && nodes > 0
}
