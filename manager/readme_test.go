package manager_test

import (
	"testing"

	"github.com/ctrlhost/ctrlhost/test/readmecheck"
)

// TestREADMEEmbedding: the README's Embedding snippet is the code in
// readme_example_test.go, which compiles with the tests.
func TestREADMEEmbedding(t *testing.T) {
	readmecheck.Check(t, "../README.md", "## Embedding", "readme_example_test.go")
}

// TestREADMESharding: the README's Sharding snippet is the code in
// readme_sharding_example_test.go.
func TestREADMESharding(t *testing.T) {
	readmecheck.Check(t, "../README.md", "## Sharding: every replica works", "readme_sharding_example_test.go")
}
