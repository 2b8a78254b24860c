package cloud_test

import (
	"testing"

	"github.com/ctrlhost/ctrlhost/test/readmecheck"
)

// TestREADMECloudControllerManager: the README's cloud-controller-manager
// snippet is the code in readme_example_test.go, which compiles with the
// tests.
func TestREADMECloudControllerManager(t *testing.T) {
	readmecheck.Check(t, "../README.md", "## Cloud controllers and a cloud-controller-manager", "readme_example_test.go")
}
