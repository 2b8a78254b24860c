package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deleteOptions reads DeleteOptions from body, then from the query.
func deleteOptions(body []byte, q url.Values, opts options) (metav1.DeleteOptions, error) {
	var do metav1.DeleteOptions
	if len(body) > 0 {
		if err := json.Unmarshal(body, &do); err != nil {
			return do, apierrors.NewBadRequest(err.Error())
		}
	}
	if opts.dryRun {
		do.DryRun = []string{metav1.DryRunAll}
	}
	for _, d := range do.DryRun {
		if d != metav1.DryRunAll {
			return do, apierrors.NewBadRequest(fmt.Sprintf("dryRun: unsupported value %q", d))
		}
	}
	if p := q.Get("propagationPolicy"); p != "" && do.PropagationPolicy == nil {
		policy := metav1.DeletionPropagation(p)
		do.PropagationPolicy = &policy
	}
	if g := q.Get("gracePeriodSeconds"); g != "" && do.GracePeriodSeconds == nil {
		secs, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return do, apierrors.NewBadRequest("gracePeriodSeconds: " + err.Error())
		}
		do.GracePeriodSeconds = &secs
	}
	if p := do.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationForeground, metav1.DeletePropagationBackground,
			metav1.DeletePropagationOrphan:
		default:
			return do, apierrors.NewBadRequest(
				fmt.Sprintf("propagationPolicy: unsupported value %q", *p),
			)
		}
	}
	return do, nil
}

// delete deletes an object, as the API server's generic store does:
// DeleteOptions' preconditions are checked; a Pod bound to a node waits
// out its grace period; propagationPolicy Foreground and Orphan add the
// garbage collector's finalizers; an object with finalizers is only
// marked (deletionTimestamp, and its generation bumped) and goes when the
// last is removed; a namespace is marked Terminating first.
func (s *Server) delete(r Resource, ns, name string, body []byte, q url.Values,
	opts options) (map[string]any, error) {
	do, err := deleteOptions(body, q, opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(r, ns, name, do)
}

func (s *Server) deleteLocked(
	r Resource,
	ns, name string,
	do metav1.DeleteOptions,
) (map[string]any, error) {
	cur := s.objects[r.GVR][key(r, ns, name)]
	if cur == nil {
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), name)
	}
	if err := deletePreconditions(r, name, cur, do.Preconditions); err != nil {
		return nil, err
	}
	dryRun := len(do.DryRun) > 0
	next := deepCopy(cur)
	meta := metaOf(next)
	if r.isNamespaces() {
		switch {
		case slices.Contains([]string{"default", "kube-system", "kube-public"}, name):
			return nil, apierrors.NewForbidden(r.GVR.GroupResource(), name,
				fmt.Errorf("this namespace may not be deleted"))
		case !deleting(cur):
			meta["deletionTimestamp"] = timestamp(time.Now())
			status, _ := next["status"].(map[string]any)
			if status == nil {
				status = map[string]any{}
				next["status"] = status
			}
			status["phase"] = "Terminating"
			setFinalizers(meta, gcFinalizers(finalizers(meta), do.PropagationPolicy))
			return s.commit(r, ns, name, cur, next, dryRun), nil
		case namespaceFinalizing(cur):
			return deepCopy(cur), nil
		}
	}
	graceful, pending, immediate := gracePeriod(r, cur, next, do)
	if pending {
		return deepCopy(cur), nil
	}
	fins := gcFinalizers(finalizers(meta), do.PropagationPolicy)
	setFinalizers(meta, fins)
	switch {
	case len(fins) > 0:
		if !graceful && !deleting(next) {
			markDeleting(next)
		}
		return s.commit(r, ns, name, cur, next, dryRun), nil
	case graceful && !immediate:
		return s.commit(r, ns, name, cur, next, dryRun), nil
	case dryRun:
		return successStatus(), nil
	}
	s.store(r, ns, name, next, nil, "DELETED")
	return successStatus(), nil
}

// markDeleting sets deletionTimestamp and a grace period of 0, and bumps
// the generation of an object that has one.
func markDeleting(obj map[string]any) {
	meta := metaOf(obj)
	if gen, ok := toInt64(meta["generation"]); ok && gen > 0 {
		meta["generation"] = gen + 1
	}
	meta["deletionTimestamp"] = timestamp(time.Now())
	meta["deletionGracePeriodSeconds"] = int64(0)
}

// gracePeriod applies a graceful delete (a Pod's) to next: graceful when
// it set (or shortened) a grace period, pending when a delete is already
// under way and the request does not shorten it, immediate when the grace
// period is 0.
func gracePeriod(
	r Resource,
	cur, next map[string]any,
	do metav1.DeleteOptions,
) (graceful, pending, immediate bool) {
	if !r.strategy().graceful {
		return false, false, true
	}
	meta := metaOf(next)
	if deleting(cur) {
		existing, ok := toInt64(meta["deletionGracePeriodSeconds"])
		if !ok || existing == 0 {
			return false, false, true
		}
		if do.GracePeriodSeconds == nil || *do.GracePeriodSeconds >= existing {
			return false, true, false
		}
		period := max(*do.GracePeriodSeconds, 0)
		meta["deletionTimestamp"] = timestamp(time.Now().Add(time.Duration(period) * time.Second))
		meta["deletionGracePeriodSeconds"] = period
		return true, false, period == 0
	}
	period := int64(30) // the default of spec.terminationGracePeriodSeconds
	if v, ok := nested(next, "spec", "terminationGracePeriodSeconds"); ok {
		period, _ = toInt64(v)
	}
	if do.GracePeriodSeconds != nil {
		period = *do.GracePeriodSeconds
	}
	node, _ := nestedString(next, "spec", "nodeName")
	phase, _ := nestedString(next, "status", "phase")
	if node == "" || phase == "Failed" || phase == "Succeeded" {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	meta["deletionTimestamp"] = timestamp(time.Now().Add(time.Duration(period) * time.Second))
	meta["deletionGracePeriodSeconds"] = period
	if gen, ok := toInt64(meta["generation"]); ok && gen > 0 {
		meta["generation"] = gen + 1
	}
	return true, false, period == 0
}

// gcFinalizers are fins with the garbage collector's finalizers set as
// policy asks (nil: as they are).
func gcFinalizers(fins []string, policy *metav1.DeletionPropagation) []string {
	if policy == nil {
		return fins
	}
	out := slices.DeleteFunc(slices.Clone(fins), func(f string) bool {
		return f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents
	})
	switch *policy {
	case metav1.DeletePropagationForeground:
		out = append(out, metav1.FinalizerDeleteDependents)
	case metav1.DeletePropagationOrphan:
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	return out
}

func deletePreconditions(
	r Resource,
	name string,
	cur map[string]any,
	pre *metav1.Preconditions,
) error {
	if pre == nil {
		return nil
	}
	meta := metaOf(cur)
	if pre.UID != nil && string(*pre.UID) != meta["uid"] {
		return apierrors.NewConflict(r.GVR.GroupResource(), name, fmt.Errorf(
			"Precondition failed: UID in precondition: %v, UID in object meta: %v",
			*pre.UID,
			meta["uid"],
		))
	}
	if pre.ResourceVersion != nil && *pre.ResourceVersion != meta["resourceVersion"] {
		return apierrors.NewConflict(r.GVR.GroupResource(), name, fmt.Errorf(
			"Precondition failed: ResourceVersion in precondition: %v, "+
				"ResourceVersion in object meta: %v",
			*pre.ResourceVersion,
			meta["resourceVersion"],
		))
	}
	return nil
}

// deleteCollection deletes, one by one, the objects a list with the
// request's selectors returns, each with the same DeleteOptions.
func (s *Server) deleteCollection(r Resource, ns string, body []byte, q url.Values,
	opts options) (map[string]any, error) {
	do, err := deleteOptions(body, q, opts)
	if err != nil {
		return nil, err
	}
	sel, err := parseSelector(r, q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.Namespaced {
		ns = ""
	}
	for _, o := range s.listLocked(r.GVR, ns, sel) {
		m := metaOf(o)
		objNS, _ := m["namespace"].(string)
		name, _ := m["name"].(string)
		if _, err := s.deleteLocked(r, objNS, name, do); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return successStatus(), nil
}
