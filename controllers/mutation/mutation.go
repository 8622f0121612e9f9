// Package mutation writes the one log line every change the operator makes to the cluster
// carries, whichever reconciler makes it: {"msg":"mutation","action":...,"fleet":...,
// "object":...,"why":...}. docs/operations.md ("Logs of what the operator changed") lists the
// actions; the chaos campaign's monitor and the e2e specs read these lines.
package mutation

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Msg is the message of every mutation line.
const Msg = "mutation"

// Log writes the mutation line of a write the API server accepted: the action, the fleet it
// concerns (namespace/name), the object written (kind/name, with the field written when it is
// one field), why, in words a person can act on, and any further key-value pairs. Call it
// only once the write was accepted and changed something.
func Log(ctx context.Context, action, fleet, object, why string, kv ...any) {
	log.FromContext(ctx).Info(Msg, append([]any{"action", action, "fleet", fleet, "object", object, "why", why}, kv...)...)
}
