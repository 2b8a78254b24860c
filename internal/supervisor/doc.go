// Package supervisor runs named goroutines for one lifetime (a term) and
// waits for them to return within a deadline that can be cut short.
//
// A Group tracks each goroutine by name from Go until it returns, without a
// goroutine of its own: Wait returns as soon as the last one returned, or at
// the deadline with the names of those still running, so a caller can report
// and abandon them. A Deadline starts when the first Wait begins and can be
// cut, for example to what is left of a leader's stop budget the moment its
// lease is found lost.
//
// Guarantees:
//   - Wait never blocks past its Deadline, and never starts a goroutine.
//   - The names Wait returns are exactly the goroutines that had not
//     returned, sorted.
//   - Fail never blocks; Failed is closed by the first failure.
//
// Non-guarantees:
//   - An abandoned goroutine keeps running; nothing can stop a goroutine
//     that ignores its context.
//   - Panics are not recovered here: f must recover what it needs to.
package supervisor
