package contract

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// eventTimeout bounds a wait for one watch event.
const eventTimeout = 10 * time.Second

// wantStatus checks that err is the API status code (and reason, unless
// empty) the server answers what with.
func wantStatus(what string, err error, code int32, reason metav1.StatusReason) error {
	if err == nil {
		return fmt.Errorf("%s: succeeded, want %d %s", what, code, reason)
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return fmt.Errorf("%s: %w; want %d %s", what, err, code, reason)
	}
	s := st.Status()
	if s.Code != code || (reason != "" && s.Reason != reason) {
		return fmt.Errorf("%s: %d %s (%s); want %d %s", what, s.Code, s.Reason, s.Message,
			code, reason)
	}
	return nil
}

// step wraps a failed call's error with what the call was.
func step(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// next is w's next event, or an error when the watch ends, sends an error
// or sends nothing for eventTimeout.
func next(ctx context.Context, w watch.Interface) (watch.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return ev, errors.New("the watch ended")
		}
		if ev.Type == watch.Error {
			return ev, fmt.Errorf("the watch sent an error: %w", apierrors.FromObject(ev.Object))
		}
		return ev, nil
	case <-ctx.Done():
		return watch.Event{}, fmt.Errorf("no watch event within %v", eventTimeout)
	}
}

// expectEvent waits for w's next event and checks its type and the name of
// its object, which it returns.
func expectEvent(ctx context.Context, w watch.Interface, typ watch.EventType,
	name string) (metav1.Object, error) {
	ev, err := next(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("waiting for %s %s: %w", typ, name, err)
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.Type, err)
	}
	if ev.Type != typ || m.GetName() != name {
		return nil, fmt.Errorf("event %s %s (resourceVersion %s), want %s %s", ev.Type,
			m.GetName(), m.GetResourceVersion(), typ, name)
	}
	return m, nil
}

// expectEnded waits until w's result channel closes, skipping events.
func expectEnded(ctx context.Context, w watch.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("the watch still open after %v", eventTimeout)
		}
	}
}

// configMap is a ConfigMap named name with data from key-value pairs.
func configMap(name string, kv ...string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		cm.Data[kv[i]] = kv[i+1]
	}
	return cm
}

func (e *Env) configMaps() typedcorev1.ConfigMapInterface {
	return e.Kube.CoreV1().ConfigMaps(e.Namespace)
}

// custom is an object of r named name, with the given top-level fields.
func custom(r CustomResource, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": r.APIVersion(), "kind": r.Kind,
		"metadata": map[string]any{"name": name},
	}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// spec is a "spec" top-level field of key-value pairs.
func spec(kv ...any) map[string]any { return map[string]any{"spec": pairs(kv)} }

func pairs(kv []any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// of is e's client of r's objects in its namespace.
func (e *Env) of(r CustomResource) dynamic.ResourceInterface {
	return e.Dynamic.Resource(r.GVR()).Namespace(e.Namespace)
}

// sameRV checks that a write left the resourceVersion as it was.
func sameRV(what string, before, after metav1.Object) error {
	if before.GetResourceVersion() != after.GetResourceVersion() {
		return fmt.Errorf("%s changed resourceVersion %s to %s, want it kept (no write)", what,
			before.GetResourceVersion(), after.GetResourceVersion())
	}
	return nil
}

// wantGeneration checks an object's metadata.generation after what.
func wantGeneration(what string, o metav1.Object, want int64) error {
	if got := o.GetGeneration(); got != want {
		return fmt.Errorf("after %s: generation %d, want %d", what, got, want)
	}
	return nil
}

// objectName is obj's name, or "" when it has no metadata.
func objectName(obj any) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetName()
}
