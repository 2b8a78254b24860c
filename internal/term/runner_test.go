package term

import "testing"

// TestOfControllerNamesOnlyItsGoroutines: a straggler is matched to the
// controller whose goroutine it is, in any role, and to no controller
// whose name it merely starts with.
func TestOfControllerNamesOnlyItsGoroutines(t *testing.T) {
	for _, tc := range []struct {
		name, controller string
		want             bool
	}{
		{goroutineName("web", roleRun), "web", true},
		{goroutineName("web", roleInit), "web", true},
		{goroutineName("web", roleUnit), "web", true},
		{goroutineName("web", roleStopping), "web", true},
		{goroutineName("web-2", roleRun), "web", false},
		{goroutineName("web-2", roleUnit), "web", false},
		{goroutineName("web", roleInit), "web-2", false},
		{"web (other)", "web", false},
	} {
		if got := ofController(tc.name, tc.controller); got != tc.want {
			t.Errorf("ofController(%q, %q) = %v, want %v", tc.name, tc.controller, got, tc.want)
		}
	}
}
