// Package docs holds the tests that keep README.md and docs/ true: every
// Go snippet in them is code that a test compiles, every relative link
// leads to a file (and heading) that exists, and docs/flags.md's flag
// tables are generated from the flag sets themselves.
//
// Regenerate docs/flags.md after changing a flag with
//
//	go test ./test/docs -run TestFlagsReference -update
package docs
