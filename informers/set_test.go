package informers_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
)

// testTimeout bounds every wait in these tests; nothing should come near it.
const testTimeout = 30 * time.Second

var (
	podsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	widgetsGVR = schema.GroupVersionResource{
		Group:    "example.com",
		Version:  "v1",
		Resource: "widgets",
	}
)

func managedFields() []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{
		Manager:    "kubectl",
		Operation:  metav1.ManagedFieldsOperationApply,
		APIVersion: "v1",
		FieldsType: "FieldsV1",
		FieldsV1:   metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`),
	}}
}

func seededPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace:     "ns",
		Name:          "p",
		Labels:        map[string]string{"app": "x"},
		ManagedFields: managedFields(),
	}}
}

func seededWidget() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:     "ns",
			Name:          "w",
			ManagedFields: managedFields(),
		},
	}
}

type fixture struct {
	set   *informers.Set
	typed *fake.Clientset
	meta  *metadatafake.FakeMetadataClient
}

// newFixture returns a Set over fake clients seeded with typed and metadata
// objects. It does not start the Set.
func newFixture(
	t *testing.T,
	opts informers.Options,
	typedObjs []runtime.Object,
	metaObjs []runtime.Object,
) fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatalf("AddMetaToScheme: %v", err)
	}
	typed := fake.NewClientset(typedObjs...)
	meta := metadatafake.NewSimpleMetadataClient(scheme, metaObjs...)
	return fixture{set: informers.New(typed, meta, opts), typed: typed, meta: meta}
}

// start starts the Set and arranges, at cleanup, to close the stop channel
// and shut the Set down, failing the test if that does not return promptly.
func start(t *testing.T, s *informers.Set) {
	t.Helper()
	stop := make(chan struct{})
	s.Start(stop)
	t.Cleanup(func() {
		close(stop)
		shutdownWithin(t, s)
	})
}

func shutdownWithin(t *testing.T, s *informers.Set) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Shutdown()
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("Shutdown did not return within %v", testTimeout)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestStartedAndSynced(t *testing.T) {
	f := newFixture(t, informers.Options{}, nil, nil)
	s := f.set

	if isClosed(s.Started()) {
		t.Error("Started() closed before Start")
	}
	if err := s.Synced(); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("Synced() before Start = %v, want an error saying not started", err)
	}

	start(t, s)
	if !isClosed(s.Started()) {
		t.Error("Started() not closed after Start")
	}
	if err := s.Synced(); err != nil {
		t.Errorf("Synced() after Start with no informers = %v, want nil", err)
	}

	// A second Start must not panic (close of closed channel) and leaves
	// Started closed.
	stop2 := make(chan struct{})
	defer close(stop2)
	s.Start(stop2)
	if !isClosed(s.Started()) {
		t.Error("Started() not closed after second Start")
	}
}

func TestTypedInformerSyncsAndStripsManagedFields(t *testing.T) {
	tests := []struct {
		name       string
		keep       bool
		wantFields bool
	}{
		{name: "default strips", keep: false, wantFields: false},
		{name: "KeepManagedFields keeps", keep: true, wantFields: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(
				t,
				informers.Options{KeepManagedFields: tt.keep},
				[]runtime.Object{seededPod()},
				nil,
			)
			s := f.set
			pods := s.Typed().Core().V1().Pods()
			pods.Informer() // register before Start
			start(t, s)

			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := s.WaitForCacheSync(ctx); err != nil {
				t.Fatalf("WaitForCacheSync() = %v, want nil", err)
			}
			if err := s.Synced(); err != nil {
				t.Errorf("Synced() after WaitForCacheSync = %v, want nil", err)
			}

			got, err := pods.Lister().Pods("ns").Get("p")
			if err != nil {
				t.Fatalf("lister Get(ns/p) = %v", err)
			}
			if got.Labels["app"] != "x" {
				t.Errorf("cached pod labels = %v, want app=x", got.Labels)
			}
			if has := len(got.ManagedFields) > 0; has != tt.wantFields {
				t.Errorf(
					"cached pod has managedFields = %v (%v), want %v",
					has,
					got.ManagedFields,
					tt.wantFields,
				)
			}
		})
	}
}

func TestMetadataInformerSyncsAndStripsManagedFields(t *testing.T) {
	tests := []struct {
		name       string
		keep       bool
		wantFields bool
	}{
		{name: "default strips", keep: false, wantFields: false},
		{name: "KeepManagedFields keeps", keep: true, wantFields: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(
				t,
				informers.Options{KeepManagedFields: tt.keep},
				nil,
				[]runtime.Object{seededWidget()},
			)
			s := f.set
			inf, err := s.ForResource(widgetsGVR)
			if err != nil {
				t.Fatalf("ForResource(%v) = %v", widgetsGVR, err)
			}
			inf.Informer() // register before Start
			start(t, s)

			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := s.WaitForCacheSync(ctx); err != nil {
				t.Fatalf("WaitForCacheSync() = %v, want nil", err)
			}
			if err := s.Synced(); err != nil {
				t.Errorf("Synced() after WaitForCacheSync = %v, want nil", err)
			}
			obj, err := inf.Lister().ByNamespace("ns").Get("w")
			if err != nil {
				t.Fatalf("lister Get(ns/w) = %v", err)
			}
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				t.Fatalf("cached object is %T, want *PartialObjectMetadata", obj)
			}
			if has := len(m.ManagedFields) > 0; has != tt.wantFields {
				t.Errorf("cached widget has managedFields = %v, want %v", has, tt.wantFields)
			}
		})
	}
}

func TestForResource(t *testing.T) {
	tests := []struct {
		name string
		gvr  schema.GroupVersionResource
		// want returns the informer ForResource must hand out.
		want func(s *informers.Set) cache.SharedIndexInformer
	}{
		{
			name: "typed resource",
			gvr:  podsGVR,
			want: func(s *informers.Set) cache.SharedIndexInformer { return s.Typed().Core().V1().Pods().Informer() },
		},
		{
			name: "unknown resource falls back to metadata",
			gvr:  widgetsGVR,
			want: func(s *informers.Set) cache.SharedIndexInformer {
				return s.Metadata().ForResource(widgetsGVR).Informer()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFixture(t, informers.Options{}, nil, nil).set
			for _, fac := range []struct {
				name string
				f    informers.ObjectOrMetadataFactory
			}{{"Set", s}, {"ObjectOrMetadata()", s.ObjectOrMetadata()}} {
				got, err := fac.f.ForResource(tt.gvr)
				if err != nil {
					t.Fatalf("%s.ForResource(%v) error = %v", fac.name, tt.gvr, err)
				}
				// Typed factories wrap the shared informer anew on every
				// Informer() call, so compare the shared indexer.
				if gotIdx, wantIdx := got.Informer().GetIndexer(), tt.want(s).GetIndexer(); gotIdx != wantIdx {
					t.Errorf(
						"%s.ForResource(%v) is backed by indexer %p, want %p",
						fac.name,
						tt.gvr,
						gotIdx,
						wantIdx,
					)
				}
			}
		})
	}

	t.Run("typed factory does not know widgets", func(t *testing.T) {
		// Guards the premise of the fallback case above.
		s := newFixture(t, informers.Options{}, nil, nil).set
		if _, err := s.Typed().ForResource(widgetsGVR); err == nil {
			t.Errorf(
				"Typed().ForResource(%v) error = nil; the fallback case tests nothing",
				widgetsGVR,
			)
		}
	})
}

func TestWaitForCacheSyncCancelled(t *testing.T) {
	errList := errors.New("list refused by test reactor")
	tests := []struct {
		name     string
		request  func(f fixture)
		wantName string
	}{
		{
			name: "typed",
			request: func(f fixture) {
				f.typed.PrependReactor(
					"list",
					"pods",
					func(clienttesting.Action) (bool, runtime.Object, error) {
						return true, nil, errList
					},
				)
				f.typed.PrependWatchReactor(
					"pods",
					func(clienttesting.Action) (bool, watch.Interface, error) {
						return true, nil, errList
					},
				)
				f.set.Typed().Core().V1().Pods().Informer()
			},
			wantName: reflect.TypeOf(&corev1.Pod{}).String(),
		},
		{
			name: "metadata",
			request: func(f fixture) {
				f.meta.PrependReactor(
					"list",
					"widgets",
					func(clienttesting.Action) (bool, runtime.Object, error) {
						return true, nil, errList
					},
				)
				f.meta.PrependWatchReactor(
					"widgets",
					func(clienttesting.Action) (bool, watch.Interface, error) {
						return true, nil, errList
					},
				)
				if _, err := f.set.ForResource(widgetsGVR); err != nil {
					t.Fatalf("ForResource: %v", err)
				}
			},
			wantName: "metadata " + widgetsGVR.String(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, informers.Options{}, nil, nil)
			tt.request(f)
			start(t, f.set)

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := f.set.WaitForCacheSync(ctx)
			if err == nil {
				t.Fatal(
					"WaitForCacheSync() with a cancelled context and an unsyncable informer = nil, want error",
				)
			}
			if !strings.Contains(err.Error(), tt.wantName) {
				t.Errorf("WaitForCacheSync() error %q does not name %q", err, tt.wantName)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("WaitForCacheSync() error %q does not wrap context.Canceled", err)
			}
			if err := f.set.Synced(); err == nil || !strings.Contains(err.Error(), tt.wantName) {
				t.Errorf("Synced() = %v, want an error naming %q", err, tt.wantName)
			}
		})
	}
}

func TestShutdown(t *testing.T) {
	tests := []struct {
		name  string
		start bool
		times int
	}{
		{name: "after Start", start: true, times: 1},
		{name: "after Start, twice", start: true, times: 2},
		{name: "without Start", start: false, times: 1},
		{name: "without Start, twice", start: false, times: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(
				t,
				informers.Options{},
				[]runtime.Object{seededPod()},
				[]runtime.Object{seededWidget()},
			)
			s := f.set
			s.Typed().Core().V1().Pods().Informer()
			if _, err := s.ForResource(widgetsGVR); err != nil {
				t.Fatalf("ForResource: %v", err)
			}
			if tt.start {
				stop := make(chan struct{})
				s.Start(stop)
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				if err := s.WaitForCacheSync(ctx); err != nil {
					t.Fatalf("WaitForCacheSync() = %v", err)
				}
				close(stop)
			}
			for range tt.times {
				shutdownWithin(t, s)
			}
			goleak.VerifyNone(t)
		})
	}
}

func TestStripManagedFields(t *testing.T) {
	podWithFields := seededPod()
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: seededPod()}
	tests := []struct {
		name string
		in   any
		// want is compared with reflect.DeepEqual.
		want any
		// samePointer requires the output to be the input pointer.
		samePointer bool
	}{
		{
			name: "tombstone unchanged",
			in:   tomb,
			want: cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: seededPod()},
		},
		{
			name: "string unchanged",
			in:   "not an object",
			want: "not an object",
		},
		{
			name: "nil unchanged",
			in:   nil,
			want: nil,
		},
		{
			name:        "pod stripped",
			in:          podWithFields,
			want:        func() *corev1.Pod { p := seededPod(); p.ManagedFields = nil; return p }(),
			samePointer: true,
		},
		{
			name:        "pod without managed fields unchanged",
			in:          func() *corev1.Pod { p := seededPod(); p.ManagedFields = nil; return p }(),
			want:        func() *corev1.Pod { p := seededPod(); p.ManagedFields = nil; return p }(),
			samePointer: true,
		},
		{
			name:        "partial object metadata stripped",
			in:          seededWidget(),
			want:        func() *metav1.PartialObjectMetadata { w := seededWidget(); w.ManagedFields = nil; return w }(),
			samePointer: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := informers.StripManagedFields(tt.in)
			if err != nil {
				t.Fatalf("StripManagedFields() error = %v, want nil", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("StripManagedFields() = %#v, want %#v", got, tt.want)
			}
			if tt.samePointer && got != tt.in {
				t.Errorf(
					"StripManagedFields() returned a different object; want the input modified in place",
				)
			}
		})
	}
}

func TestTypedFor(t *testing.T) {
	other := seededPod()
	other.Namespace, other.Name = "other", "q"
	f := newFixture(t, informers.Options{}, []runtime.Object{seededPod(), other}, nil)
	s := f.set

	if s.TypedFor("") != s.Typed() {
		t.Error(`TypedFor("") is not Typed()`)
	}
	ns := s.TypedFor("ns")
	if s.TypedFor("ns") != ns {
		t.Error(`TypedFor("ns") twice returned two factories; want one shared`)
	}
	pods := ns.Core().V1().Pods()
	pods.Informer() // register before Start
	stop := make(chan struct{})
	s.Start(stop)
	if err := s.Synced(); err != nil && !strings.Contains(err.Error(), "namespace ns") {
		t.Errorf("Synced() before sync = %v, want it to name the namespaced informer", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := s.WaitForCacheSync(ctx); err != nil {
		t.Fatalf("WaitForCacheSync() = %v", err)
	}
	if err := s.Synced(); err != nil {
		t.Errorf("Synced() = %v, want nil", err)
	}

	got, err := pods.Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Namespace != "ns" {
		t.Fatalf("namespaced lister = %v, want only ns/p", got)
	}
	if len(got[0].ManagedFields) != 0 {
		t.Errorf("namespaced cache kept managedFields %v", got[0].ManagedFields)
	}
	var listedIn []string
	for _, a := range f.typed.Actions() {
		if a.GetVerb() == "list" && a.GetResource() == podsGVR {
			listedIn = append(listedIn, a.GetNamespace())
		}
	}
	if !reflect.DeepEqual(listedIn, []string{"ns"}) {
		t.Errorf("pods listed in namespaces %q, want only [ns]", listedIn)
	}

	close(stop)
	shutdownWithin(t, s)
	goleak.VerifyNone(t)
}
