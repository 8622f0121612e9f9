package fleet

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// logMutation writes the one structured line every mutation of the operator carries: what it
// did, to which object of which fleet, and why. Read the operator log for "mutation" to see
// everything the operator changed.
func logMutation(ctx context.Context, s *scope, action, object, why string, kv ...any) {
	log.FromContext(ctx).Info("mutation", append([]any{"action", action, "fleet", s.key.String(), "object", object, "why", why}, kv...)...)
}
