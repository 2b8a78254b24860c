package fakeapi

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// maxContinues bounds the lists kept for their continue tokens; a token
// of a list no longer kept is 410 Gone, as an expired one is on the API
// server.
const maxContinues = 64

// continues are the rest of paginated lists, by continue token: a list
// continues as of its first page, as the API server's do.
type continues struct {
	next  int64
	lists map[string]pending
	order []string
}

type pending struct {
	gvr   schema.GroupVersionResource
	rv    int64
	items []map[string]any
}

// keep stores the rest of a list and returns its token.
func (c *continues) keep(p pending) string {
	if c.lists == nil {
		c.lists = map[string]pending{}
	}
	c.next++
	token := fmt.Sprintf("fakeapi-%d", c.next)
	c.lists[token] = p
	c.order = append(c.order, token)
	if len(c.order) > maxContinues {
		delete(c.lists, c.order[0])
		c.order = c.order[1:]
	}
	return token
}

// take removes and returns the rest of a list.
func (c *continues) take(token string) (pending, bool) {
	p, ok := c.lists[token]
	delete(c.lists, token)
	return p, ok
}

func (s *Server) listLocked(
	gvr schema.GroupVersionResource,
	ns string,
	sel *selector,
) []map[string]any {
	r := s.resources[gvr]
	if s.objects[gvr] == nil {
		return nil
	}
	var keys []string
	for k, o := range s.objects[gvr] {
		if r.Namespaced && ns != "" && !strings.HasPrefix(k, ns+"/") {
			continue
		}
		if sel.matches(o) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		out = append(out, deepCopy(s.objects[gvr][k]))
	}
	return out
}

// list answers a list: the objects that match the selectors, now, or as
// of the first page of a paginated list being continued.
func (s *Server) list(r Resource, ns string, q url.Values) (map[string]any, error) {
	sel, err := parseSelector(r, q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		return nil, err
	}
	limit, _ := strconv.ParseInt(q.Get("limit"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	err = s.checkListVersion(q.Get("resourceVersion"), q.Get("resourceVersionMatch"))
	if err != nil {
		return nil, err
	}
	page := pending{gvr: r.GVR, rv: s.rv}
	if token := q.Get("continue"); token != "" {
		p, ok := s.continues.take(token)
		if !ok || p.gvr != r.GVR {
			return nil, apierrors.NewResourceExpired("the provided continue parameter is too old " +
				"to display a consistent list result; start a new list without it")
		}
		page = p
	} else {
		page.items = s.listLocked(r.GVR, ns, sel)
	}
	meta := map[string]any{"resourceVersion": strconv.FormatInt(page.rv, 10)}
	items := page.items
	if limit > 0 && int64(len(items)) > limit {
		rest := pending{gvr: r.GVR, rv: page.rv, items: items[limit:]}
		items = items[:limit]
		meta["continue"] = s.continues.keep(rest)
		meta["remainingItemCount"] = int64(len(rest.items))
	}
	anyItems := make([]any, len(items))
	for i, it := range items {
		anyItems[i] = it
	}
	return map[string]any{
		"apiVersion": r.GVR.GroupVersion().String(),
		"kind":       r.Kind + "List",
		"metadata":   meta,
		"items":      anyItems,
	}, nil
}

// checkListVersion refuses what a list's resourceVersion asks that the
// server cannot answer: a list as of a past version (it keeps no past
// states), or of one it has not reached. s.mu is held.
func (s *Server) checkListVersion(rv, match string) error {
	if rv == "" || rv == "0" {
		if match == string(metav1.ResourceVersionMatchExact) {
			return apierrors.NewBadRequest("resourceVersionMatch=Exact needs a resourceVersion")
		}
		return nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return apierrors.NewBadRequest("resourceVersion: " + err.Error())
	}
	switch {
	case n > s.rv:
		return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d",
			n, s.rv), 1)
	case match == string(metav1.ResourceVersionMatchExact) && n != s.rv:
		return notSupported(fmt.Sprintf("resourceVersionMatch=Exact is not supported for a "+
			"past resourceVersion (%d; the newest is %d): past states are not kept", n, s.rv))
	}
	return nil
}
