package nodelifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
)

// podsOn returns the cached pods bound to the named node.
func (c *controller) podsOn(node string) ([]*corev1.Pod, error) {
	objs, err := c.podIndex.ByIndex(index.PodsByNode, node)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// markPodsNotReady sets the Ready condition of node's pods that have one
// to False, recording a NodeNotReady event on each pod written.
func (c *controller) markPodsNotReady(ctx context.Context, pods []*corev1.Pod,
	node string) error {
	log := logr.FromContextOrDiscard(ctx)
	log.V(2).Info("Update ready status of pods on node", "node", node)
	var errs []error
	for _, p := range pods {
		if p.Spec.NodeName != node {
			continue
		}
		var ready *corev1.PodCondition
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				ready = &p.Status.Conditions[i]
				break
			}
		}
		if ready == nil || ready.Status == corev1.ConditionFalse {
			continue // no Ready condition, or not ready already: nothing to write
		}
		log.V(2).Info("Updating ready status of pod to false", "pod", klogRef(p))
		if err := c.patchNotReady(ctx, p, *ready); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			log.Info("Failed to update status for pod", "pod", klogRef(p), "err", err)
			errs = append(errs, err)
			continue
		}
		c.recorder.Event(p, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
	}
	return errors.Join(errs...)
}

func klogRef(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// patchNotReady writes ready with status False and a transition now, by
// a strategic merge patch of the pod's status conditions that holds the
// cached resourceVersion (as KCM's update of the cached pod does): the
// cache keeps only some of a pod's fields, so the pod is never written
// whole.
func (c *controller) patchNotReady(ctx context.Context, p *corev1.Pod,
	ready corev1.PodCondition) error {
	ready.Status = corev1.ConditionFalse
	ready.LastTransitionTime = c.now()
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": p.ResourceVersion},
		"status":   map[string]any{"conditions": []corev1.PodCondition{ready}},
	})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name,
		types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// syncPod marks a pod newly bound to a node that is not Ready not ready.
func (c *controller) syncPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	node := pod.Spec.NodeName
	health := c.health.get(node)
	if health == nil {
		return nil // not judged yet, or gone
	}
	if _, err := c.nodes.Get(node); err != nil {
		return fmt.Errorf("reading node %s of pod %s: %w", node, key, err)
	}
	ready := readyCondition(health.status)
	if ready == nil || ready.Status == corev1.ConditionTrue {
		return nil
	}
	if err := c.markPodsNotReady(ctx, []*corev1.Pod{pod}, node); err != nil {
		return fmt.Errorf("marking pod %s not ready on node %s: %w", key, node, err)
	}
	return nil
}
