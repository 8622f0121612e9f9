// Package celld is the operator's client for celld's internal API: it reads GET /state from one
// pod and turns the answer into the few facts the operator publishes (loaded version and prefix,
// resident, pending and swapping cells, the runtime generation, and a load view for capacity).
//
// It owns the transport rules and the trust boundary, and nothing else: which pods to read, how
// often, and what the answers mean for status belong to the observer.
//
// Why the rules are strict:
//
//   - A pod is read at its own IP on port 8081, never through a Service or a DNS name. A Service
//     balances across members and routes only to ready ones, so its answer may come from another
//     pod than the one the observation is attributed to, and an observation pinned on the wrong
//     pod is worse than none. For the same reason there is no proxy and redirects are not
//     followed.
//   - Calls are short (1 s dial, 2 s in total) so one hung member cannot use up the observer's
//     10 s collection deadline; celld binds its listener before it accepts, so a starting pod
//     hangs rather than refuses.
//   - The body is a trust boundary: the listener is unauthenticated and the answer ends up in
//     status that release pipelines act on. A body over 1 MiB is an error, not a truncation; the
//     JSON must be exactly one object with no duplicate keys (a reader could pick either copy),
//     no nesting beyond 64 and nothing after it. Everything else wrong is ErrMalformed, so a
//     confused or hostile node makes the result Unknown instead of a wrong version or count.
//   - A document without a deployment object is ErrUnsupported: a celld without a deployed
//     application, not a broken one.
package celld
