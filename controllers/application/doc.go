// Package application is the application observer: a leader-only loop that reads each
// member's GET /state, publishes status.application and the ApplicationConverged condition,
// and does nothing else.
//
// It owns the observation algorithm of reference-operator.md §2 (which Pods count, how a read
// is judged, how the sums and the condition follow) and its own slice of fleet status. It does
// not own the lifecycle: the fleet reconciler never waits for it, and it never waits for the
// fleet reconciler.
//
// Why it is shaped this way:
//
//   - It is a runnable, not a step of the fleet reconcile. A sweep may take the whole 10 s
//     collection deadline; inside a reconcile it would hold a worker and delay scaling,
//     maintenance and deletion, which the seeds say observation must never gate.
//   - It reads Pods and workloads straight from the API server. The answer is compared with a
//     second, closing read to prove that membership did not change while it sampled; a cache
//     could return the same stale list twice and hide the change.
//   - It can only read objects and apply status: it holds a client.Reader and a status writer,
//     and celld.Client only knows GET /state. Publishing code, /reload, replica changes and
//     deletions are out of reach by construction, not by care.
//   - It applies status with its own field manager (FieldManager) and an apply object that
//     holds only status.application and the ApplicationConverged condition, so the fleet
//     reconciler's conditions, applied by another manager, are never removed or overwritten.
//   - The decision is the pure function Aggregate; everything with a clock or a client feeds
//     it Facts.
package application
