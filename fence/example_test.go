package fence_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/fence"
)

// A term's clients check its Gate before every write. package leader
// extends and shuts the Gate; here the example does it by hand.
func Example() {
	gate := fence.NewGate("lock kube-system/my-manager, identity host_1", nil)
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	cfg.Wrap(
		func(rt http.RoundTripper) http.RoundTripper { return fence.RoundTripper(gate, "widget-controller", rt) },
	)

	gate.Extend(time.Now().Add(time.Minute)) // a renewal succeeded
	fmt.Println("writes allowed:", gate.Check("widget-controller") == nil)

	gate.Close("the lease was lost")
	err := gate.Check("widget-controller")
	fmt.Println("fenced:", errors.Is(err, fence.ErrFenced))
	fmt.Println(err)
	// Output:
	// writes allowed: true
	// fenced: true
	// controller "widget-controller": write fenced: the term's lease is not known to be valid: term lock kube-system/my-manager, identity host_1: the lease was lost
}
