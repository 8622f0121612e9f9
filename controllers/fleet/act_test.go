package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// loggedContext returns a context whose logger keeps every line it is given.
func loggedContext() (context.Context, *[]string) {
	lines := &[]string{}
	l := funcr.New(func(prefix, args string) { *lines = append(*lines, args) }, funcr.Options{})
	return log.IntoContext(context.Background(), logr.Logger(l)), lines
}

func actScope() *scope {
	return newScope(&v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pf", UID: "u1"}}, time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
}

// TestExecutorLogsRecordsAndTellsOnlyWhatItDid: a write the API server accepted is logged
// once with its verb, object and reason, recorded on the pass and its event kept; a write that
// failed is none of these and its error names the write and keeps the API error; a send that
// changed nothing (a delete of what is gone) is neither logged nor recorded.
func TestExecutorLogsRecordsAndTellsOnlyWhatItDid(t *testing.T) {
	r := &Reconciler{}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "pf-1", errors.New("the object has been modified"))
	ev := &fleetEvent{kind: corev1.EventTypeWarning, reason: v1.EventMemberRecreated, message: "Recreating member pf-1"}
	cases := []struct {
		name                     string
		changed                  bool
		err                      error
		wantLogged, wantRecorded bool
		wantErrText              string
	}{
		{name: "accepted", changed: true, wantLogged: true, wantRecorded: true},
		{name: "refused by the API server", err: conflict, wantErrText: "delete Pod/pf-1: "},
		{name: "nothing to change", changed: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, lines := loggedContext()
			s := actScope()
			calls := 0
			w := write{verb: "delete", object: "Pod/pf-1", why: "Recreating member pf-1", member: "pf-1", takesDown: true, event: ev, kv: []any{"paths", "x"}}
			err := r.do(ctx, s, w, func(context.Context) (bool, error) { calls++; return tc.changed, tc.err })
			if calls != 1 {
				t.Fatalf("send ran %d times, want once", calls)
			}
			if tc.wantErrText == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.wantErrText != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErrText) || !apierrors.IsConflict(err) {
					t.Fatalf("error %v: want it to start with %q and still be the API server's conflict", err, tc.wantErrText)
				}
			}
			logged := 0
			for _, l := range *lines {
				if strings.Contains(l, `"msg"="mutation"`) {
					logged++
					for _, want := range []string{`"action"="delete"`, `"fleet"="ns/pf"`, `"object"="Pod/pf-1"`, `"why"="Recreating member pf-1"`, `"paths"="x"`} {
						if !strings.Contains(l, want) {
							t.Errorf("mutation line %s lacks %s", l, want)
						}
					}
				}
			}
			if (logged == 1) != tc.wantLogged || logged > 1 {
				t.Errorf("logged %d mutation lines, want logged=%v: %v", logged, tc.wantLogged, *lines)
			}
			if (len(s.done) == 1) != tc.wantRecorded || (len(s.events) == 1) != tc.wantRecorded {
				t.Errorf("recorded %v and events %v, want recorded=%v", s.done, s.events, tc.wantRecorded)
			}
		})
	}
}

// TestExecutorWritesNothingElseAfterTakingAMemberDown: writes before a disruption are not
// limited; once a pass took a member down, only writes about that member (a replacement's
// commit, claim delete and hold release) run, and a write that would take a second member
// down, or any other write, is refused before it is sent and not logged. The report's own status
// write is not one of the pass's actions and still runs.
func TestExecutorWritesNothingElseAfterTakingAMemberDown(t *testing.T) {
	r := &Reconciler{}
	ctx, lines := loggedContext()
	s := actScope()
	sentTo := []string{}
	send := func(object string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { sentTo = append(sentTo, object); return true, nil }
	}
	steps := []struct {
		w       write
		refused bool
	}{
		{w: write{verb: "add finalizer", object: "CelldFleet/pf"}},
		{w: write{verb: "release zone gate", object: "Pod/pf-2", member: "pf-2"}},
		{w: write{verb: "hold", object: "Pod/pf-1", member: "pf-1"}},
		{w: write{verb: "delete", object: "Pod/pf-1", member: "pf-1", takesDown: true}},
		{w: write{verb: "commit", object: "Pod/pf-1", member: "pf-1"}},
		{w: write{verb: "delete", object: "PersistentVolumeClaim/data-pf-1", member: "pf-1"}},
		{w: write{verb: "delete", object: "Pod/pf-2", member: "pf-2", takesDown: true}, refused: true},
		{w: write{verb: "release zone gate", object: "Pod/pf-2", member: "pf-2"}, refused: true},
		{w: write{verb: "delete", object: "PersistentVolumeClaim/data-pf-3"}, refused: true},
		{w: write{verb: "update", object: "StatefulSet/pf"}, refused: true},
		{w: write{verb: "release hold", object: "Pod/pf-1", member: "pf-1"}},
		{w: write{verb: "remove conditions", object: "CelldFleet/pf", report: true}},
	}
	var want []string
	for _, st := range steps {
		err := r.do(ctx, s, st.w, send(st.w.verb+" "+st.w.object))
		var refused errAfterDisruption
		switch {
		case st.refused && (!errors.As(err, &refused) || refused.refused.object != st.w.object || refused.done.object != "Pod/pf-1"):
			t.Fatalf("%s %s after Pod/pf-1 went down: got %v, want the executor's refusal naming both", st.w.verb, st.w.object, err)
		case !st.refused && err != nil:
			t.Fatalf("%s %s: %v", st.w.verb, st.w.object, err)
		case !st.refused:
			want = append(want, st.w.verb+" "+st.w.object)
		}
	}
	if strings.Join(sentTo, ",") != strings.Join(want, ",") {
		t.Errorf("sent %v, want %v (nothing refused was sent)", sentTo, want)
	}
	if len(s.done) != len(want) {
		t.Errorf("recorded %d writes, want %d: %v", len(s.done), len(want), s.done)
	}
	for _, l := range *lines {
		if strings.Contains(l, "Pod/pf-2\"") && strings.Contains(l, `"action"="delete"`) || strings.Contains(l, "data-pf-3") || strings.Contains(l, "StatefulSet/pf") {
			t.Errorf("a refused write was logged as done: %s", l)
		}
	}
}
