// Package contract is one table of what a controller may rely on from the
// Kubernetes API server, and the runner that holds a server to it. The
// same table runs against kube-apiserver (testenv's, TestContract with the
// integration build tag, in make integration) and against the in-memory
// API server of internal/fakeapi, which managertest.NewAPI and the
// simulation (test/sim) stand on (TestContract without the tag, in go test
// ./...).
//
// Guarantees:
//   - every row runs unchanged against both servers, each in a namespace
//     of its own, one row at a time, with a deadline (RowTimeout);
//   - on kube-apiserver every row must pass;
//   - on the in-memory API a row passes, or it is marked NotModelled, and
//     then the in-memory API must answer the row's request with an error
//     that names what it does not model (the mark is the text the error
//     holds): the test fails when that error does not come, and when a
//     marked row passes (the mark is then stale);
//   - docs/testing.md shows the table, rendered by Markdown, between the
//     contract markers (TestDocsTable keeps it true; -update rewrites it),
//     and docs/simulation.md lists the rows marked Sim.
//
// Non-guarantees: the table states what the host, the built-in controllers
// and operators written on ctrlhost depend on, not the whole API. What it
// leaves out (admission, validation against schemas, defaulting, garbage
// collection, authentication and authorization, namespace existence) is
// listed in internal/fakeapi's package comment. Rows compare status codes
// and reasons, and message texts only where a row says so.
package contract
