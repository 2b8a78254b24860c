package contract

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

var dryRunRows = []Row{{
	Name:    "dry-run/create-stores-nothing",
	Promise: "a create with dryRun=All answers as a create would, and stores nothing",
	Run: func(ctx context.Context, e *Env) error {
		got, err := e.configMaps().Create(ctx, configMap("a", "k", "1"),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return step("dry-run create", err)
		}
		if got.Name != "a" || got.Data["k"] != "1" {
			return fmt.Errorf("answered %v, want the ConfigMap", got)
		}
		_, err = e.configMaps().Get(ctx, "a", metav1.GetOptions{})
		return wantStatus("get after a dry-run create", err, http.StatusNotFound,
			metav1.StatusReasonNotFound)
	},
}, {
	Name: "dry-run/writes-store-nothing",
	Promise: "an update, patch, apply or delete with dryRun=All answers as it would, and " +
		"changes nothing stored",
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a", "k", "1"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		dry := []string{metav1.DryRunAll}
		next := cm.DeepCopy()
		next.Data["k"] = "2"
		got, err := e.configMaps().Update(ctx, next, metav1.UpdateOptions{DryRun: dry})
		if err != nil || got.Data["k"] != "2" {
			return fmt.Errorf("dry-run update: %v, %v; want k=2 answered", got, err)
		}
		if got, err = e.configMaps().Patch(ctx, "a", types.MergePatchType,
			[]byte(`{"data":{"k":"3"}}`), metav1.PatchOptions{DryRun: dry}); err != nil ||
			got.Data["k"] != "3" {
			return fmt.Errorf("dry-run patch: %v, %v; want k=3 answered", got, err)
		}
		body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"4"}}`
		if got, err = e.configMaps().Patch(ctx, "a", types.ApplyPatchType, []byte(body),
			metav1.PatchOptions{DryRun: dry, FieldManager: "m", Force: ptr.To(true)}); err != nil ||
			got.Data["k"] != "4" {
			return fmt.Errorf("dry-run apply: %v, %v; want k=4 answered", got, err)
		}
		if err := e.configMaps().Delete(ctx, "a", metav1.DeleteOptions{DryRun: dry}); err != nil {
			return step("dry-run delete", err)
		}
		stored, err := e.configMaps().Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			return step("get after the dry runs", err)
		}
		if stored.Data["k"] != "1" {
			return fmt.Errorf("data %v after the dry runs, want k=1", stored.Data)
		}
		return sameRV("the dry runs", cm, stored)
	},
}}

// labelled creates ConfigMaps of the given names with label l set to the
// given values ("" for none).
func (e *Env) labelled(ctx context.Context, kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		cm := configMap(kv[i])
		if kv[i+1] != "" {
			cm.Labels = map[string]string{"l": kv[i+1]}
		}
		if _, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
	}
	return nil
}

// listNames lists e's ConfigMaps with opts, by name.
func (e *Env) listNames(ctx context.Context, opts metav1.ListOptions) ([]string, error) {
	list, err := e.configMaps().List(ctx, opts)
	if err != nil {
		return nil, step(fmt.Sprintf("list %+v", opts), err)
	}
	return names(list.Items), nil
}

// wantList lists with opts and checks the names.
func (e *Env) wantList(ctx context.Context, opts metav1.ListOptions, want ...string) error {
	got, err := e.listNames(ctx, opts)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("list %+v: %v, want %v", opts, got, want)
	}
	return nil
}

// phasedPod creates a Pod and sets its status.phase (none for "").
func (e *Env) phasedPod(ctx context.Context, name string, phase corev1.PodPhase) error {
	p, err := e.createPod(ctx, pod(name, ""))
	if err != nil {
		return step("create pod", err)
	}
	if phase == "" {
		return nil
	}
	p.Status.Phase = phase
	_, err = e.Kube.CoreV1().Pods(e.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return step("pod status update", err)
}

var listRows = []Row{{
	Name:    "list/label-selector",
	Promise: "a list with a label selector (equality or set based) returns what it matches",
	Run: func(ctx context.Context, e *Env) error {
		if err := e.labelled(ctx, "a", "x", "b", "y", "c", ""); err != nil {
			return err
		}
		for sel, want := range map[string][]string{
			"l=x": {"a"}, "l in (x,y)": {"a", "b"}, "!l": {"c"}, "l,l!=x": {"b"},
		} {
			if err := e.wantList(ctx, metav1.ListOptions{LabelSelector: sel}, want...); err != nil {
				return err
			}
		}
		return nil
	},
}, {
	Name: "list/field-selector",
	Promise: "a list with a field selector on metadata.name, or on a Pod's status.phase " +
		"or spec.nodeName, returns what it matches",
	Run: func(ctx context.Context, e *Env) error {
		if err := e.labelled(ctx, "a", "", "b", ""); err != nil {
			return err
		}
		if err := e.wantList(ctx, metav1.ListOptions{FieldSelector: "metadata.name=b"},
			"b"); err != nil {
			return err
		}
		if err := e.phasedPod(ctx, "running", corev1.PodRunning); err != nil {
			return err
		}
		if err := e.phasedPod(ctx, "pending", corev1.PodPending); err != nil {
			return err
		}
		pods := e.Kube.CoreV1().Pods(e.Namespace)
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
		if err != nil {
			return step("list pods by phase", err)
		}
		if got := names(list.Items); !slices.Equal(got, []string{"running"}) {
			return fmt.Errorf("pods in phase Running: %v, want [running]", got)
		}
		list, err = pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
		if err != nil {
			return step("list pods by node", err)
		}
		if got := names(list.Items); !slices.Equal(got, []string{"pending", "running"}) {
			return fmt.Errorf("pods bound to no node: %v, want both", got)
		}
		return nil
	},
}, {
	Name:    "list/field-selector-on-an-unknown-field-is-400",
	Promise: "a list with a field selector on a field the resource does not index is 400",
	Run: func(ctx context.Context, e *Env) error {
		_, err := e.configMaps().List(ctx, metav1.ListOptions{FieldSelector: "data.k=1"})
		return wantStatus("list", err, http.StatusBadRequest, metav1.StatusReasonBadRequest)
	},
}, {
	Name: "list/then-watch-from-its-resource-version",
	Promise: "a list reflects every write that returned before it, and a watch from the " +
		"list's resourceVersion sends every write after it, and none before",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		if err := e.labelled(ctx, "a", ""); err != nil {
			return err
		}
		list, err := e.configMaps().List(ctx, metav1.ListOptions{})
		if err != nil {
			return step("list", err)
		}
		if got := names(list.Items); !slices.Equal(got, []string{"a"}) {
			return fmt.Errorf("list %v, want [a]", got)
		}
		if err := e.labelled(ctx, "b", ""); err != nil {
			return err
		}
		w, err := e.configMaps().
			Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		_, err = expectEvent(ctx, w, watch.Added, "b")
		return err
	},
}, {
	Name: "list/limit-and-continue",
	Promise: "a list with a limit returns that many and a continue token; continuing lists " +
		"the rest as of the first page",
	Run: func(ctx context.Context, e *Env) error {
		if err := e.labelled(ctx, "a", "", "b", "", "c", ""); err != nil {
			return err
		}
		first, err := e.configMaps().List(ctx, metav1.ListOptions{Limit: 2})
		if err != nil {
			return step("first page", err)
		}
		if got := names(first.Items); !slices.Equal(got, []string{"a", "b"}) ||
			first.Continue == "" {
			return fmt.Errorf(
				"first page %v, continue %q; want [a b] and a token",
				got,
				first.Continue,
			)
		}
		if err := e.labelled(ctx, "d", ""); err != nil {
			return err
		}
		return e.wantList(ctx, metav1.ListOptions{Limit: 2, Continue: first.Continue}, "c")
	},
}, {
	Name:        "list/exact-resource-version",
	Promise:     "a list with resourceVersionMatch=Exact returns the objects as of that version",
	NotModelled: "resourceVersionMatch=Exact is not supported",
	Run: func(ctx context.Context, e *Env) error {
		if err := e.labelled(ctx, "a", ""); err != nil {
			return err
		}
		list, err := e.configMaps().List(ctx, metav1.ListOptions{})
		if err != nil {
			return step("list", err)
		}
		if err := e.labelled(ctx, "b", ""); err != nil {
			return err
		}
		return e.wantList(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion,
			ResourceVersionMatch: metav1.ResourceVersionMatchExact}, "a")
	},
}}

var watchRows = []Row{{
	Name: "watch/from-resource-version",
	Promise: "a watch from a resourceVersion sends the later writes in order: ADDED, " +
		"MODIFIED, DELETED",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a", "k", "1"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		cm.Data["k"] = "2"
		if _, err := e.configMaps().Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return step("update", err)
		}
		if err := e.labelled(ctx, "b", ""); err != nil {
			return err
		}
		if err := e.configMaps().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			return step("delete", err)
		}
		w, err := e.configMaps().Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		for _, want := range []struct {
			typ  watch.EventType
			name string
		}{{watch.Modified, "a"}, {watch.Added, "b"}, {watch.Deleted, "a"}} {
			if _, err := expectEvent(ctx, w, want.typ, want.name); err != nil {
				return err
			}
		}
		return nil
	},
}, {
	Name: "watch/initial-events-end-with-a-bookmark",
	Promise: "a watch with sendInitialEvents sends ADDED for each object, then a BOOKMARK " +
		"annotated k8s.io/initial-events-end, then the later writes",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		if err := e.labelled(ctx, "a", "", "b", ""); err != nil {
			return err
		}
		w, err := e.configMaps().Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			AllowWatchBookmarks:  true})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		var added []string
		for len(added) < 2 {
			ev, err := next(ctx, w)
			if err != nil {
				return fmt.Errorf("initial events %v: %w", added, err)
			}
			if ev.Type != watch.Added {
				return fmt.Errorf("event %s before the initial ADDED events (%v)", ev.Type, added)
			}
			added = append(added, ev.Object.(*corev1.ConfigMap).Name)
		}
		if slices.Sort(added); !slices.Equal(added, []string{"a", "b"}) {
			return fmt.Errorf("initial events for %v, want a and b", added)
		}
		ev, err := next(ctx, w)
		if err != nil {
			return fmt.Errorf("the bookmark: %w", err)
		}
		if cm, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Bookmark || !ok ||
			cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
			return fmt.Errorf(
				"event %s %v, want the initial-events-end bookmark",
				ev.Type,
				ev.Object,
			)
		}
		if err := e.labelled(ctx, "c", ""); err != nil {
			return err
		}
		_, err = expectEvent(ctx, w, watch.Added, "c")
		return err
	},
}, {
	Name: "watch/label-selector-transitions",
	Promise: "a watch with a label selector sends ADDED when an object comes to match it " +
		"and DELETED when it stops matching",
	Run: func(ctx context.Context, e *Env) error {
		if err := e.labelled(ctx, "a", "y"); err != nil {
			return err
		}
		list, err := e.configMaps().List(ctx, metav1.ListOptions{LabelSelector: "l=x"})
		if err != nil {
			return step("list", err)
		}
		w, err := e.configMaps().Watch(ctx, metav1.ListOptions{LabelSelector: "l=x",
			ResourceVersion: list.ResourceVersion})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		for _, c := range []struct {
			label string
			typ   watch.EventType
		}{{"x", watch.Added}, {"y", watch.Deleted}} {
			if _, err := e.configMaps().Patch(ctx, "a", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"l":"`+c.label+`"}}}`),
				metav1.PatchOptions{}); err != nil {
				return step("relabel", err)
			}
			if _, err := expectEvent(ctx, w, c.typ, "a"); err != nil {
				return fmt.Errorf("relabelled l=%s: %w", c.label, err)
			}
		}
		return nil
	},
}, {
	Name: "watch/field-selector-transitions",
	Promise: "a watch with a field selector sends ADDED when an object comes to match it " +
		"and DELETED when it stops matching",
	Run: func(ctx context.Context, e *Env) error {
		if err := e.phasedPod(ctx, "p", ""); err != nil {
			return err
		}
		pods := e.Kube.CoreV1().Pods(e.Namespace)
		p, err := pods.Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return step("get", err)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running",
			ResourceVersion: p.ResourceVersion})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		for _, c := range []struct {
			phase corev1.PodPhase
			typ   watch.EventType
		}{{corev1.PodRunning, watch.Added}, {corev1.PodSucceeded, watch.Deleted}} {
			p.Status.Phase = c.phase
			if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				return step("status update", err)
			}
			if _, err := expectEvent(ctx, w, c.typ, "p"); err != nil {
				return fmt.Errorf("phase %s: %w", c.phase, err)
			}
		}
		return nil
	},
}, {
	Name: "watch/restart-ends-watches-and-an-old-resume-is-410",
	Promise: "an API server restart ends every watch, and a watch resumed from a " +
		"resourceVersion older than the restart is 410 Gone (the client lists again)",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a", "k", "1"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		cm.Data["k"] = "2"
		if _, err := e.configMaps().Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return step("update", err)
		}
		w, err := e.configMaps().Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		if err := e.Target.Restart(ctx); err != nil {
			return step("restart", err)
		}
		if err := expectEnded(ctx, w); err != nil {
			return err
		}
		resumed, err := e.configMaps().Watch(ctx,
			metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		if err != nil {
			return wantStatus("watch from before the restart", err, http.StatusGone, "")
		}
		defer resumed.Stop()
		// The server may answer the watch, and send the 410 as its first
		// event (kube-apiserver's watch cache does).
		ev, err := next(ctx, resumed)
		if ev.Type == watch.Error {
			err = apierrors.FromObject(ev.Object)
		} else if err == nil {
			err = fmt.Errorf("event %s", ev.Type)
		}
		return wantStatus("watch from before the restart", err, http.StatusGone, "")
	},
}}
