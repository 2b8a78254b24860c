package rootcacertpublisher

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const testCA = "-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"

func namespace(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NamespaceStatus{Phase: phase},
	}
}

func configMap(ns string, data, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ns,
			Name:            ConfigMapName,
			Annotations:     annotations,
			Labels:          map[string]string{"keep": "me"},
			ResourceVersion: "7",
		},
		Data:       data,
		BinaryData: map[string][]byte{"bin": []byte("kept")},
	}
}

func newFixture(t *testing.T, objs ...runtime.Object) (*controller, *fake.Clientset) {
	t.Helper()
	nsIdx := controllertest.ClusterIndexer(t, controllertest.OfType[*corev1.Namespace](objs)...)
	cmIdx := controllertest.NamespacedIndexer(t, controllertest.OfType[*corev1.ConfigMap](objs)...)
	client := fake.NewClientset(controllertest.DeepCopies(objs...)...)
	c := &controller{
		client:     client,
		namespaces: corelisters.NewNamespaceLister(nsIdx),
		configMaps: corelisters.NewConfigMapLister(cmIdx),
		data:       map[string]string{DataKey: testCA},
		workers:    1,
	}
	c.loop = workloop.New("test", c.sync, workloop.Options{})
	t.Cleanup(c.loop.ShutDown)
	return c, client
}

func writes(client *fake.Clientset) (verbs []string, last *corev1.ConfigMap) {
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case k8stesting.CreateActionImpl:
			verbs = append(verbs, "create")
			last = a.Object.(*corev1.ConfigMap)
		case k8stesting.UpdateActionImpl:
			verbs = append(verbs, "update")
			last = a.Object.(*corev1.ConfigMap)
		}
	}
	return verbs, last
}

func TestSync(t *testing.T) {
	good := map[string]string{DataKey: testCA}
	desc := map[string]string{DescriptionAnnotation: Description}
	terminating := apierrors.NewForbidden(
		corev1.Resource("configmaps"),
		ConfigMapName,
		errors.New("namespace is terminating"),
	)
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{
		{Type: corev1.NamespaceTerminatingCause},
	}
	active := namespace("ns", corev1.NamespaceActive)
	tests := []struct {
		name      string
		objs      []runtime.Object
		reactErr  error // returned by every write
		wantVerbs []string
		wantErr   bool
		// wantAnnotations are the annotations of the written object, if any.
		wantAnnotations map[string]string
	}{
		{
			name:            "missing: created",
			objs:            []runtime.Object{active},
			wantVerbs:       []string{"create"},
			wantAnnotations: desc,
		},
		{name: "correct: untouched", objs: []runtime.Object{active, configMap("ns", good, desc)}},
		{
			name: "custom description kept when data is right",
			objs: []runtime.Object{
				active,
				configMap("ns", good, map[string]string{DescriptionAnnotation: "mine"}),
			},
		},
		{
			name: "wrong bundle: fixed",
			objs: []runtime.Object{
				active,
				configMap("ns", map[string]string{DataKey: "old"}, map[string]string{"other": "x"}),
			},
			wantVerbs: []string{
				"update",
			},
			wantAnnotations: map[string]string{"other": "x", DescriptionAnnotation: Description},
		},
		{
			name: "extra key: removed",
			objs: []runtime.Object{
				active,
				configMap("ns", map[string]string{DataKey: testCA, "extra": "y"}, desc),
			},
			wantVerbs:       []string{"update"},
			wantAnnotations: desc,
		},
		{
			name:            "no data",
			objs:            []runtime.Object{active, configMap("ns", nil, desc)},
			wantVerbs:       []string{"update"},
			wantAnnotations: desc,
		},
		{
			name:            "annotation missing: added",
			objs:            []runtime.Object{active, configMap("ns", good, nil)},
			wantVerbs:       []string{"update"},
			wantAnnotations: desc,
		},
		{
			name: "terminating namespace: skipped",
			objs: []runtime.Object{namespace("ns", corev1.NamespaceTerminating)},
		},
		{name: "namespace gone: skipped"},
		{
			name:      "create: already exists",
			objs:      []runtime.Object{active},
			reactErr:  apierrors.NewAlreadyExists(corev1.Resource("configmaps"), ConfigMapName),
			wantVerbs: []string{"create"},
		},
		{
			name:      "create: namespace terminating",
			objs:      []runtime.Object{active},
			reactErr:  terminating,
			wantVerbs: []string{"create"},
		},
		{
			name:      "create: other error retried",
			objs:      []runtime.Object{active},
			reactErr:  apierrors.NewInternalError(errors.New("x")),
			wantVerbs: []string{"create"},
			wantErr:   true,
		},
		{
			name: "update: conflict retried",
			objs: []runtime.Object{active, configMap("ns", nil, nil)},
			reactErr: apierrors.NewConflict(
				corev1.Resource("configmaps"),
				ConfigMapName,
				errors.New("rv"),
			),
			wantVerbs: []string{"update"},
			wantErr:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := newFixture(t, tt.objs...)
			if tt.reactErr != nil {
				for _, verb := range []string{"create", "update"} {
					client.PrependReactor(
						verb,
						"configmaps",
						func(k8stesting.Action) (bool, runtime.Object, error) {
							return true, nil, tt.reactErr
						},
					)
				}
			}
			var before *corev1.ConfigMap
			if cm, err := c.configMaps.ConfigMaps("ns").Get(ConfigMapName); err == nil {
				before = cm.DeepCopy()
			}
			err := c.sync(controllertest.LogContext(t), "ns")
			if (err != nil) != tt.wantErr {
				t.Errorf("sync error %v, want error %v", err, tt.wantErr)
			}
			verbs, written := writes(client)
			if strings.Join(verbs, ",") != strings.Join(tt.wantVerbs, ",") {
				t.Fatalf("writes %v, want %v", verbs, tt.wantVerbs)
			}
			if written != nil && tt.reactErr == nil {
				if !maps.Equal(written.Data, map[string]string{DataKey: testCA}) {
					t.Errorf("data %v", written.Data)
				}
				if !maps.Equal(written.Annotations, tt.wantAnnotations) {
					t.Errorf("annotations %v, want %v", written.Annotations, tt.wantAnnotations)
				}
				if verbs[0] == "update" &&
					(written.Labels["keep"] != "me" || string(written.BinaryData["bin"]) != "kept" || written.ResourceVersion != "7") {
					t.Errorf("update lost labels, binaryData or resourceVersion: %+v", written)
				}
			}
			if before != nil {
				after, _ := c.configMaps.ConfigMaps("ns").Get(ConfigMapName)
				if !maps.Equal(after.Data, before.Data) ||
					!maps.Equal(after.Annotations, before.Annotations) {
					t.Error("the lister's config map was modified")
				}
			}
		})
	}
}

func TestFilters(t *testing.T) {
	other := configMap("a", nil, nil)
	other.Name = "other"
	active := namespace("a", corev1.NamespaceActive)
	terminating := namespace("a", corev1.NamespaceTerminating)
	tombstone := cache.DeletedFinalStateUnknown{Key: "a/" + ConfigMapName,
		Obj: configMap("a", nil, nil)}
	tests := []struct {
		name     string
		filter   workloop.Filter
		old, obj any
		want     bool
	}{
		{"namespace added", addedOrActive, nil, active, true},
		{"active namespace updated", addedOrActive, active, active, true},
		{"terminating namespace updated", addedOrActive, active, terminating, false},
		{"our config map changed", isRootCAConfigMap, nil, configMap("a", nil, nil), true},
		{"our config map deleted, tombstone", isRootCAConfigMap, nil, tombstone, true},
		{"other config map", isRootCAConfigMap, nil, other, false},
		{"garbage", isRootCAConfigMap, nil, 42, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.filter(tt.old, tt.obj); got != tt.want {
				t.Errorf("filter = %v, want %v", got, tt.want)
			}
		})
	}
	if got := namespaceOf(configMap("a", nil, nil)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("namespaceOf = %v, want [a]", got)
	}
}

// TestRunRetriesAfterError: a failed sync is retried by the loop, and other
// namespaces are not blocked meanwhile.
func TestRunRetriesAfterError(t *testing.T) {
	c, client := newFixture(
		t,
		namespace("bad", corev1.NamespaceActive),
		namespace("good", corev1.NamespaceActive),
	)
	failures := 2
	client.PrependReactor(
		"create",
		"configmaps",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetNamespace() == "bad" && failures > 0 {
				failures--
				return true, nil, apierrors.NewInternalError(errors.New("transient"))
			}
			return false, nil, nil
		},
	)
	c.loop.Add("bad")
	c.loop.Add("good")
	ctx, cancel := context.WithCancel(controllertest.LogContext(t))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	created := func(ns string) bool {
		_, err := client.Tracker().
			Get(corev1.SchemeGroupVersion.WithResource("configmaps"), ns, ConfigMapName)
		return err == nil
	}
	controllertest.WaitFor(
		t,
		"both config maps",
		func() bool { return created("bad") && created("good") },
	)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
