// Package bench runs ctrlhost's examples/kcm and upstream
// kube-controller-manager v1.37.1 side by side on one testenv API server,
// scenario by scenario, alternating the two (A B A B …), and prints a table
// of medians, worsts and ratios: convergence, startup, failover and memory.
// It is `make bench`'s comparison with upstream (docs/benchmarks.md); its
// benchmark is tagged integration.
//
// Both programs run the same controllers (the seven of ctrlhost's native
// built-ins that are on by default in both) with the same flags. Upstream's
// binary is built from the Go module proxy through this module, which
// requires k8s.io/kubernetes; the Go build cache keeps it between runs.
package bench
