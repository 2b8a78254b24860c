package supervisor_test

import (
	"fmt"
	"time"

	"github.com/ctrlhost/ctrlhost/internal/supervisor"
)

// A term runs its controllers in a Group and stops them within a Deadline;
// the ones that did not return are named.
func Example() {
	g := supervisor.NewGroup()
	stop := make(chan struct{})
	stuck := make(chan struct{})
	defer close(stuck)
	g.Go("polite-controller", func() { <-stop })
	g.Go("stubborn-controller", func() { <-stuck }) // ignores stop
	close(stop)
	left := g.Wait(supervisor.NewDeadline(50*time.Millisecond, "--controller-shutdown-timeout"), nil)
	fmt.Println("still running:", left)
	// Output:
	// still running: [stubborn-controller]
}
