package podcontrol

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var owner = &appsv1.ReplicaSet{
	ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "rs-uid"},
}

func controllerRef() *metav1.OwnerReference {
	return metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
}

func template() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"a": "b"},
			Finalizers:  []string{"example.com/f"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
}

func newClient(
	t *testing.T,
	reactor clienttesting.ReactionFunc,
	objs ...runtime.Object,
) (*Client, *fake.Clientset, *record.FakeRecorder) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	if reactor != nil {
		cs.PrependReactor("*", "pods", reactor)
	}
	rec := record.NewFakeRecorder(10)
	c, err := New(cs, rec)
	if err != nil {
		t.Fatal(err)
	}
	return c, cs, rec
}

func TestCreatePod(t *testing.T) {
	terminating := apierrors.NewForbidden(
		schema.GroupResource{Resource: "pods"},
		"",
		errors.New("namespace is terminating"),
	)
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{
		{Type: corev1.NamespaceTerminatingCause},
	}
	tests := []struct {
		name       string
		createErr  error
		template   *corev1.PodTemplateSpec
		ref        *metav1.OwnerReference
		wantErr    string
		wantEvent  string
		wantCreate bool
		// generateName is passed to CreatePodWithGenerateName; wantPrefix
		// is the generateName the created pod must carry.
		generateName, wantPrefix string
	}{
		{
			name:       "created",
			template:   template(),
			ref:        controllerRef(),
			wantEvent:  "Normal SuccessfulCreate Created pod: ",
			wantCreate: true,
		},
		{
			name:         "created with a generateName",
			template:     template(),
			ref:          controllerRef(),
			wantEvent:    "Normal SuccessfulCreate Created pod: web-2-",
			wantCreate:   true,
			generateName: "web-2-",
			wantPrefix:   "web-2-",
		},
		{
			name: "quota forbidden",
			createErr: apierrors.NewForbidden(
				schema.GroupResource{Resource: "pods"},
				"",
				errors.New("exceeded quota"),
			),
			template:   template(),
			ref:        controllerRef(),
			wantErr:    "exceeded quota",
			wantEvent:  "Warning FailedCreate Error creating: ",
			wantCreate: true,
		},
		{
			name:       "namespace terminating: no event",
			createErr:  terminating,
			template:   template(),
			ref:        controllerRef(),
			wantErr:    "terminating",
			wantCreate: true,
		},
		{
			name:     "no labels",
			template: &corev1.PodTemplateSpec{},
			ref:      controllerRef(),
			wantErr:  "without labels",
		},
		{
			name:     "incomplete reference",
			template: template(),
			ref:      &metav1.OwnerReference{Kind: "ReplicaSet", Name: "web"},
			wantErr:  "apiVersion must not be empty",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var created *corev1.Pod
			c, _, rec := newClient(t, func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetVerb() != "create" {
					return false, nil, nil
				}
				created = a.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
				if tt.createErr != nil {
					return true, nil, tt.createErr
				}
				p := created.DeepCopy()
				p.Name = p.GenerateName + "abcde"
				return true, p, nil
			})
			var err error
			if tt.generateName == "" {
				err = c.CreatePod(t.Context(), "ns", tt.template, owner, tt.ref)
			} else {
				err = c.CreatePodWithGenerateName(t.Context(), "ns", tt.template, owner, tt.ref, tt.generateName)
			}
			if tt.wantErr == "" && err != nil ||
				tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("CreatePod = %v, want error containing %q", err, tt.wantErr)
			}
			if (created != nil) != tt.wantCreate {
				t.Fatalf("create call made: %v, want %v", created != nil, tt.wantCreate)
			}
			evs := controllertest.Events(rec)
			switch {
			case tt.wantEvent == "" && len(evs) > 0:
				t.Errorf("events %q, want none", evs)
			case tt.wantEvent != "" && (len(evs) != 1 || !strings.HasPrefix(evs[0], tt.wantEvent)):
				t.Errorf("events %q, want one starting with %q", evs, tt.wantEvent)
			}
			if created == nil {
				return
			}
			prefix := tt.wantPrefix
			if prefix == "" {
				prefix = "web-"
			}
			if created.GenerateName != prefix || created.Name != "" {
				t.Errorf(
					"name %q generateName %q, want generateName %s",
					created.Name,
					created.GenerateName,
					prefix,
				)
			}
			if !equality.Semantic.DeepEqual(
				created.OwnerReferences,
				[]metav1.OwnerReference{*tt.ref},
			) {
				t.Errorf("ownerReferences %+v", created.OwnerReferences)
			}
			if created.Labels["app"] != "web" || created.Annotations["a"] != "b" ||
				len(created.Finalizers) != 1 ||
				created.Spec.Containers[0].Image != "img" {
				t.Errorf("pod not built from the template: %+v", created)
			}
		})
	}
}

func TestFromTemplateCopies(t *testing.T) {
	tmpl := template()
	p, err := FromTemplate(tmpl, owner, controllerRef())
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["x"] = "y"
	p.Spec.Containers[0].Image = "changed"
	p.Finalizers[0] = "changed"
	if tmpl.Labels["x"] != "" || tmpl.Spec.Containers[0].Image != "img" ||
		tmpl.Finalizers[0] != "example.com/f" {
		t.Error("the pod shares memory with the template")
	}
}

func TestGenerateName(t *testing.T) {
	for owner, want := range map[string]string{
		"web":                    "web-",
		strings.Repeat("a", 253): strings.Repeat("a", 253) + "-", // the API server truncates
		"Not_A_Name":             "Not_A_Name",
	} {
		if got := GenerateName(owner); got != want {
			t.Errorf(
				"GenerateName(%.12s…) = %.12s… (len %d), want len %d",
				owner,
				got,
				len(got),
				len(want),
			)
		}
	}
}

func TestDeletePod(t *testing.T) {
	tests := []struct {
		name      string
		exists    bool
		deleteErr error
		wantErr   func(error) bool
		wantEvent string
	}{
		{
			name:      "deleted",
			exists:    true,
			wantErr:   func(err error) bool { return err == nil },
			wantEvent: "Normal SuccessfulDelete Deleted pod: p",
		},
		{name: "not found: no event", wantErr: apierrors.IsNotFound},
		{
			name:      "failure",
			exists:    true,
			deleteErr: errors.New("boom"),
			wantErr:   func(err error) bool { return err != nil && strings.Contains(err.Error(), "boom") },
			wantEvent: "Warning FailedDelete Error deleting: boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.exists {
				objs = append(
					objs,
					&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}},
				)
			}
			c, _, rec := newClient(t, func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetVerb() == "delete" && tt.deleteErr != nil {
					return true, nil, tt.deleteErr
				}
				return false, nil, nil
			}, objs...)
			err := c.DeletePod(t.Context(), "ns", "p", owner)
			if !tt.wantErr(err) {
				t.Errorf("DeletePod = %v", err)
			}
			evs := controllertest.Events(rec)
			if tt.wantEvent == "" && len(evs) > 0 ||
				tt.wantEvent != "" && (len(evs) != 1 || evs[0] != tt.wantEvent) {
				t.Errorf("events %q, want %q", evs, tt.wantEvent)
			}
		})
	}
}

func TestPatchPod(t *testing.T) {
	c, cs, _ := newClient(
		t,
		nil,
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}},
	)
	if err := c.PatchPod(t.Context(), "ns", "p", []byte(`{"metadata":{"labels":{"k":"v"}}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Pods("ns").Get(t.Context(), "p", metav1.GetOptions{})
	if err != nil || got.Labels["k"] != "v" {
		t.Errorf("after PatchPod: %v, %v", got.Labels, err)
	}
	var sawStrategic bool
	for _, a := range cs.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok &&
			p.GetPatchType() == types.StrategicMergePatchType {
			sawStrategic = true
		}
	}
	if !sawStrategic {
		t.Error("no strategic-merge patch was sent")
	}
}

func TestValidateControllerRef(t *testing.T) {
	if err := ValidateControllerRef(controllerRef()); err != nil {
		t.Errorf("complete reference rejected: %v", err)
	}
	err := ValidateControllerRef(&metav1.OwnerReference{Controller: ptr.To(false)})
	for _, want := range []string{"apiVersion", "kind", "name", "uid", "controller must be true", "blockOwnerDeletion"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(nil, nil); err == nil || !strings.Contains(err.Error(), "client") ||
		!strings.Contains(err.Error(), "recorder") {
		t.Errorf("New(nil, nil) = %v", err)
	}
}
