// Package leader elects one leader among the replicas of a controller host
// on a coordination.k8s.io/v1 Lease, with client-go's tools/leaderelection
// doing the election, and runs a term (one leadership period) while this
// replica leads. It also reads, defaults, validates and applies KCM's
// LeaderMigrationConfiguration files (see MigrationConfig).
//
// An Elector adds to client-go:
//
//   - The lease is released when Run's context is cancelled, but only after
//     the term has returned; until then it keeps being renewed.
//   - Followers watch the Lease and try to acquire it at once when it is
//     released, deleted or expired, instead of at their next RetryPeriod, so a
//     graceful handoff takes milliseconds. That needs list and watch on the
//     Lease (KCM's RBAC role grants only get and update): without them the
//     watch gives up, handoff waits for client-go's next poll, and followers
//     still try at once when the lease expires by client-go's reckoning.
//   - Losing the lease is an error returned by Run (policy Exit), or the
//     replica campaigns again once the term has stopped (policy Recampaign).
//     Nothing here exits the process.
//   - Watchdog fails a liveness check when a term outlives its lease.
//   - Each term carries a Term in its context (TermFrom): Lost closes the
//     moment the lease is lost, even while the term is already stopping for
//     another reason, and Gate is the term's write fence (package fence).
//
// # Guarantees
//
//   - A term has returned before its lease is released, and before Run
//     campaigns again: the lease is never released while a term runs, nor
//     after a term that returned with work still running
//     (ErrTermStillRunning): that lease expires instead.
//   - One Elector runs at most one term at a time.
//   - Every goroutine Run starts has ended when Run returns.
//   - A lease lost while the term runs or stops makes Run return an error
//     wrapping ErrLeaseLost (under Recampaign only when Run's context is
//     done too; otherwise it campaigns again).
//   - A term's Gate is open only while the lease is known to be valid: from
//     the acquiring write until RenewDeadline+RetryPeriod (at most
//     LeaseDuration) after the newest successful renewal's request started.
//     It shuts for good the moment the lease is lost and when the term
//     returns. Clients that check it (package manager hands such clients to
//     controllers) cannot write once another replica could hold the lease.
//
// # Non-guarantees
//
// Election by itself does not fence: the holder only believes it holds the
// lease, and a process that is paused (GC, VM suspension, overloaded node)
// can still act after its lease expired and another replica took over. The
// Gate closes that gap only for writes that check it, and a request that
// passed the check just before it shut may still be in flight (package
// fence). After a lost lease the term's context is
// cancelled at once, and Term.StopBy is when the term must have stopped:
// the renewals' start plus LeaseDuration, less a second (client-go
// followers see renewals by their renewTime's whole second) and a fiftieth
// of the lease for clocks that run at different rates (up to 1% each);
// Config.StopBudget is the least time that leaves after the loss is
// noticed, and Validate rejects settings where it is not positive (a rule
// kube-controller-manager does not have). That guarantee is only as good as the term's honouring
// of its context, and it assumes clocks that drift apart by no more than
// 2%. Timestamps in the Lease are not trusted: like client-go, followers
// time the expiry from when they saw the Lease change.
//
// Deleting a held Lease lets a follower acquire it at once (client-go would
// too, at its next poll); the old holder's term is only cancelled when its
// renewal has failed, up to RetryPeriod+RenewDeadline later. If term panics,
// Run stops its goroutines and lets the panic through without releasing the
// lease, which then expires.
package leader
