package leader

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/fence"
)

// slowServer is an API server, behind a transport, that takes the writes
// it is sent and applies each only when the test answers them: a caller
// that stops waiting gets its error at once, but a write that reached the
// server is applied all the same, as on a real network.
type slowServer struct {
	mu      sync.Mutex
	pending int           // writes received and not applied yet
	arrived chan struct{} // closed when the first write arrives
	answer  chan struct{} // closed (answerAll) to apply and answer every write
	once    sync.Once
	closing sync.Once
}

func (s *slowServer) answerAll() { s.closing.Do(func() { close(s.answer) }) }

func (s *slowServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.pending++
	s.mu.Unlock()
	s.once.Do(func() { close(s.arrived) })
	applied := make(chan struct{})
	go func() { // the server's side: applied when answered, whoever still waits
		<-s.answer
		s.mu.Lock()
		s.pending--
		s.mu.Unlock()
		close(applied)
	}()
	select {
	case <-applied:
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

func (s *slowServer) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// A term's write sent before it ended, whose caller gave up waiting, is
// waited for before the lease is released: the release never reaches the
// API server while the write may still be applied after it. Answered in
// time, the lease is released once it was applied; never answered, the
// lease is left to expire.
func TestReleaseWaitsForTheTermsWritesInFlight(t *testing.T) {
	for _, answered := range []bool{true, false} {
		name := map[bool]string{true: "answered", false: "never answered"}[answered]
		t.Run(name, func(t *testing.T) {
			srv := &slowServer{arrived: make(chan struct{}), answer: make(chan struct{})}
			defer srv.answerAll()
			cs := newClientset()
			var mu sync.Mutex
			var violations []string
			cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
				l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
				if holderOf(l) == "" && srv.inFlight() > 0 {
					mu.Lock()
					violations = append(violations, "the lease was released while a write of "+
						"the term had reached the server and was not applied yet")
					mu.Unlock()
				}
				return false, nil, nil
			})
			e := newElector(t, cs, testConfig("a"), Exit)
			termReturned := make(chan struct{})
			r := start(t, e, func(ctx context.Context) error {
				defer close(termReturned)
				rt := fence.RoundTripper(TermFrom(ctx).Gate(), "writer", srv)
				wctx, cancel := context.WithCancel(ctx)
				defer cancel()
				req, err := http.NewRequestWithContext(wctx, http.MethodPut,
					"http://api.invalid/api/v1/namespaces/x/configmaps/y", strings.NewReader("{}"))
				if err != nil {
					return err
				}
				sent := make(chan error, 1)
				go func() {
					resp, err := rt.RoundTrip(req)
					if err == nil {
						_ = resp.Body.Close()
					}
					sent <- err
				}()
				<-srv.arrived
				cancel() // the writer stops waiting, as a controller told to stop does
				if err := <-sent; !errors.Is(err, context.Canceled) {
					t.Errorf("the write's caller got %v, want its context's error", err)
				}
				return nil
			})
			<-termReturned
			if answered {
				srv.answerAll()
			}
			if err := r.wait(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, v := range violations {
				t.Error(v)
			}
			want := map[bool]string{true: "", false: "a"}[answered]
			if h := holderOf(getLease(t, cs)); h != want {
				t.Errorf("holder after Run returned = %q, want %q", h, want)
			}
		})
	}
}
