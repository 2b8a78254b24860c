// Package podcontrol creates, deletes and patches pods on behalf of an owning
// controller object, recording on the owner the events
// kube-controller-manager records (SuccessfulCreate, FailedCreate,
// SuccessfulDelete, FailedDelete).
//
// Guarantees: a created pod carries the template's labels, annotations,
// finalizers and spec (deep-copied) and exactly the given controller
// reference; it is named by the API server from generateName "<owner>-"
// (or "<owner>" when that is not a valid prefix); a create without labels
// or with an incomplete controller reference is refused before any call.
//
// Non-guarantees: no retries, no rate limiting beyond the client's, no
// expectations bookkeeping (the caller owns that).
package podcontrol

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
)

// Event reasons, as kube-controller-manager records them on the owner.
const (
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
)

// Interface is what a controller needs to change pods. Owner is the object
// events are recorded on; it must be a registered, typed API object.
type Interface interface {
	// CreatePod creates one pod from template in namespace, controlled by
	// ref.
	CreatePod(
		ctx context.Context,
		namespace string,
		template *corev1.PodTemplateSpec,
		owner runtime.Object,
		ref *metav1.OwnerReference,
	) error
	// CreatePodWithGenerateName is CreatePod with the pod named from
	// generateName ("" is CreatePod's "<owner>-").
	CreatePodWithGenerateName(
		ctx context.Context,
		namespace string,
		template *corev1.PodTemplateSpec,
		owner runtime.Object,
		ref *metav1.OwnerReference,
		generateName string,
	) error
	// DeletePod deletes the named pod. A NotFound error is returned as is
	// (callers usually treat it as success) and records no event.
	DeletePod(ctx context.Context, namespace, name string, owner runtime.Object) error
	// PatchPod applies a strategic-merge patch to the named pod.
	PatchPod(ctx context.Context, namespace, name string, patch []byte) error
}

// Client implements Interface over a clientset and an event recorder.
type Client struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	// OnCreate, if set, is called with every pod the API server created,
	// as it returned it (with its resourceVersion), for a staleness guard.
	OnCreate func(pod *corev1.Pod)
}

var _ Interface = (*Client)(nil)

// New returns a Client. Both arguments are required.
func New(client kubernetes.Interface, recorder record.EventRecorder) (*Client, error) {
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("podcontrol: client must not be nil"))
	}
	if recorder == nil {
		errs = append(errs, errors.New("podcontrol: recorder must not be nil"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Client{client: client, recorder: recorder}, nil
}

// CreatePod implements Interface.
func (c *Client) CreatePod(
	ctx context.Context,
	namespace string,
	template *corev1.PodTemplateSpec,
	owner runtime.Object,
	ref *metav1.OwnerReference,
) error {
	return c.CreatePodWithGenerateName(ctx, namespace, template, owner, ref, "")
}

// CreatePodWithGenerateName is CreatePod with the pod named from
// generateName instead of "<owner>-" (an Indexed Job names its pods
// "<job>-<index>-"); an empty generateName is CreatePod's.
func (c *Client) CreatePodWithGenerateName(
	ctx context.Context,
	namespace string,
	template *corev1.PodTemplateSpec,
	owner runtime.Object,
	ref *metav1.OwnerReference,
	generateName string,
) error {
	pod, err := FromTemplate(template, owner, ref)
	if err != nil {
		return err
	}
	if generateName != "" {
		pod.GenerateName = generateName
	}
	if len(pod.Labels) == 0 {
		return errors.New(
			"podcontrol: refusing to create a pod without labels (the owner could never select it)",
		)
	}
	created, err := c.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		// A terminating namespace refuses every create; an event per
		// attempt would only be noise.
		if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			c.recorder.Eventf(
				owner,
				corev1.EventTypeWarning,
				ReasonFailedCreate,
				"Error creating: %v",
				err,
			)
		}
		return err
	}
	c.recorder.Eventf(
		owner,
		corev1.EventTypeNormal,
		ReasonSuccessfulCreate,
		"Created pod: %v",
		created.Name,
	)
	if c.OnCreate != nil {
		c.OnCreate(created)
	}
	return nil
}

// DeletePod implements Interface.
func (c *Client) DeletePod(
	ctx context.Context,
	namespace, name string,
	owner runtime.Object,
) error {
	err := c.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case err == nil:
		c.recorder.Eventf(
			owner,
			corev1.EventTypeNormal,
			ReasonSuccessfulDelete,
			"Deleted pod: %v",
			name,
		)
		return nil
	case apierrors.IsNotFound(err):
		return err
	default:
		c.recorder.Eventf(
			owner,
			corev1.EventTypeWarning,
			ReasonFailedDelete,
			"Error deleting: %v",
			err,
		)
		return fmt.Errorf("deleting pod %s/%s: %w", namespace, name, err)
	}
}

// PatchPod implements Interface.
func (c *Client) PatchPod(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := c.client.CoreV1().
		Pods(namespace).
		Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// FromTemplate returns the pod CreatePod would create: the template's
// labels, annotations, finalizers and spec, copied; generateName from the
// owner's name; ref as its only owner reference.
func FromTemplate(
	template *corev1.PodTemplateSpec,
	owner runtime.Object,
	ref *metav1.OwnerReference,
) (*corev1.Pod, error) {
	if template == nil {
		return nil, errors.New("podcontrol: template must not be nil")
	}
	if err := ValidateControllerRef(ref); err != nil {
		return nil, err
	}
	acc, err := meta.Accessor(owner)
	if err != nil {
		return nil, fmt.Errorf("podcontrol: owner has no object metadata: %w", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    GenerateName(acc.GetName()),
			Labels:          maps.Clone(template.Labels),
			Annotations:     maps.Clone(template.Annotations),
			Finalizers:      slices.Clone(template.Finalizers),
			OwnerReferences: []metav1.OwnerReference{*ref.DeepCopy()},
		},
		Spec: *template.Spec.DeepCopy(),
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	return pod, nil
}

// GenerateName returns "<owner>-", or owner itself when the dash would not
// make a valid pod name prefix.
func GenerateName(owner string) string {
	prefix := owner + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		return owner
	}
	return prefix
}

// ValidateControllerRef reports what is missing from a controller
// reference: apiVersion, kind, name, uid, controller=true and
// blockOwnerDeletion=true are all required.
func ValidateControllerRef(ref *metav1.OwnerReference) error {
	if ref == nil {
		return errors.New("podcontrol: controller reference must not be nil")
	}
	var errs []error
	for _, f := range []struct{ name, value string }{
		{"apiVersion", ref.APIVersion}, {"kind", ref.Kind}, {"name", ref.Name}, {"uid", string(ref.UID)},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("%s must not be empty", f.name))
		}
	}
	if ref.Controller == nil || !*ref.Controller {
		errs = append(errs, errors.New("controller must be true"))
	}
	if ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		errs = append(errs, errors.New("blockOwnerDeletion must be true"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("podcontrol: invalid controller reference: %w", errors.Join(errs...))
	}
	return nil
}
