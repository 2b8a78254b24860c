//go:build unix

package cluster

import (
	"maps"
	"net/url"
	"slices"
	"testing"
	"time"
)

const leasePath = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/" + LeaseName

func writesOf(seq ...string) []Write {
	var out []Write
	at := time.Unix(0, 0)
	for i := 0; i < len(seq); i += 2 {
		at = at.Add(time.Second)
		out = append(out, Write{Replica: seq[i], At: at, Method: "PUT", Path: seq[i+1], Code: 200})
	}
	return out
}

// A replica that writes again after another wrote since its last write
// is an overlap; election writes and reviews never count.
func TestOverlaps(t *testing.T) {
	const pods = "/api/v1/namespaces/x/pods/p"
	for _, c := range []struct {
		name   string
		writes []Write
		want   []int // indexes of the writes reported
	}{
		{"one leader after another", writesOf("a", pods, "a", pods, "b", pods, "c", pods), nil},
		{"the old leader writes again", writesOf("a", pods, "b", pods, "a", pods), []int{2}},
		{"followers renew nothing but their elections", writesOf("a", pods, "b", leasePath,
			"c", "/apis/authorization.k8s.io/v1/subjectaccessreviews", "a", pods), nil},
		{"interleaved twice", writesOf("a", pods, "b", pods, "a", pods, "b", pods),
			[]int{2, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Overlaps(c.writes, LeaseName)
			var want []Write
			for _, i := range c.want {
				want = append(want, c.writes[i])
			}
			if !slices.Equal(got, want) {
				t.Errorf("overlaps %+v, want %+v", got, want)
			}
		})
	}
}

// The holder is the last replica whose Lease write succeeded after since.
func TestLeaseHolder(t *testing.T) {
	w := writesOf("a", leasePath, "b", leasePath, "c", "/api/v1/namespaces/x/pods/p")
	w[1].Code = 409 // b tried and lost
	if got := LeaseHolder(w, LeaseName, time.Unix(0, 0)); got != "a" {
		t.Errorf("holder %q, want a", got)
	}
	if got := LeaseHolder(w, LeaseName, w[1].At); got != "" {
		t.Errorf("holder since b's try %q, want none", got)
	}
	w[1].Code = 200
	if got := LeaseHolder(w, LeaseName, time.Unix(0, 0)); got != "b" {
		t.Errorf("holder %q, want b", got)
	}
}

// A write counts as the holder's while its sender was the last to write
// the Lease successfully.
func TestNotHolding(t *testing.T) {
	const pods = "/api/v1/namespaces/x/pods/p"
	w := writesOf("a", leasePath, "a", pods, "b", leasePath, "b", pods, "a", pods, "c", pods,
		"b", "/apis/authorization.k8s.io/v1/subjectaccessreviews")
	w[2].Code = 409 // b tried and lost: a still holds
	got := NotHolding(w, LeaseName)
	want := []Write{w[3], w[5]}
	if !slices.Equal(got, want) {
		t.Errorf("not holding: %+v, want %+v", got, want)
	}
	if got := NotHolding(writesOf("a", pods), LeaseName); len(got) != 1 {
		t.Errorf("a write before any Lease write: %+v", got)
	}
}

// Verbs are the API server's: a name makes a get or a delete, its absence
// a list or a deletecollection, watch=true a watch; a Namespace's own
// subresources are not taken for a namespaced resource.
func TestRequestVerb(t *testing.T) {
	for _, c := range []struct {
		method, url, want string
	}{
		{"GET", "/api/v1/namespaces/x/pods", "list"},
		{"GET", "/api/v1/pods?limit=500&resourceVersion=0", "list"},
		{"GET", "/api/v1/namespaces/x/pods?watch=true&resourceVersion=7", "watch"},
		{"GET", "/api/v1/watch/namespaces/x/pods", "watch"},
		{"GET", "/api/v1/namespaces/x/pods/p", "get"},
		{"GET", "/api/v1/namespaces/x", "get"},
		{"GET", "/api/v1/namespaces", "list"},
		{"PUT", "/api/v1/namespaces/x/finalize", "update"},
		{"PUT", "/api/v1/namespaces/x/status", "update"},
		{"PUT", "/apis/apps/v1/namespaces/x/deployments/d/status", "update"},
		{"PATCH", "/api/v1/nodes/n", "patch"},
		{"POST", "/apis/apps/v1/namespaces/x/replicasets", "create"},
		{"POST", "/api/v1/namespaces/x/pods/p/eviction", "create"},
		{"DELETE", "/api/v1/namespaces/x/pods/p", "delete"},
		{"DELETE", "/apis/batch/v1/namespaces/x/jobs", "deletecollection"},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l", "get"},
		{"GET", "/api", "nonresource"},
		{"GET", "/api/v1", "nonresource"},
		{"GET", "/apis/apps/v1", "nonresource"},
		{"GET", "/apis/apps", "nonresource"},
		{"GET", "/version", "nonresource"},
		{"GET", "/openapi/v3", "nonresource"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestVerb(c.method, u); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.url, got, c.want)
		}
	}
}

// A witness counts every request by verb, and its conflicts.
func TestWitnessCounts(t *testing.T) {
	var w witness
	for _, c := range []struct {
		verb string
		code int
	}{{"list", 200}, {"update", 409}, {"update", 200}, {"create", 429}} {
		w.countVerb(c.verb)
		w.countCode(c.code)
	}
	got := w.requests()
	want := map[string]int{"list": 1, "update": 2, "create": 1}
	if !maps.Equal(got.ByVerb, want) || got.Conflicts != 1 || got.Throttled != 1 ||
		got.Total() != 4 {
		t.Errorf("counts %+v (total %d), want %v with one conflict and one 429", got,
			got.Total(), want)
	}
	got.ByVerb["list"] = 9
	if w.requests().ByVerb["list"] != 1 {
		t.Error("requests returned the witness's own map")
	}
}
