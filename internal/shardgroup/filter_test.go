package shardgroup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/shard"
)

// fakeLW serves a fixed pod list and a watch the test feeds, and records
// the options it was asked with; echo makes it answer like a server with
// ShardedListAndWatch on (ShardInfo set, but no filtering, which is the
// Filter's own job either way).
type fakeLW struct {
	items []corev1.Pod
	echo  bool                  // a server with the gate on: says so in ShardInfo, and filters
	keep  func(corev1.Pod) bool // its filter, when echo
	w     *watch.FakeWatcher
	opts  []metav1.ListOptions
}

func (f *fakeLW) List(o metav1.ListOptions) (runtime.Object, error) {
	f.opts = append(f.opts, o)
	l := &corev1.PodList{
		ListMeta: metav1.ListMeta{ResourceVersion: "7"},
		Items:    slices.Clone(f.items),
	}
	if f.echo && o.ShardSelector != "" {
		l.ShardInfo = &metav1.ShardInfo{Selector: o.ShardSelector}
		l.Items = slices.DeleteFunc(l.Items, func(p corev1.Pod) bool { return !f.keep(p) })
	}
	return l, nil
}

func (f *fakeLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	f.opts = append(f.opts, o)
	return f.w, nil
}

// generated returns the i-th name as GenerateName would make it: prefix
// and five random characters. Names that differ only in their last
// characters hash close together under FNV-1a and would land in one slot
// (see the package doc).
func generated(prefix string, i int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	rng := rand.New(rand.NewPCG(uint64(i), 42))
	b := []byte(prefix)
	for range 5 {
		b = append(b, alphabet[rng.IntN(len(alphabet))])
	}
	return string(b)
}

func TestFilter(t *testing.T) {
	sp := shard.Space{Slots: 4}
	var items []corev1.Pod
	for i := range 40 {
		items = append(items, *pod(generated("ns-", i), "p"))
	}
	held := []int{1, 2}
	inSlots := func(ns string) bool { return slices.Contains(held, sp.SlotOfKey(ns)) }

	for _, echo := range []bool{false, true} {
		t.Run(fmt.Sprintf("server applies the selector: %v", echo), func(t *testing.T) {
			lw := &fakeLW{
				items: items,
				echo:  echo,
				keep:  func(p corev1.Pod) bool { return inSlots(p.Namespace) },
				w:     watch.NewFake(),
			}
			f, err := NewFilter(sp, held, lw, false)
			if err != nil {
				t.Fatal(err)
			}
			if _, known := f.ServerApplied(); known {
				t.Error("ServerApplied known before any list")
			}
			obj, err := f.ListWithContext(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			list := obj.(*corev1.PodList)
			want := 0
			for _, p := range items {
				if inSlots(p.Namespace) {
					want++
				}
			}
			if len(list.Items) != want || want == 0 || want == len(items) {
				t.Fatalf(
					"listed %d pods, want the %d of slots %v (of %d)",
					len(list.Items),
					want,
					held,
					len(items),
				)
			}
			for _, p := range list.Items {
				if !inSlots(p.Namespace) {
					t.Errorf("listed %s of slot %d", p.Namespace, sp.SlotOfKey(p.Namespace))
				}
			}
			if lw.opts[0].ShardSelector != sp.Selector(held).String() {
				t.Errorf("sent ShardSelector %q", lw.opts[0].ShardSelector)
			}
			if applied, known := f.ServerApplied(); !known || applied != echo {
				t.Errorf("ServerApplied = %v (known %v), want %v", applied, known, echo)
			}
			if dropped := f.Dropped(); (dropped == 0) != echo {
				t.Errorf(
					"the client dropped %d pods; want none exactly when the server filters (%v)",
					dropped,
					echo,
				)
			}

			w, err := f.WatchWithContext(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			go func() {
				for i := range items {
					if !echo || inSlots(items[i].Namespace) {
						lw.w.Add(&items[i])
					}
				}
				lw.w.Action(
					watch.Bookmark,
					&corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}},
				)
			}()
			got := 0
			timeout := time.After(10 * time.Second)
			for bookmark := false; !bookmark; {
				select {
				case e := <-w.ResultChan():
					if e.Type == watch.Bookmark {
						bookmark = true
						continue
					}
					got++
					if ns := e.Object.(*corev1.Pod).Namespace; !inSlots(ns) {
						t.Errorf("watch passed %s of slot %d", ns, sp.SlotOfKey(ns))
					}
				case <-timeout:
					t.Fatal("no bookmark through the watch within 10s")
				}
			}
			if got != want {
				t.Errorf("watch passed %d events, want %d", got, want)
			}
		})
	}
}

// TestFilterByName: Namespaces of a namespace-keyed space are kept by
// their name, and no selector is sent (the server would hash their empty
// namespace).
func TestFilterByName(t *testing.T) {
	sp := shard.Space{Slots: 4}
	held := []int{0}
	var nss []corev1.Namespace
	for i := range 20 {
		nss = append(
			nss,
			corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: generated("ns-", i)}},
		)
	}
	var sent []metav1.ListOptions
	lw := &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sent = append(sent, o)
			return &corev1.NamespaceList{Items: slices.Clone(nss)}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}
	f, err := NewFilter(sp, held, lw, true)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := f.ListWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range obj.(*corev1.NamespaceList).Items {
		if sp.SlotOfKey(ns.Name) != 0 {
			t.Errorf("kept namespace %s of slot %d", ns.Name, sp.SlotOfKey(ns.Name))
		}
	}
	if n := len(obj.(*corev1.NamespaceList).Items); n == 0 || n == len(nss) {
		t.Errorf("kept %d of %d namespaces", n, len(nss))
	}
	if sent[0].ShardSelector != "" {
		t.Errorf("sent a ShardSelector for namespaces: %q", sent[0].ShardSelector)
	}
}

func TestNewFilterRejectsBadSlots(t *testing.T) {
	lw := &fakeLW{w: watch.NewFake()}
	if _, err := NewFilter(shard.Space{Slots: 4}, []int{4}, lw, false); err == nil {
		t.Error("slot 4 of 4 accepted")
	}
	if _, err := NewFilter(shard.Space{Slots: 0}, nil, lw, false); err == nil {
		t.Error("a space of 0 slots accepted")
	}
}

// TestFilterWatchStopsWithEventsPending: a consumer that stops the watch
// without reading its pending events leaves no goroutine behind (goleak in
// TestMain); apimachinery's watch.Filter does.
func TestFilterWatchStopsWithEventsPending(t *testing.T) {
	sp := shard.Space{Slots: 1}
	lw := &fakeLW{w: watch.NewFakeWithChanSize(4, false)}
	f, err := NewFilter(sp, []int{0}, lw, false)
	if err != nil {
		t.Fatal(err)
	}
	w, err := f.WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		lw.w.Add(pod("ns", fmt.Sprint("p", i)))
	}
	w.Stop()
	w.Stop() // twice is fine
	// Nothing reads: goleak in TestMain fails the package if the
	// filtering goroutine is still blocked on its send.
}
