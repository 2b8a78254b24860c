// Package sim is a seeded simulation of ctrlhost's host: several replicas of
// a real manager.Manager in one process, under testing/synctest (fake time,
// so a 15 s lease costs nothing), against an in-memory API server
// (internal/fakeapi: resourceVersions, 409 conflicts, Lease semantics,
// watches), with faults injected per replica. A seed picks the
// configuration and the fault schedule; the run checks the host's promises
// as it goes and when it ends.
//
// What a seed picks:
//   - 2 to 4 replicas; lease settings near the edge of what Build accepts
//     (some seeds below it, which Build must reject); each replica's clock
//     running up to 1% fast or slow (leader.ScaledClock);
//   - leader migration on or off (a random file migrating some controllers
//     to the migration lock), sharding on or off with 1 to 32 slots, warm
//     standby, per-controller ServiceAccount credentials, the lost-lease
//     policy, the start interval and the shutdown timeout;
//   - controllers that stop at once, slowly (within the stop budget) or
//     never, and InitFuncs that block (honouring their context or not),
//     fail or panic now and then;
//   - controllers that come and go (SetControllers toggles, some of which
//     must be refused; WhenServed ones on a resource that flaps) while
//     they declare different reads (pruned caches of several variants),
//     add indexes at each start, request informers of their own, decline
//     to start now and then, and send each other keys through the term's
//     queues;
//   - a fault schedule: partitions of one replica (its requests, and its
//     open watches, hang or fail), slow Lease writes, SIGTERM-like
//     cancellation, crashes (the replica vanishes without releasing
//     anything), API server restarts (every watch drops, resumes get 410).
//     Replicas that stop are restarted with a new identity, as a pod would
//     be.
//
// What a run checks:
//   - no overlap: at most one replica runs a given controller (or a given
//     slot of a sharded one) at a time, from its Run call to its return,
//     unless the earlier one is a straggler its replica abandoned and named
//     (ErrShutdownTimeout), whose writes the fence refuses;
//   - fencing: the API server applies no write of a controller (objects
//     and events) that left its replica while the writer did not hold a
//     valid lease for that controller (the main Lease, the migration Lease,
//     or the slot's Lease), as the server's own Lease history tells;
//   - after a replica's Run returned, nothing it started writes, and no
//     write of it is applied after it released a Lease;
//   - no informer (a second after its last holder stopped) and no watch (a
//     second after its replica's Run returned) is held by nobody;
//   - a warm takeover in calm lists nothing again;
//   - no key sent through the queues is lost across a stop and a start;
//   - SetControllers refuses exactly what the docs say, and a controller
//     is named failed only when it fails on its own;
//   - a follower that knows the leader is ready (/readyz) once the cluster
//     has been calm for two lease durations;
//   - a term whose controllers honour cancellation stops within its
//     budget: Run's error names as stragglers only controllers that do
//     not stop in time;
//   - every goroutine of every replica ends when the run ends (synctest
//     reports any left blocked).
//
// Determinism: a seed fixes the configuration, the fault schedule and the
// instants (fake time) at which faults happen. The order in which
// goroutines run within one instant is the Go scheduler's, and client-go
// and the host draw jitter from the global random source, so two runs of a
// seed may interleave differently; a failing seed is replayed with
// -sim.seed (and -sim.repeat to run it several times).
package sim
