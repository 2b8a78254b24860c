// Package shard cuts a controller's key space into a fixed number of slots,
// so that replicas can share a controller's work instead of one replica
// doing all of it while the others idle (KEP-5866's server-side sharded
// list and watch is its substrate).
//
// This package holds what a descriptor and a host need to name:
//
//   - Space: the key space. A key is an object's namespace (Keying
//     ByNamespace, the default: a ReplicaSet and its pods land in the same
//     slot) or its UID (ByUID). Its 64-bit FNV-1a hash, the API server's, is
//     cut into Slots equal ranges; slot i holds the hashes in
//     [i·2⁶⁴/Slots, (i+1)·2⁶⁴/Slots). Space.Selector writes the
//     ListOptions.ShardSelector of a set of slots (adjacent slots as one
//     range), Space.Matches filters an object on the client.
//   - Options: --enable-sharding and --shard-slots, for a host
//     (manager.Options.Sharding); Scope: the slots one controller instance
//     works (descriptor.Context.Shard). Which resources a slot's informers
//     hold only that slot's objects of: descriptor.Descriptor.Sharded.
//
// The plumbing is the host's own (internal/shardgroup): each replica holds
// a member Lease ("<group>-member-s<slots>-<hash of identity>") while it
// runs, follows every member Lease of its group, and stands for the slot
// Leases ("<group>-slot-<i>") that rendezvous hashing with bounded loads
// gives it among the live members (every member gets ⌊S/M⌋ or ⌈S/M⌉ slots,
// and a member joining or leaving moves few). A slot's term is that slot
// Lease's term (leader's fencing Gate included). A slot changes hands only
// through its Lease: the member that should give it up stops its term and
// then releases the Lease (leader's guarantee), and the new owner, watching
// the Lease, takes it within milliseconds. A crashed member's slot Leases
// expire; a member that saw one unchanged for its whole duration releases
// it on the holder's behalf (an update that fails if the holder renewed
// meanwhile) so that its own elector need not wait a second duration. A
// member whose member Lease is lost stops all its slots and stands again.
// Members that cut the key space into different numbers of slots (the
// number is in their member Lease's name) work no slot at all until they
// agree: slot i would mean other keys to each. A slot's informers list and
// watch with the slot's ShardSelector and keep only its objects on the
// client too, so they hold only their slots whether or not the server
// applied the selector (ShardedListAndWatch is alpha; a server without it
// ignores the field).
//
// How package manager uses it: a descriptor marked Sharded runs, under
// --enable-sharding, not in the leader's term but in one term per slot this
// replica holds: the slot Lease's term, with its own informer set over a
// clientset filtered to that slot, its own fencing Gate, its own instance of each
// sharded controller, and the controller's client rate limiter shared with
// the replica's other slot terms (a replica's budget does not grow with
// the slots it works). Status, /readyz?verbose (the "sharding" check and
// each sharded controller's check) and the shard_slot_held metric show
// the slots held. Unsharded controllers keep the main Lease, in the same
// Manager.
//
// API server load: every member renews its member Lease and each slot
// Lease it holds every RetryPeriod: (M + S) / RetryPeriod writes per
// second for M members and S slots (3 members, 16 slots, 2 s: 9.5 writes
// per second, against KCM's 0.5 for its one Lease), plus, per member, one
// watch on the namespace's Leases and one per slot Lease it stands for.
//
// A slot handoff costs the new owner a fresh LIST of its slot's objects
// (there is no warm standby for slots: a follower cannot know which slot
// it will get), and each slot term runs its own workers: a replica with k
// slots runs k × --concurrent-…-syncs workers of a sharded controller,
// within one client budget.
//
// Failure modes: members may see the membership differently for a moment
// (watch lag); they then want overlapping slots, and the slot Leases keep
// them apart until their views agree. A member cut off from the API server
// loses its slot Leases after RenewDeadline and stops each slot's term
// within the stop budget (leader.Config.StopBudget), before another member
// can take the slot; an unreachable API server stops everyone. Clocks must
// run at similar rates (not agree), as for any Lease.
//
// Guarantees: Space and its methods are pure functions of their inputs
// and agree with the API server's hashing (k8s.io/apimachinery/pkg/sharding);
// a slot's filtered informers never hand out an object outside its slots;
// an object's slot never changes (namespace and UID are immutable), so a
// watch never sees one move out of a slot.
//
// Non-guarantees: the host balances slots, not keys. How evenly keys spread
// over the slots is up to the API server's hash, and FNV-1a spreads names
// that differ only in their last characters badly: its high bits, which
// the ranges cut, barely change with the last byte. 100 namespaces named
// ns-0 … ns-99 land in 2 of 16 slots; 100 named by GenerateName (five
// random characters at the end) spread over all 16 (shard_test.go measures
// both). UIDs spread well. Even with a good spread, few keys per slot (100
// namespaces over 16 slots) make the keys per member vary around the
// mean. Cluster-scoped objects have no namespace; a controller
// keyed by namespace that caches Namespaces filters them by name
// (Space.MatchesNamespaceName), on the client only: the server-side
// selector cannot express it.
package shard
