//go:build tools

// Package testbin pins the upstream commands that testenv runs: it is never
// compiled into ctrlhost. `make testbin` builds the two binaries from the
// modules this go.mod requires, fetched through the Go module proxy.
package testbin

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
