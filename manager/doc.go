// Package manager hosts Kubernetes controllers the way kube-controller-manager
// does: it selects descriptors with --controllers, builds them over one
// shared informer set per leadership term, runs them under leader election
// (and leader migration), serves their health, metrics and debug endpoints,
// and stops them within a bound.
//
// Build a Manager with NewBuilder(component).Register(...).Build(); Build
// checks every input and reports all problems in one error. Run blocks until
// its context is done, the lease is lost (under the exit policy), or a
// controller fails, and returns why.
//
// # Lifecycle
//
// Guarantees:
//   - Within a term, each StartFirst controller is built and its Run called
//     (on its own goroutine, without the start interval's jitter) before any
//     other InitFunc is called; once the term is stopping no further InitFunc
//     is called; the informers start only after every InitFunc returned;
//     InformersStarted closes after they started; then every other
//     controller's Run starts in its own goroutine. Every Controller an
//     InitFunc returned gets exactly one Run call.
//   - InformersStarted is closed in every term: after the informers started,
//     or, when an InitFunc failed, as the term stops (its context is done
//     then), so a controller waiting on it always returns.
//   - A panic in an InitFunc, or in the goroutine that calls a controller's
//     Run, is recovered, logged with the controller's name, fails its health
//     check, ends the term and is returned from Run (a *ControllerError,
//     matching ErrControllerFailed). Workers of package workloop recover their own
//     panics. The package never exits the process.
//   - A term stops within ControllerShutdownTimeout, and, the moment the
//     lease is found lost (before or during the stop, whatever began it), by
//     the lease's leader.Term.StopBy (its last renewal plus LeaseDuration,
//     less a fiftieth of it for clocks that drift), so that its controllers
//     stop before another replica could take the lease. An InitFunc that has
//     not returned by then is abandoned too. The stragglers are named
//     (ErrShutdownTimeout); such a term ends Run instead of campaigning
//     again. The term's informers are shut down after it.
//   - Run owns every goroutine it starts and returns after they ended, except
//     controllers and InitFuncs that ignored cancellation past the bound,
//     which it names; nothing else is left behind for them.
//   - A serving failure after Run started ends Run with that error.
//   - A term's typed informers keep, of each object, only the fields the
//     controllers that share the informer declared they read
//     (descriptor.WithReads, ReadsMetadataOnly), and whole objects where one
//     of them did not declare the resource; repeated strings are shared
//     (package informers: Options.Reads, InternStrings). A controller
//     started while the term runs (SetControllers, WhenServed) that reads
//     more than a running informer keeps gets an informer of its own. An
//     InitFunc that calls SetTransform on an informer replaces the host's
//     transform for every holder of it: objects are then cached whole.
//   - Controllers come and go within a term (docs/dynamic.md): a
//     WhenServed controller starts when discovery serves its resources and
//     stops when one goes; SetControllers starts and stops controllers with
//     --controllers' rules. Every such start runs over informers of its own,
//     shut down when it stops; a stop is bounded as a term's is, and one
//     that overruns fails the term. One controller never runs twice at once
//     on a replica; a term that starts later starts from the current
//     selection.
//   - --cloud-provider follows kube-controller-manager since v1.31 (empty or
//     "external"; cloud loops never run) unless the program runs a provider
//     in-process (Builder.WithInProcessCloudProvider).
//
// # Leadership
//
// Guarantees under leader election, leader migration and warm standby:
//   - With leader election the lease is released only after the term's
//     controllers returned; a term that abandoned stragglers keeps it until
//     it expires (leader.ErrTermStillRunning); losing it is an error from Run
//     (leader.ErrLeaseLost),
//     even when it happens while Run is already stopping, or, under the
//     recampaign policy, a fresh campaign after the term fully stopped.
//   - Under leader migration the migration lock is sought only within a main
//     term (once its StartFirst controllers run). The migration term and the
//     main term's controllers are told to stop at once, both bounded by the
//     main term's stop bound (its lease's StopBy once that is lost), and the
//     main lock is released only after the migration lock: a replica never
//     holds the migration lock without the main one. Every replica follows
//     the migration Lease, so a follower knows (and /readyz shows) who runs
//     the migrated controllers. A component none of whose controllers is
//     migrated never seeks it. Build rejects a migration lock named as
//     another lock of the component (the main Lease, a shard group's).
//   - Under warm standby (Options.WarmStandby) a follower keeps the informers
//     its controllers declare synced, builds no controller and writes
//     nothing; the next term adopts that set as its one informer set and
//     stops it when it ends. StartFirst ordering is unchanged, but every
//     controller's Run starts as soon as its own InitFunc returned, without
//     waiting for the other InitFuncs (a controller's first action is not
//     delayed by its siblings' event handler replays); InformersStarted
//     still closes only after every InitFunc returned. An InitFunc that calls
//     SetTransform or SetWatchErrorHandler on a declared informer gets
//     client-go's "already started" error under warm standby.
//   - Writes are fenced: the clients and configs a term's ClientBuilder hands
//     out (and the ServiceAccount tokens minted for them, on the term's
//     context), and its event recorder, refuse mutating requests (ErrFenced
//     from package fence, naming the controller and the lock) once the
//     term's lease is not known to be valid: lost, not renewed in time, or
//     the term returned. A controller's events are written with its own
//     client (its credentials under --use-service-account-credentials), the
//     gate checked as each leaves, and the term waits for the writes in
//     flight (a second at most, then cancels them) before it ends.
//     Controllers WithoutLeaderElection are not fenced.
//
// # Sharding
//
//   - Under sharding (Options.Sharding) a Sharded descriptor runs on every
//     replica, in one term per slot of the key space the replica holds a
//     slot Lease for (package shard); each such term has the guarantees
//     above with the slot Lease as its lease (bounded stop, release after
//     stop, fenced writes), its own informer set holding only the slot's
//     objects, and its own instance of each sharded controller. A slot term
//     that fails ends Run, as the main term does. Unsharded controllers keep
//     the main lock in the same Manager. Without LeaderElect, or with
//     sharding off, a Sharded descriptor is an ordinary leader-elected one.
//
// # Non-guarantees
//
//   - A controller the term built at its start and SetControllers disabled
//     has the handlers it added through its Context's factories removed,
//     but the informers stay until the term ends, even one no other
//     controller uses; a handler added through Context.Informers is not
//     removed. Controllers started later share no informers, with the term
//     or with each other.
//   - Fencing covers writes made through the term's clients only; a request
//     already in flight when the lease stops being known-valid may still be
//     applied (one request's latency), and clients injected with
//     Builder.WithClient (fake clientsets) are not fenced.
//   - A panic in a goroutine a controller starts itself, outside package
//     workloop, is not recovered and crashes the process, as in any Go
//     program.
//   - A controller that ignores its context keeps running after Run returned
//     (its writes are fenced).
//   - The health gauges in /metrics reflect the last probe of the health
//     endpoints.
//   - Some of a sharded controller's informers hold every slot's objects
//     (descriptor.Descriptor.Sharded lists which); a slot taken over lists
//     its objects afresh (no warm standby for slots).
//   - klog is process-global; the Manager never reroutes it. Programs call
//     logging.ForProgram before Build and pass its logger to WithLogger.
package manager
