package shardgroup

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/shard"
)

// TestClientsetInformers: typed informers built over a Clientset cache
// only their slots' pods and namespaces, before and after they start; a
// resource the Clientset does not filter (nodes) is cached whole.
func TestClientsetInformers(t *testing.T) {
	sp := shard.Space{Slots: 4}
	held := []int{0, 3}
	var objs []runtime.Object
	for i := range 30 {
		ns := generated("ns-", i)
		objs = append(
			objs,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			pod(ns, "p"),
		)
	}
	objs = append(
		objs,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
	)
	inner := fake.NewClientset(objs...)
	cs, err := NewClientset(inner, sp, held)
	if err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	podInf, nsInf, nodeInf := f.Core().
		V1().
		Pods(),
		f.Core().
			V1().
			Namespaces(),
		f.Core().
			V1().
			Nodes()
	podInf.Informer()
	nsInf.Informer()
	nodeInf.Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(
		ctx.Done(),
		podInf.Informer().HasSynced,
		nsInf.Informer().HasSynced,
		nodeInf.Informer().HasSynced,
	) {
		t.Fatal("caches did not sync")
	}
	mine := func(ns string) bool { s := sp.SlotOfKey(ns); return s == 0 || s == 3 }
	want := 0
	for i := range 30 {
		if mine(generated("ns-", i)) {
			want++
		}
	}
	if want == 0 || want == 30 {
		t.Fatalf("the test's namespaces all fall on one side (%d of 30 in slots %v)", want, held)
	}
	pods, _ := podInf.Lister().List(labels.Everything())
	nss, _ := nsInf.Lister().List(labels.Everything())
	nodes, _ := nodeInf.Lister().List(labels.Everything())
	if len(pods) != want || len(nss) != want || len(nodes) != 2 {
		t.Errorf(
			"cached %d pods, %d namespaces, %d nodes; want %d, %d, 2",
			len(pods),
			len(nss),
			len(nodes),
			want,
			want,
		)
	}
	for _, p := range pods {
		if !mine(p.Namespace) {
			t.Errorf("cached pod of namespace %s (slot %d)", p.Namespace, sp.SlotOfKey(p.Namespace))
		}
	}

	// A watch event of each side: only the held slot's pod arrives.
	var in, out string
	for i := 100; in == "" || out == ""; i++ {
		ns := generated("ns-", i)
		if mine(ns) && in == "" {
			in = ns
		} else if !mine(ns) && out == "" {
			out = ns
		}
	}
	for _, ns := range []string{out, in} {
		if _, err := inner.CoreV1().Pods(ns).Create(ctx, pod(ns, "new"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "the held slot's new pod to be cached", func() bool {
		_, err := podInf.Lister().Pods(in).Get("new")
		return err == nil
	})
	if _, err := podInf.Lister().Pods(out).Get("new"); err == nil {
		t.Error("cached a new pod of a slot not held")
	}
	if applied, known := cs.ServerApplied("pods"); !known || applied {
		t.Errorf(
			"ServerApplied(pods) = %v (known %v); a fake clientset ignores ShardSelector",
			applied,
			known,
		)
	}
	if !Filtered("", "pods") || Filtered("", "nodes") || !Filtered("apps", "replicasets") {
		t.Error("Filtered disagrees with the Clientset")
	}
}
