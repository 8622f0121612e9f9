package fleet

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// write is one API write of a pass, as the executor runs, logs and records it.
type write struct {
	// verb is the mutation line's action ("add finalizer", "delete", "hold", ...), and object
	// what it writes: Kind/name, with the one field written where it is one field.
	verb, object string
	// why is the reason the line gives; kv are further key/value pairs of the line.
	why string
	kv  []any
	// takesDown names the member a write takes down (a Pod delete); "" for a write that takes
	// none down. A pass takes at most one member down: the executor refuses a second.
	takesDown string
	// event is told with the pass's events once the write is done, never for a write that
	// failed.
	event *fleetEvent
}

// errOneMemberPerPass is the executor's refusal of a write that would take a second member
// down in one pass. The plans never ask for it; the executor refuses it anyway, so a future
// plan cannot take two members down by mistake.
type errOneMemberPerPass struct{ refused, done write }

func (e errOneMemberPerPass) Error() string {
	return fmt.Sprintf("refused to %s %s: this pass already did %s %s, and a pass takes at most one member down",
		e.refused.verb, e.refused.object, e.done.verb, e.done.object)
}

// do is the pass's executor of one write: it checks that the write takes no second member
// down, sends it, and, once the API server accepted it, logs the one structured mutation line
// every write carries, records the write on the pass (scope.done) and keeps its event. An
// error is wrapped with the write's verb and object (the API error stays inspectable through
// errors.As). send reports whether it changed anything: a delete of what is already gone, say,
// is no write, and is neither logged nor recorded.
func (r *Reconciler) do(ctx context.Context, s *scope, w write, send func(context.Context) (bool, error)) error {
	if w.takesDown != "" {
		for _, d := range s.done {
			if d.takesDown != "" && d.takesDown != w.takesDown {
				return errOneMemberPerPass{refused: w, done: d}
			}
		}
	}
	changed, err := send(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.verb, w.object, err)
	}
	if !changed {
		return nil
	}
	log.FromContext(ctx).Info("mutation", append([]any{"action", w.verb, "fleet", s.key.String(), "object", w.object, "why", w.why}, w.kv...)...)
	s.done = append(s.done, w)
	if w.event != nil {
		s.events = append(s.events, *w.event)
	}
	return nil
}

// sent is a send whose write always changes what it writes, when it succeeds.
func sent(send func(context.Context) error) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		if err := send(ctx); err != nil {
			return false, err
		}
		return true, nil
	}
}
