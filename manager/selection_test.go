package manager

import "testing"

func TestIncludesCloudLoops(t *testing.T) {
	for provider, want := range map[string]bool{"": false, "external": false, "aws": true, "my-cloud": true} {
		if got := includesCloudLoops(provider); got != want {
			t.Errorf("includesCloudLoops(%q) = %v, want %v", provider, got, want)
		}
	}
}
