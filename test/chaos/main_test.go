//go:build chaos || integration

// Package chaos runs three replicas of a small operator built on ctrlhost
// (./operator) against a real API server from testenv, each behind its own
// TCP proxy, and a driver that partitions the leader, signals and kills
// replicas, restarts the API server and makes controllers misbehave. It
// checks from the replicas' records that no two ever ran the controller at
// once, that every replica ends when it should, and, from the API server's
// order of writes (resourceVersions), that no replica's write was accepted
// after another replica's newer term had written. docs/chaos.md has the
// scenarios and a measured table.
//
// The full suite has the build tag chaos (make chaos); a short one runs
// with the integration tag.
package chaos

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
