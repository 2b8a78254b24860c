package contract

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

var namespaceRows = []Row{{
	Name: "namespace/delete-marks-terminating",
	Promise: "a delete of a namespace marks it Terminating (deletionTimestamp, " +
		"status.phase) and keeps it until its spec.finalizers are done",
	Run: func(ctx context.Context, e *Env) error {
		_, err := e.terminating(ctx)
		return err
	},
}, {
	Name:    "namespace/create-in-a-terminating-namespace-is-403",
	Promise: "a create in a namespace being deleted is 403 Forbidden",
	Run: func(ctx context.Context, e *Env) error {
		name, err := e.terminating(ctx)
		if err != nil {
			return err
		}
		_, err = e.Kube.CoreV1().
			ConfigMaps(name).
			Create(ctx, configMap("a"), metav1.CreateOptions{})
		return wantStatus("create", err, http.StatusForbidden, metav1.StatusReasonForbidden)
	},
}}

// terminating creates a namespace, deletes it, checks that it is kept as
// Terminating, and returns its name.
func (e *Env) terminating(ctx context.Context) (string, error) {
	namespaces := e.Kube.CoreV1().Namespaces()
	name := e.Namespace + "-t"
	created, err := namespaces.Create(
		ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{},
	)
	if err != nil {
		return "", step("create", err)
	}
	if created.Status.Phase != corev1.NamespaceActive ||
		!slices.Contains(created.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return "", fmt.Errorf("created with phase %q and spec.finalizers %q, want Active and "+
			"[kubernetes]", created.Status.Phase, created.Spec.Finalizers)
	}
	if err := namespaces.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return "", step("delete", err)
	}
	ns, err := namespaces.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", step("get after delete", err)
	}
	if ns.DeletionTimestamp == nil || ns.Status.Phase != corev1.NamespaceTerminating {
		return "", fmt.Errorf("after delete: deletionTimestamp %v, phase %q; want set, Terminating",
			ns.DeletionTimestamp, ns.Status.Phase)
	}
	return name, nil
}

// Things is served and removed by the row that checks what removing a
// custom resource does.
var Things = CustomResource{Group: "removal.contract.ctrlhost.dev", Version: "v1",
	Plural: "things", Kind: "Thing"}

var hostRows = []Row{{
	Name: "lease/concurrent-updates-one-wins",
	Promise: "of two updates of a Lease read at one resourceVersion, the first applies and " +
		"the second is 409 Conflict",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		leases := e.Kube.CoordinationV1().Leases(e.Namespace)
		l, err := leases.Create(
			ctx,
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}},
			metav1.CreateOptions{},
		)
		if err != nil {
			return step("create", err)
		}
		a, b := l.DeepCopy(), l.DeepCopy()
		a.Spec.HolderIdentity, b.Spec.HolderIdentity = ptr.To("a"), ptr.To("b")
		if _, err := leases.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
			return step("first update", err)
		}
		_, err = leases.Update(ctx, b, metav1.UpdateOptions{})
		return wantStatus("second update", err, http.StatusConflict, metav1.StatusReasonConflict)
	},
}, {
	Name: "events/create-and-patch",
	Promise: "an Event (core/v1 and events.k8s.io/v1) is created, and a core/v1 Event is " +
		"updated by a strategic merge patch, as event recorders do",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "a.1"},
			InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: e.Namespace,
				Name: "a", APIVersion: "v1"},
			Reason: "Tested", Message: "m", Type: corev1.EventTypeNormal, Count: 1,
			Source: corev1.EventSource{
				Component: "contract",
			}, FirstTimestamp: now, LastTimestamp: now}
		events := e.Kube.CoreV1().Events(e.Namespace)
		if _, err := events.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		patch := fmt.Sprintf(`{"count":2,"lastTimestamp":%q,"message":"m2"}`,
			now.Add(time.Second).UTC().Format(time.RFC3339))
		got, err := events.Patch(ctx, "a.1", types.StrategicMergePatchType, []byte(patch),
			metav1.PatchOptions{})
		if err != nil {
			return step("patch", err)
		}
		if got.Count != 2 || got.Message != "m2" {
			return fmt.Errorf("count %d, message %q after the patch; want 2, m2", got.Count,
				got.Message)
		}
		nev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "b.1"},
			EventTime: metav1.NewMicroTime(time.Now()), ReportingController: "contract.dev/c",
			ReportingInstance: "i", Action: "Test", Reason: "Tested", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: e.Namespace, Name: "a",
				APIVersion: "v1"}}
		_, err = e.Kube.EventsV1().Events(e.Namespace).Create(ctx, nev, metav1.CreateOptions{})
		return step("create events.k8s.io/v1", err)
	},
}, {
	Name: "serviceaccount/token-request",
	Promise: "a TokenRequest for a ServiceAccount returns a token and its expiry; for a " +
		"ServiceAccount that does not exist it is 404",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		sas := e.Kube.CoreV1().ServiceAccounts(e.Namespace)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ctl"}}
		if _, err := sas.Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](3600)}}
		tr, err := sas.CreateToken(ctx, "ctl", req, metav1.CreateOptions{})
		if err != nil {
			return step("token request", err)
		}
		if tr.Status.Token == "" || !tr.Status.ExpirationTimestamp.After(time.Now()) {
			return fmt.Errorf("token %q expiring %v, want a token expiring later",
				tr.Status.Token, tr.Status.ExpirationTimestamp)
		}
		_, err = sas.CreateToken(ctx, "nope", req, metav1.CreateOptions{})
		return wantStatus("token request for a missing ServiceAccount", err, http.StatusNotFound,
			metav1.StatusReasonNotFound)
	},
}, {
	Name: "discovery/custom-resource",
	Promise: "discovery lists a served custom resource with its kind, scope, verbs and " +
		"status subresource",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		list, err := e.Kube.Discovery().ServerResourcesForGroupVersion(Widgets.APIVersion())
		if err != nil {
			return step("discovery", err)
		}
		var found []string
		for _, r := range list.APIResources {
			found = append(found, r.Name)
			if r.Name == Widgets.Plural && (r.Kind != Widgets.Kind || !r.Namespaced ||
				!slices.Contains(r.Verbs, "watch") || !slices.Contains(r.Verbs, "patch")) {
				return fmt.Errorf("discovery lists widgets as %+v", r)
			}
		}
		want := []string{Gadgets.Plural, Widgets.Plural, Widgets.Plural + "/status"}
		if slices.Sort(found); !slices.Equal(found, want) {
			return fmt.Errorf("discovery lists %v, want %v", found, want)
		}
		return nil
	},
}, {
	Name: "custom-resource/removal-deletes-its-objects",
	Promise: "when a custom resource stops being served (its definition deleted), watchers " +
		"get DELETED for each of its objects, then the watch ends",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		if err := e.Target.Serve(ctx, Things); err != nil {
			return step("serve", err)
		}
		things := e.of(Things)
		for _, n := range []string{"a", "b"} {
			if _, err := things.Create(ctx, custom(Things, n, spec("n", n)),
				metav1.CreateOptions{}); err != nil {
				return step("create", err)
			}
		}
		list, err := things.List(ctx, metav1.ListOptions{})
		if err != nil {
			return step("list", err)
		}
		w, err := things.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		if err := e.Target.Unserve(ctx, Things); err != nil {
			return step("unserve", err)
		}
		var deleted []string
		for len(deleted) < 2 {
			ev, err := next(ctx, w)
			if err != nil {
				return fmt.Errorf("after DELETED for %v: %w", deleted, err)
			}
			if ev.Type != watch.Deleted {
				return fmt.Errorf("event %s, want DELETED", ev.Type)
			}
			deleted = append(deleted, objectName(ev.Object))
		}
		if slices.Sort(deleted); !slices.Equal(deleted, []string{"a", "b"}) {
			return fmt.Errorf("DELETED for %v, want a and b", deleted)
		}
		return expectEnded(ctx, w)
	},
}}
