package builtin

import (
	"fmt"
	"testing"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
)

// The built-ins are the release whose kube-apiserver make test starts.
func TestTheSkewRuleIsTheTestedRelease(t *testing.T) {
	if got, want := fmt.Sprintf("%d.%d", kcmMajor, kcmMinor),
		testbin.DefaultModule().Minor(); got != want {
		t.Errorf("the built-ins are kube-controller-manager %s, the tested kube-apiserver %s",
			got, want)
	}
}
