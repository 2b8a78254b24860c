//go:build unix

package cluster

import (
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
