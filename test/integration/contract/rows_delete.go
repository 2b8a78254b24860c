package contract

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

var deleteRows = []Row{{
	Name:    "delete/without-finalizers-removes",
	Promise: "a delete of an object without finalizers removes it, and watchers get DELETED",
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		w, err := e.configMaps().Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		if err := e.configMaps().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			return step("delete", err)
		}
		if _, err := expectEvent(ctx, w, watch.Deleted, "a"); err != nil {
			return err
		}
		_, err = e.configMaps().Get(ctx, "a", metav1.GetOptions{})
		return wantStatus("get after delete", err, http.StatusNotFound, metav1.StatusReasonNotFound)
	},
}, {
	Name: "delete/with-finalizers-marks-and-bumps-generation",
	Promise: "a delete of an object with finalizers sets deletionTimestamp and bumps the " +
		"generation (where there is one); removing the last finalizer removes it",
	Run: func(ctx context.Context, e *Env) error {
		o := custom(Widgets, "w", spec("size", int64(1)))
		o.SetFinalizers([]string{"x/a"})
		created, err := e.of(Widgets).Create(ctx, o, metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		w, err := e.of(Widgets).
			Watch(ctx, metav1.ListOptions{ResourceVersion: created.GetResourceVersion()})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		if err := e.of(Widgets).Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
			return step("delete", err)
		}
		marked, err := expectEvent(ctx, w, watch.Modified, "w")
		if err != nil {
			return err
		}
		if marked.GetDeletionTimestamp() == nil || marked.GetDeletionGracePeriodSeconds() == nil ||
			*marked.GetDeletionGracePeriodSeconds() != 0 {
			return fmt.Errorf("deletionTimestamp %v, deletionGracePeriodSeconds %v; want set, 0",
				marked.GetDeletionTimestamp(), marked.GetDeletionGracePeriodSeconds())
		}
		if err := wantGeneration("a delete held by a finalizer", marked, 2); err != nil {
			return err
		}
		cm := configMap("c")
		cm.Finalizers = []string{"x/a"}
		if _, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return step("create ConfigMap", err)
		}
		if err := e.configMaps().Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
			return step("delete ConfigMap", err)
		}
		if cm, err = e.configMaps().Get(ctx, "c", metav1.GetOptions{}); err != nil {
			return step("get ConfigMap", err)
		}
		if err := wantGeneration("a ConfigMap's delete held by a finalizer", cm, 0); err != nil {
			return err
		}
		if _, err := e.of(Widgets).Patch(ctx, "w", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			return step("removing the finalizer", err)
		}
		if _, err := expectEvent(ctx, w, watch.Deleted, "w"); err != nil {
			return err
		}
		_, err = e.of(Widgets).Get(ctx, "w", metav1.GetOptions{})
		return wantStatus("get after the finalizer went", err, http.StatusNotFound,
			metav1.StatusReasonNotFound)
	},
}, {
	Name:    "delete/adding-a-finalizer-while-deleting-is-422",
	Promise: "an update adding a finalizer to an object being deleted is 422 Invalid",
	Run: func(ctx context.Context, e *Env) error {
		cm := configMap("a")
		cm.Finalizers = []string{"x/a"}
		if _, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		if err := e.configMaps().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			return step("delete", err)
		}
		cm, err := e.configMaps().Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			return step("get", err)
		}
		cm.Finalizers = append(cm.Finalizers, "x/b")
		_, err = e.configMaps().Update(ctx, cm, metav1.UpdateOptions{})
		if err := wantStatus("adding a finalizer", err, http.StatusUnprocessableEntity,
			metav1.StatusReasonInvalid); err != nil {
			return err
		}
		_, err = e.configMaps().Patch(ctx, "a", types.StrategicMergePatchType,
			[]byte(`{"metadata":{"finalizers":["x/c"]}}`), metav1.PatchOptions{})
		if err := wantStatus("adding a finalizer by patch", err, http.StatusUnprocessableEntity,
			metav1.StatusReasonInvalid); err != nil {
			return err
		}
		return e.clearFinalizers(ctx)
	},
}, {
	Name: "delete/again-while-deleting-changes-nothing",
	Promise: "a second delete of an object being deleted succeeds and writes nothing " +
		"(the resourceVersion stays)",
	Run: func(ctx context.Context, e *Env) error {
		cm := configMap("a")
		cm.Finalizers = []string{"x/a"}
		if _, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		if err := e.configMaps().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			return step("delete", err)
		}
		first, err := e.configMaps().Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			return step("get", err)
		}
		if err := e.configMaps().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			return step("second delete", err)
		}
		second, err := e.configMaps().Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			return step("get", err)
		}
		if err := sameRV("a second delete", first, second); err != nil {
			return err
		}
		return e.clearFinalizers(ctx)
	},
}, {
	Name:    "delete/preconditions",
	Promise: "a delete whose uid or resourceVersion precondition does not hold is 409 Conflict",
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		err = e.configMaps().
			Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
				UID: ptr.To(types.UID(uidA))}})
		if err := wantStatus("delete, another uid", err, http.StatusConflict,
			metav1.StatusReasonConflict); err != nil {
			return err
		}
		err = e.configMaps().
			Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
				ResourceVersion: ptr.To(cm.ResourceVersion + "1")}})
		if err := wantStatus("delete, another resourceVersion", err, http.StatusConflict,
			metav1.StatusReasonConflict); err != nil {
			return err
		}
		err = e.configMaps().
			Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
				UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}})
		return step("delete, both preconditions holding", err)
	},
}, {
	Name: "delete/propagation-policy",
	Promise: "propagationPolicy Foreground and Orphan keep the object with a " +
		"foregroundDeletion or orphan finalizer (for the garbage collector); Background " +
		"deletes it",
	Run: func(ctx context.Context, e *Env) error {
		for _, c := range []struct {
			name      string
			policy    metav1.DeletionPropagation
			finalizer string
		}{
			{"fg", metav1.DeletePropagationForeground, metav1.FinalizerDeleteDependents},
			{"or", metav1.DeletePropagationOrphan, metav1.FinalizerOrphanDependents},
			{"bg", metav1.DeletePropagationBackground, ""},
		} {
			_, err := e.configMaps().Create(ctx, configMap(c.name), metav1.CreateOptions{})
			if err != nil {
				return step("create", err)
			}
			if err := e.configMaps().Delete(ctx, c.name,
				metav1.DeleteOptions{PropagationPolicy: &c.policy}); err != nil {
				return step("delete "+string(c.policy), err)
			}
			cm, err := e.configMaps().Get(ctx, c.name, metav1.GetOptions{})
			if c.finalizer == "" {
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("after a %s delete: %v, %v; want it gone", c.policy, cm, err)
				}
				continue
			}
			if err != nil {
				return step("get after a "+string(c.policy)+" delete", err)
			}
			if cm.DeletionTimestamp == nil || !slices.Equal(cm.Finalizers, []string{c.finalizer}) {
				return fmt.Errorf("after a %s delete: deletionTimestamp %v, finalizers %q; "+
					"want set, [%s]", c.policy, cm.DeletionTimestamp, cm.Finalizers, c.finalizer)
			}
		}
		return nil
	},
}, {
	Name: "delete/pod-on-node-is-graceful",
	Promise: "a delete of a Pod bound to a node marks it for its grace period (30s unless " +
		"the spec says) and bumps its generation; gracePeriodSeconds 0 removes it; a Pod " +
		"bound to no node goes at once",
	Run: func(ctx context.Context, e *Env) error {
		pods := e.Kube.CoreV1().Pods(e.Namespace)
		if _, err := e.createPod(ctx, pod("bound", "node-that-does-not-exist")); err != nil {
			return step("create", err)
		}
		before := time.Now()
		if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
			return step("delete", err)
		}
		p, err := pods.Get(ctx, "bound", metav1.GetOptions{})
		if err != nil {
			return step("get after delete", err)
		}
		grace := p.DeletionGracePeriodSeconds
		if p.DeletionTimestamp == nil || grace == nil || *grace != 30 ||
			p.DeletionTimestamp.Time.Before(before.Add(25*time.Second)) {
			return fmt.Errorf("deletionTimestamp %v (deleted at %v), grace %v; want 30s on",
				p.DeletionTimestamp, before, grace)
		}
		if err := wantGeneration("a graceful delete", p, 2); err != nil {
			return err
		}
		if err := pods.Delete(ctx, "bound",
			metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			return step("delete with grace 0", err)
		}
		if _, err := pods.Get(ctx, "bound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("after a delete with grace 0: %v, want NotFound", err)
		}
		if _, err := e.createPod(ctx, pod("unbound", "")); err != nil {
			return step("create", err)
		}
		if err := pods.Delete(ctx, "unbound", metav1.DeleteOptions{}); err != nil {
			return step("delete", err)
		}
		_, err = pods.Get(ctx, "unbound", metav1.GetOptions{})
		return wantStatus("get after deleting a Pod bound to no node", err, http.StatusNotFound,
			metav1.StatusReasonNotFound)
	},
}, {
	Name:    "delete/collection",
	Promise: "a delete of a collection deletes the objects its selector matches, and only them",
	Run: func(ctx context.Context, e *Env) error {
		for name, l := range map[string]string{"a": "x", "b": "x", "c": "y"} {
			cm := configMap(name)
			cm.Labels = map[string]string{"l": l}
			if _, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				return step("create", err)
			}
		}
		if err := e.configMaps().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: "l=x"}); err != nil {
			return step("delete collection", err)
		}
		list, err := e.configMaps().List(ctx, metav1.ListOptions{})
		if err != nil {
			return step("list", err)
		}
		if names := names(list.Items); !slices.Equal(names, []string{"c"}) {
			return fmt.Errorf("left %v, want [c]", names)
		}
		return nil
	},
}, {
	Name:    "delete/missing-is-404",
	Promise: "a delete of an object that does not exist is 404 NotFound",
	Run: func(ctx context.Context, e *Env) error {
		err := e.configMaps().Delete(ctx, "nope", metav1.DeleteOptions{})
		return wantStatus("delete", err, http.StatusNotFound, metav1.StatusReasonNotFound)
	},
}}

// names lists the names of objects, sorted.
func names[T any, PT interface {
	*T
	GetName() string
}](items []T) []string {
	var out []string
	for i := range items {
		out = append(out, PT(&items[i]).GetName())
	}
	slices.Sort(out)
	return out
}
