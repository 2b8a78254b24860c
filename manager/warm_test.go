package manager_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// podWatcher is a controller that declares the pods informer and records,
// per replica, how many pods its lister held when its Run started.
type podWatcher struct {
	mu      sync.Mutex
	seen    map[string]int  // replica → pods cached at Run
	builds  map[string]int  // replica → InitFunc calls
	indexed map[string]bool // replica → its declared index was in place when its InitFunc ran
}

const byNodeIndex = "by-node"

func indexByNode(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Spec.NodeName}, nil }

func (w *podWatcher) descriptor(replica string) descriptor.Descriptor {
	return descriptor.New("pod-watcher", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		w.mu.Lock()
		w.builds[replica]++
		w.mu.Unlock()
		pods := cc.InformerFactory.Core().V1().Pods()
		informer := pods.Informer()
		_, indexed := informer.GetIndexer().GetIndexers()[byNodeIndex]
		w.mu.Lock()
		w.indexed[replica] = indexed
		w.mu.Unlock()
		if !indexed {
			if err := informer.AddIndexers(cache.Indexers{byNodeIndex: indexByNode}); err != nil {
				return nil, err
			}
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-cc.InformersStarted
			// Acting at once: no wait for a sync here, only what is cached.
			n := 0
			if informer.HasSynced() {
				list, _ := pods.Lister().List(labels.Everything())
				n = len(list)
			}
			w.mu.Lock()
			w.seen[replica] = n
			w.mu.Unlock()
			<-ctx.Done()
			return nil
		}), nil
	}).WithIndexers(corev1.SchemeGroupVersion.WithResource("pods"), cache.Indexers{byNodeIndex: indexByNode})
}

// countLists counts the lists of resource h's clientset serves.
func countLists(h *managertest.Harness, resource string) *atomic.Int32 {
	var n atomic.Int32
	h.Client.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		n.Add(1)
		return false, nil, nil
	})
	return &n
}

// TestWarmStandby: with warm standby, a follower lists the pods before it
// leads, builds no controller and writes nothing while it follows, and on
// taking over its term starts on those caches: no second list, and the
// controller finds every pod cached the moment it runs, and its declared
// index already built (descriptor.WithIndexers). Without warm
// standby the new leader lists at takeover, as KCM does.
func TestWarmStandby(t *testing.T) {
	const pods = 50
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			var objects []runtime.Object
			for i := range pods {
				objects = append(objects, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default"}})
			}
			w := &podWatcher{seen: map[string]int{}, builds: map[string]int{}, indexed: map[string]bool{}}
			a := managertest.New(t, "warm-manager", []descriptor.Descriptor{w.descriptor("a")}, objects...)
			var writes atomic.Int32
			countWrites := func(action k8stesting.Action) (bool, runtime.Object, error) {
				if v := action.GetVerb(); v != "list" && v != "watch" && v != "get" {
					writes.Add(1)
				}
				return false, nil, nil
			}
			a.Client.PrependReactor("*", "pods", countWrites)
			a.Options = fastElection("a")
			a.Options.WarmStandby = warm
			a.Start()
			a.WaitRunning("pod-watcher")
			managertest.Eventually(t, "a's controller ran", func() bool { w.mu.Lock(); defer w.mu.Unlock(); _, ok := w.seen["a"]; return ok })

			// b has a clientset of its own over a's objects, so that its
			// requests are counted apart.
			b := managertest.New(t, "warm-manager", []descriptor.Descriptor{w.descriptor("b")}).SameAPI(a)
			lists := countLists(b, "pods") // b's
			b.Client.PrependReactor("*", "pods", countWrites)
			b.Options = fastElection("b")
			b.Options.WarmStandby = warm
			b.Start()
			if warm {
				managertest.Eventually(t, "b's warm list", func() bool { return lists.Load() == 1 })
			}
			if st, _ := b.Manager.Status("pod-watcher"); st.Phase != manager.PhaseWaiting {
				t.Errorf("follower b: pod-watcher %s, want waiting (not built)", st.Phase)
			}
			w.mu.Lock()
			if w.builds["b"] != 0 {
				t.Errorf("follower b built its controller %d times before leading", w.builds["b"])
			}
			w.mu.Unlock()
			atTakeover := lists.Load()
			if err := a.Stop(); err != nil {
				t.Fatal(err)
			}
			b.WaitRunning("pod-watcher")
			managertest.Eventually(t, "b's controller ran", func() bool { w.mu.Lock(); defer w.mu.Unlock(); _, ok := w.seen["b"]; return ok })
			w.mu.Lock()
			seen, indexed := w.seen["b"], w.indexed["b"]
			w.mu.Unlock()
			if !warm {
				managertest.Eventually(t, "b's list at takeover", func() bool { return lists.Load() == atTakeover+1 })
			}
			b.WaitHealthy("/readyz") // b's term's informers have synced
			switch {
			case warm && lists.Load() != atTakeover:
				t.Errorf("b listed pods %d more time(s) at takeover; want it to run on its warm caches", lists.Load()-atTakeover)
			case warm && seen != pods:
				t.Errorf("b's controller saw %d pods cached when it ran, want all %d", seen, pods)
			case warm != indexed:
				t.Errorf("b's declared index in place when its InitFunc ran: %v, want %v (built by the warm set before it started)", indexed, warm)
			case !warm && lists.Load() != atTakeover+1:
				t.Errorf("without warm standby b listed %d time(s) at takeover, want 1", lists.Load()-atTakeover)
			}
			if writes.Load() != 0 {
				t.Errorf("%d pod writes; the controllers write nothing", writes.Load())
			}
			if err := b.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWarmTakeoverRunsEachControllerOnceBuilt: on warm caches a controller's
// Run starts as soon as its own InitFunc returned, while a later InitFunc is
// still running; without warm standby every Run waits for every InitFunc
// (and InformersStarted), as in KCM.
func TestWarmTakeoverRunsEachControllerOnceBuilt(t *testing.T) {
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			ran := make(chan struct{})
			var informersStartedAtRun atomic.Bool
			first := descriptor.New("first", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
				cc.InformerFactory.Core().V1().Pods().Informer()
				return descriptor.ControllerFunc(func(ctx context.Context) error {
					select {
					case <-cc.InformersStarted:
						informersStartedAtRun.Store(true)
					default:
					}
					close(ran)
					<-ctx.Done()
					return nil
				}), nil
			}).WithInformers(pods)
			var sawFirstRun atomic.Bool
			second := descriptor.New("second", func(ctx context.Context, _ descriptor.Context) (descriptor.Controller, error) {
				wait := time.Duration(0) // without warm standby: only a look
				if warm {
					wait = 10 * time.Second
				}
				select {
				case <-ran:
					sawFirstRun.Store(true)
				case <-time.After(wait):
				case <-ctx.Done():
				}
				return nil, nil
			}).WithInformers(pods)
			h := managertest.New(t, "warm-order", []descriptor.Descriptor{first, second})
			h.Options = fastElection("a")
			h.Options.WarmStandby = warm
			h.Start()
			h.WaitRunning("first")
			if warm {
				// first's Run, once running, wakes second's InitFunc, which
				// waits for it.
				managertest.Eventually(t, "second's InitFunc sees first's Run started",
					sawFirstRun.Load)
			} else if sawFirstRun.Load() {
				t.Error("second's InitFunc saw first's Run started without warm standby")
			}
			if informersStartedAtRun.Load() == warm {
				t.Errorf("InformersStarted closed when first's Run started: %v, want %v", informersStartedAtRun.Load(), !warm)
			}
			if err := h.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWarmStandbyFollowsSetControllers: a follower keeps warm the
// informers of the controllers selected now. pod-watcher, not selected at
// start, is not warm; enabled with SetControllers while b follows, its
// pods are listed at once, and b, leading, runs it on those caches.
func TestWarmStandbyFollowsSetControllers(t *testing.T) {
	w := &podWatcher{seen: map[string]int{}, builds: map[string]int{}, indexed: map[string]bool{}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	a := managertest.New(t, "warm-manager", []descriptor.Descriptor{w.descriptor("a")}, pod)
	a.Options = fastElection("a")
	a.Start()
	a.WaitRunning("pod-watcher")

	b := managertest.New(t, "warm-manager", []descriptor.Descriptor{w.descriptor("b")}).SameAPI(a)
	lists := countLists(b, "pods")
	b.Options = fastElection("b")
	b.Options.WarmStandby = true
	b.Options.Controllers = []string{"-pod-watcher"}
	b.Start()
	managertest.Eventually(t, "b follows a", func() bool {
		l, _ := b.Manager.Leader()
		return l == "a"
	})
	if n := lists.Load(); n != 0 {
		t.Fatalf("b listed pods %d times for a controller it does not run", n)
	}
	if err := b.Manager.SetControllers([]string{"*"}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "b's warm list after SetControllers",
		func() bool { return lists.Load() == 1 })
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	b.WaitRunning("pod-watcher")
	b.WaitHealthy("/readyz")
	if n := lists.Load(); n != 1 {
		t.Errorf("b listed pods %d times; want once, warm, before it led", n)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestWarmInformerKeepsWhatItsTermReads: a follower's warm pods informer
// keeps what every controller of its would-be term declared it reads of
// pods (descriptor.WithReads), those that do not declare the informer
// itself included, so that on takeover they share it: no second list, and
// each finds its fields; the fields none declared are not cached.
func TestWarmInformerKeepsWhatItsTermReads(t *testing.T) {
	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	var mu sync.Mutex
	seen := map[string]*corev1.Pod{} // replica/controller → the cached pod at Run
	reader := func(replica, name string) descriptor.Descriptor {
		return descriptor.New(name, func(_ context.Context,
			cc descriptor.Context) (descriptor.Controller, error) {
			pods := cc.InformerFactory.Core().V1().Pods()
			pods.Informer()
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
					return nil
				}
				p, err := pods.Lister().Pods("default").Get("p")
				if err != nil {
					return err
				}
				mu.Lock()
				seen[replica+"/"+name] = p
				mu.Unlock()
				<-ctx.Done()
				return nil
			}), nil
		})
	}
	descs := func(replica string) []descriptor.Descriptor {
		return []descriptor.Descriptor{
			reader(replica, "node-reader").WithInformers(podsGVR).
				WithReads(podsGVR, "spec.nodeName"),
			reader(replica, "phase-reader").WithReads(podsGVR, "status.phase"),
		}
	}
	a := managertest.New(t, "warm-reads", descs("a"), pod)
	a.Options = fastElection("a")
	a.Options.WarmStandby = true
	a.Start()
	a.WaitRunning("phase-reader")
	b := managertest.New(t, "warm-reads", descs("b")).SameAPI(a)
	lists := countLists(b, "pods")
	b.Options = fastElection("b")
	b.Options.WarmStandby = true
	b.Start()
	managertest.Eventually(t, "b's warm list", func() bool { return lists.Load() == 1 })
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "b's readers ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["b/node-reader"] != nil && seen["b/phase-reader"] != nil
	})
	if n := lists.Load(); n != 1 {
		t.Errorf("b listed pods %d times, want once (one warm informer for both readers)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, who := range []string{"b/node-reader", "b/phase-reader"} {
		p := seen[who]
		if p.Spec.NodeName != "n1" || p.Status.Phase != corev1.PodRunning ||
			p.Spec.Containers != nil {
			t.Errorf("%s found %+v, want nodeName and phase, and no containers", who, p)
		}
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}
