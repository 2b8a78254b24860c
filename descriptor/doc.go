// Package descriptor says what a controller is to a controller host: a
// canonical name, optional aliases, the feature gates it requires, whether it
// is a cloud-provider loop, whether it is off unless named explicitly, whether
// it must be built and running before every other controller, and an InitFunc
// that builds it over shared informers.
//
// Guarantees:
//   - A Descriptor is a value. Every With… method returns a modified copy and
//     never changes the receiver or slices the caller passed in.
//   - NewSet validates a whole registry at once and reports every problem in a
//     single error, each naming the offending descriptor.
//   - Nothing here starts a goroutine, touches the network or registers
//     anything globally.
//
// Non-guarantees:
//   - This package does not decide which controllers run; selection by
//     --controllers, feature gates and cloud loops is the manager's job.
//   - A Controller's Run is trusted to honour its context; the host bounds how
//     long it waits, but it cannot stop a goroutine that ignores cancellation.
package descriptor
