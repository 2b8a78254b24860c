// Package fence stops a leadership term's writes once the term can no longer
// be sure it leads.
//
// Leader election alone is not fencing: a replica that stopped renewing its
// lease (paused, partitioned, or running a controller that ignores its
// context) can go on writing after another replica took the lease over. A
// Gate closes that gap for the writes that go through the host: every client a
// term hands out checks the term's Gate before a mutating request leaves the
// process, and refuses it with an error wrapping ErrFenced that names the
// controller and the term. Mutating requests are: POST, PUT, PATCH, DELETE
// (creates, updates, patches, deletes, evictions, subresources); any request
// that asks to switch protocols, whatever its method (client-go's exec,
// attach and port-forward over WebSocket are GETs, SPDY ones may be, and so
// are proxied upgrades); and any request to a pod's exec, attach or
// portforward subresource. Other reads (GET, including watches and plain
// proxied GETs, HEAD, OPTIONS) always go through.
//
// A Gate is open while its lease is known to be valid: until a deadline that
// its owner extends after each successful renewal (package leader uses the
// renewal request's start plus min(RenewDeadline+RetryPeriod,
// LeaseDuration), the moment by which client-go must have noticed a failed
// renewal, which leaves the term's whole stop budget before another replica
// could take over). Close shuts it for good: package leader closes a term's
// Gate the moment the lease is lost and when the term has returned.
//
// A Gate counts the writes in flight: those that passed the check and that
// the API server has not answered. A caller whose context ends gets its
// error at once, as from any client, but its request is not cancelled with
// it: it goes on until the server answers, so that the Gate knows when it
// was applied. Drain shuts the Gate and waits for them; package leader
// drains a term's Gate before it releases the lease, and keeps the lease
// (left to expire) when writes are still in flight after the renewal
// deadline.
//
// Guarantees:
//   - A closed Gate never reopens. A Gate whose deadline passed opens again
//     only when Extend is called with a later deadline, that is when a renewal
//     of the lease succeeded.
//   - A refused request never reaches the network.
//   - Once Drain returned 0, every write that passed the Gate has been
//     answered by the API server: none can be applied after that moment.
//
// Non-guarantees:
//   - A request that passed the check before the lease was lost (and not
//     released) may still be in flight and be applied by the API server
//     after another replica took over: the residual window is one
//     request's latency. See docs/election.md's measurement ("Fenced
//     writes").
//   - Drain gives up at its context's end: the writes it gives up are
//     cancelled, and the API server may still apply one (which is why
//     package leader then does not release the lease).
//   - Writes made with credentials or clients that did not come from the
//     term (a client a controller built from its own kubeconfig, a fake
//     clientset injected with manager.Builder.WithClient) are not fenced.
//   - Clocks: the deadline is measured on this replica's clock; other
//     replicas time the lease on theirs. The margin between the deadline and
//     the lease's expiry (the stop budget) absorbs small rate differences,
//     not a clock that jumps.
package fence
