// Package shardgroup is the host's sharding plumbing behind package shard:
// a replica's membership in a sharded group (Group: member and slot
// Leases, a slot term per slot held), which member should own each slot
// (Assign, Owned, Balanced: rendezvous hashing with bounded loads), and the
// informers' view of a slot (Filter, a ListerWatcher that asks the server
// for a slot's objects and keeps only those itself; Clientset, a clientset
// whose typed informers of shard.Filtered resources go through Filters).
// Package shard's doc states what a user is promised; this package holds
// the parts only the Manager uses.
//
// Guarantees: Assign, Owned and Balanced are pure functions of their
// inputs; a Filter's lists and watches never hand out an object outside its
// slots, whether or not the server applied the selector (ServerApplied and
// Dropped tell which: a list response says so in ListMeta.ShardInfo,
// watches say nothing, so what the client had to drop is the other
// witness); a slot changes hands only through its Lease, after its term
// stopped.
//
// Non-guarantees: members may see the membership differently for a moment
// (watch lag) and then want overlapping slots; the slot Leases keep them
// apart until their views agree.
package shardgroup
