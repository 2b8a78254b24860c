//go:build integration

package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
	"github.com/ctrlhost/ctrlhost/shard"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// TestShardedInformersOnARealServer: informers over shardgroup.Clientset cache
// only their slots' pods and namespaces on kube-apiserver with
// ShardedListAndWatch on (the server filters, and says so in ShardInfo)
// and off (the server ignores the selector; the client filters), and on a
// server older than the gate (1.34, 1.35: as off).
func TestShardedInformersOnARealServer(t *testing.T) {
	for _, setting := range shardedListSettings(t) {
		gate := setting.Applies
		t.Run(setting.Name, func(t *testing.T) {
			env, err := testenv.Start(t.Context(), testenv.Options{
				FeatureGates: setting.Gates,
				Logf:         t.Logf,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := env.Stop(); err != nil {
					t.Error(err)
				}
			}()
			admin := kubernetes.NewForConfigOrDie(env.Config())
			ctx := t.Context()
			sp := shard.Space{Slots: 4}
			held := []int{1, 2}
			var names []string
			for range 12 {
				ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shard-"}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, ns.Name)
				if _, err := admin.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			mine := map[string]bool{}
			for _, ns := range names {
				s := sp.SlotOfKey(ns)
				mine[ns] = s == 1 || s == 2
			}

			cs, err := shardgroup.NewClientset(admin, sp, held)
			if err != nil {
				t.Fatal(err)
			}
			f := informers.NewSharedInformerFactory(cs, 0)
			cms, nss := f.Core().V1().ConfigMaps(), f.Core().V1().Namespaces()
			cms.Informer()
			nss.Informer()
			ictx, cancel := context.WithCancel(ctx)
			defer func() { cancel(); f.Shutdown() }()
			f.Start(ictx.Done())
			if !cache.WaitForCacheSync(ictx.Done(), cms.Informer().HasSynced, nss.Informer().HasSynced) {
				t.Fatal("caches did not sync")
			}
			cached, _ := cms.Lister().List(labels.Everything())
			for _, c := range cached {
				if c.Name == "c" && !mine[c.Namespace] {
					t.Errorf("cached the ConfigMap of namespace %s, slot %d, not held", c.Namespace, sp.SlotOfKey(c.Namespace))
				}
			}
			for ns, ok := range mine {
				if _, err := cms.Lister().ConfigMaps(ns).Get("c"); (err == nil) != ok {
					t.Errorf("namespace %s (slot %d): ConfigMap cached %v, want %v", ns, sp.SlotOfKey(ns), err == nil, ok)
				}
				if _, err := nss.Lister().Get(ns); (err == nil) != ok {
					t.Errorf("namespace %s (slot %d): Namespace cached %v, want %v", ns, sp.SlotOfKey(ns), err == nil, ok)
				}
			}
			// The informers stream their initial lists (WatchListClient), so
			// no list response tells; what the client had to drop does.
			applied, known := cs.ServerApplied("configmaps")
			dropped := cs.Dropped("configmaps")
			t.Logf("gate %v: ConfigMaps the client dropped: %d; ServerApplied %v (known %v); Namespaces dropped by name: %d",
				gate, dropped, applied, known, cs.Dropped("namespaces"))
			switch {
			case gate && (dropped != 0 || (known && !applied)):
				t.Errorf("gate on: the client dropped %d ConfigMaps (ServerApplied %v, known %v); the server should have filtered", dropped, applied, known)
			case !gate && (dropped == 0 || !known || applied):
				t.Errorf("gate off: the client dropped %d ConfigMaps (ServerApplied %v, known %v); the server cannot have filtered", dropped, applied, known)
			}
			// A plain list through the Clientset: the server's ShardInfo tells.
			if _, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			if applied, known := cs.ServerApplied("configmaps"); !known || applied != gate {
				t.Errorf("after a list: ServerApplied(configmaps) = %v (known %v), want %v", applied, known, gate)
			}
			if cs.Dropped("namespaces") == 0 {
				t.Error("no Namespace dropped by name; the server cannot select Namespaces by their own name")
			}

			// A watch event of a held and of a foreign slot.
			var in, out string
			for _, ns := range names {
				if mine[ns] && in == "" {
					in = ns
				}
				if !mine[ns] && out == "" {
					out = ns
				}
			}
			if in == "" || out == "" {
				t.Fatalf("the generated namespaces all fell on one side of slots %v", held)
			}
			for _, ns := range []string{out, in} {
				if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			poll.Until(t, "the held slot's new ConfigMap to be cached", func() bool {
				_, err := cms.Lister().ConfigMaps(in).Get("later")
				return err == nil
			})
			if _, err := cms.Lister().ConfigMaps(out).Get("later"); err == nil {
				t.Error("cached a new ConfigMap of a slot not held")
			}
		})
	}
}
