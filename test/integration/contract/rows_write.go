package contract

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

var createRows = []Row{{
	Name: "create/sets-identity",
	Promise: "a create sets uid, resourceVersion, creationTimestamp and the namespace of " +
		"the path; a uid in the body is replaced",
	Sim: true,
	Run: func(ctx context.Context, e *Env) error {
		cm := configMap("a", "k", "1")
		cm.UID = "00000000-0000-0000-0000-00000000abcd"
		got, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		switch {
		case got.UID == "" || got.UID == cm.UID:
			return fmt.Errorf("uid %q, want one the server assigns", got.UID)
		case got.ResourceVersion == "" || got.CreationTimestamp.IsZero():
			return fmt.Errorf("resourceVersion %q, creationTimestamp %v: want both set",
				got.ResourceVersion, got.CreationTimestamp)
		case got.Namespace != e.Namespace:
			return fmt.Errorf("namespace %q, want %q", got.Namespace, e.Namespace)
		}
		return nil
	},
}, {
	Name:    "create/existing-name-is-409",
	Promise: "a create of a name that exists is 409 AlreadyExists",
	Sim:     true,
	Run: func(ctx context.Context, e *Env) error {
		_, err := e.configMaps().Create(ctx, configMap("a"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		_, err = e.configMaps().Create(ctx, configMap("a"), metav1.CreateOptions{})
		return wantStatus(
			"second create",
			err,
			http.StatusConflict,
			metav1.StatusReasonAlreadyExists,
		)
	},
}, {
	Name:    "create/generate-name",
	Promise: "a create with generateName and no name gets the prefix and five characters",
	Run: func(ctx context.Context, e *Env) error {
		cm := configMap("")
		cm.GenerateName = "gen-"
		got, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		if !strings.HasPrefix(got.Name, "gen-") || len(got.Name) != len("gen-")+5 {
			return fmt.Errorf("name %q, want gen- and five characters", got.Name)
		}
		return nil
	},
}, {
	Name:    "create/drops-status-with-subresource",
	Promise: "a create of a custom resource with a status subresource ignores the status",
	Run: func(ctx context.Context, e *Env) error {
		w := custom(Widgets, "w", spec("size", int64(1)))
		w.Object["status"] = map[string]any{"seen": int64(1)}
		got, err := e.of(Widgets).Create(ctx, w, metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		if st, ok := got.Object["status"]; ok {
			return fmt.Errorf("status %v kept, want none", st)
		}
		return nil
	},
}, {
	Name:    "create/invalid-name-is-422",
	Promise: "a create whose name is not a DNS subdomain is 422 Invalid",
	Run: func(ctx context.Context, e *Env) error {
		_, err := e.configMaps().Create(ctx, configMap("Not_A_Name"), metav1.CreateOptions{})
		return wantStatus("create", err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	},
}}

var updateRows = []Row{{
	Name:    "update/stale-resource-version-is-409",
	Promise: "an update with a resourceVersion that is not the stored one is 409 Conflict",
	Sim:     true,
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a", "k", "1"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		stale := cm.DeepCopy()
		cm.Data["k"] = "2"
		if _, err := e.configMaps().Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return step("update", err)
		}
		stale.Data["k"] = "3"
		_, err = e.configMaps().Update(ctx, stale, metav1.UpdateOptions{})
		return wantStatus("stale update", err, http.StatusConflict, metav1.StatusReasonConflict)
	},
}, {
	Name:    "update/without-resource-version-config-map",
	Promise: "a ConfigMap update without a resourceVersion is unconditional, and applies",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.configMaps().Create(ctx, configMap("a", "k", "1"),
			metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		got, err := e.configMaps().Update(ctx, configMap("a", "k", "2"), metav1.UpdateOptions{})
		if err != nil {
			return step("update without a resourceVersion", err)
		}
		if got.Data["k"] != "2" {
			return fmt.Errorf("data %v, want k=2", got.Data)
		}
		return nil
	},
}, {
	Name: "update/without-resource-version-lease-is-422",
	Promise: "a Lease update without a resourceVersion is 422 Invalid " +
		"(metadata.resourceVersion must be specified for an update)",
	Run: func(ctx context.Context, e *Env) error {
		leases := e.Kube.CoordinationV1().Leases(e.Namespace)
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")}}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		l.Spec.HolderIdentity = ptr.To("b")
		_, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err := wantStatus("update", err, http.StatusUnprocessableEntity,
			metav1.StatusReasonInvalid); err != nil {
			return err
		}
		return wantMessage(err, "must be specified for an update")
	},
}, {
	Name: "update/without-resource-version-custom-resource-is-422",
	Promise: "an update of a custom resource, or of its status, without a resourceVersion " +
		"is 422 Invalid (must be specified for an update)",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.of(Widgets).Create(ctx, custom(Widgets, "w", spec("size", int64(1))),
			metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		_, err := e.of(Widgets).Update(ctx, custom(Widgets, "w", spec("size", int64(2))),
			metav1.UpdateOptions{})
		if err := wantStatus("update", err, http.StatusUnprocessableEntity,
			metav1.StatusReasonInvalid); err != nil {
			return err
		}
		if err := wantMessage(err, "must be specified for an update"); err != nil {
			return err
		}
		st := custom(Widgets, "w", map[string]any{"status": map[string]any{"seen": int64(1)}})
		_, err = e.of(Widgets).UpdateStatus(ctx, st, metav1.UpdateOptions{})
		return wantStatus("status update", err, http.StatusUnprocessableEntity,
			metav1.StatusReasonInvalid)
	},
}, {
	Name: "update/no-op-keeps-resource-version",
	Promise: "an update that changes nothing writes nothing: the resourceVersion stays " +
		"and watchers get no event",
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a", "k", "1"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		w, err := e.configMaps().Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		got, err := e.configMaps().Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return step("no-op update", err)
		}
		if err := sameRV("a no-op update", cm, got); err != nil {
			return err
		}
		return noEventBefore(ctx, w, e.markConfigMap)
	},
}, {
	Name:    "update/missing-is-404",
	Promise: "an update of an object that does not exist is 404 NotFound",
	Run: func(ctx context.Context, e *Env) error {
		_, err := e.configMaps().Update(ctx, configMap("nope"), metav1.UpdateOptions{})
		return wantStatus("update", err, http.StatusNotFound, metav1.StatusReasonNotFound)
	},
}, {
	Name:    "update/other-uid-is-409",
	Promise: "an update whose body names another uid is 409 Conflict",
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		cm.UID = types.UID("00000000-0000-0000-0000-00000000abcd")
		_, err = e.configMaps().Update(ctx, cm, metav1.UpdateOptions{})
		return wantStatus("update", err, http.StatusConflict, metav1.StatusReasonConflict)
	},
}}

// wantMessage checks that an API error's message holds text.
func wantMessage(err error, text string) error {
	if err == nil || !strings.Contains(err.Error(), text) {
		return fmt.Errorf("error %v, want one saying %q", err, text)
	}
	return nil
}

// noEventBefore checks that w sends nothing before the event of a write
// mark makes now, of a marker object of w's resource (events of one
// resource come in the order of their writes).
func noEventBefore(ctx context.Context, w watch.Interface,
	mark func(context.Context) (string, error)) error {
	name, err := mark(ctx)
	if err != nil {
		return step("writing the marker", err)
	}
	ev, err := next(ctx, w)
	if err != nil {
		return fmt.Errorf("waiting for the marker's event: %w", err)
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil || m.GetName() != name {
		return fmt.Errorf("event %s %v before the marker's, want none", ev.Type, ev.Object)
	}
	return nil
}

// markConfigMap creates a ConfigMap of a new name, and returns the name.
func (e *Env) markConfigMap(ctx context.Context) (string, error) {
	cm := configMap("")
	cm.GenerateName = "marker-"
	got, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return got.Name, nil
}
