package sim

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reactingWriter is a client that acts on the answer to its write before
// the server's handler has returned: it runs then once, on the first
// byte of the body, as a client reading the answer through a pipe may.
type reactingWriter struct {
	*httptest.ResponseRecorder
	then func()
}

func (r *reactingWriter) Write(p []byte) (int, error) {
	if then := r.then; then != nil {
		r.then = nil
		then()
	}
	return r.ResponseRecorder.Write(p)
}

func leaseWrite(t *testing.T, w *World, method, holder, by string, rw http.ResponseWriter) {
	t.Helper()
	path := "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases"
	rv := ""
	if method == http.MethodPut {
		path += "/slot"
		meta, _ := w.server.Get(leaseGVR, namespace, "slot")["metadata"].(map[string]any)
		rv, _ = meta["resourceVersion"].(string)
	}
	body := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease",`+
		`"metadata":{"name":"slot","namespace":%q,"resourceVersion":%q},`+
		`"spec":{"holderIdentity":%q,"leaseDurationSeconds":5,"renewTime":%q}}`,
		namespace, rv, holder, time.Now().UTC().Format(metav1.RFC3339Micro))
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerReplica, by)
	w.ServeHTTP(rw, req)
}

// The fencing check judges a write by the Lease record the server held
// when the write arrived; that record must be what each Lease write
// stored, in the order the server applied them, even when the writer (or
// another replica, on the watch event) acts before the handler returned.
func TestTheLeaseRecordIsWhatEachWriteStoredInTheServersOrder(t *testing.T) {
	w := newWorld(Config{})
	first := httptest.NewRecorder()
	leaseWrite(t, w, http.MethodPost, "r1", "r1", first)
	if first.Code != http.StatusCreated {
		t.Fatalf("creating the Lease: %d %s", first.Code, first.Body)
	}
	// r1 gives the Lease up; r2, seeing it free, takes it before the
	// server's handler of r1's write has returned.
	var second *httptest.ResponseRecorder
	release := &reactingWriter{ResponseRecorder: httptest.NewRecorder(), then: func() {
		second = httptest.NewRecorder()
		leaseWrite(t, w, http.MethodPut, "r2", "r2", second)
	}}
	leaseWrite(t, w, http.MethodPut, "", "r1", release)
	if release.Code != http.StatusOK || second == nil || second.Code != http.StatusOK {
		t.Fatalf("the writes failed: release %d %s", release.Code, release.Body)
	}

	var got []string
	for _, st := range w.leases["slot"] {
		got = append(got, fmt.Sprintf("%q by %s", st.holder, st.by))
	}
	want := []string{`"r1" by r1`, `"" by r1`, `"r2" by r2`}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("Lease record = %v, want %v (what each write stored, in the server's order)",
			got, want)
	}
	if ok, why := w.validAt("slot", "r2", w.leases["slot"][2].at, w.seq.Load()+1); !ok {
		t.Errorf("a write r2 sends now would be judged invalid: %s", why)
	}
}
