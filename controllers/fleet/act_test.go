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
			w := write{verb: "delete", object: "Pod/pf-1", why: "Recreating member pf-1", takesDown: "pf-1", event: ev, kv: []any{"paths", "x"}}
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

// TestExecutorTakesAtMostOneMemberDownPerPass: once a pass took a member down, a write that
// would take another member down is refused before it is sent, while further writes about the
// same member (a replacement's hold release, say) and writes that take nobody down still run.
func TestExecutorTakesAtMostOneMemberDownPerPass(t *testing.T) {
	r := &Reconciler{}
	ctx, lines := loggedContext()
	s := actScope()
	sentTo := []string{}
	send := func(object string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { sentTo = append(sentTo, object); return true, nil }
	}
	first := write{verb: "delete", object: "Pod/pf-1", why: "replace", takesDown: "pf-1"}
	if err := r.do(ctx, s, first, send("Pod/pf-1")); err != nil {
		t.Fatal(err)
	}
	same := write{verb: "force delete", object: "Pod/pf-1", why: "again", takesDown: "pf-1"}
	if err := r.do(ctx, s, same, send("Pod/pf-1 again")); err != nil {
		t.Fatalf("a second write about the member already down: %v", err)
	}
	other := write{verb: "delete", object: "Pod/pf-2", why: "recreate", takesDown: "pf-2"}
	err := r.do(ctx, s, other, send("Pod/pf-2"))
	var refused errOneMemberPerPass
	if !errors.As(err, &refused) || refused.refused.object != "Pod/pf-2" || refused.done.object != "Pod/pf-1" {
		t.Fatalf("taking pf-2 down after pf-1 in one pass: got %v, want the executor's refusal naming both", err)
	}
	if !strings.Contains(err.Error(), "refused to delete Pod/pf-2: this pass already did delete Pod/pf-1") {
		t.Errorf("refusal says %q", err)
	}
	claim := write{verb: "delete", object: "PersistentVolumeClaim/data-pf-2", why: "the fleet is deleted"}
	if err := r.do(ctx, s, claim, send("PersistentVolumeClaim/data-pf-2")); err != nil {
		t.Fatalf("a write that takes no member down: %v", err)
	}
	if want := []string{"Pod/pf-1", "Pod/pf-1 again", "PersistentVolumeClaim/data-pf-2"}; strings.Join(sentTo, ",") != strings.Join(want, ",") {
		t.Errorf("sent %v, want %v (Pod/pf-2 never sent)", sentTo, want)
	}
	if len(s.done) != 3 {
		t.Errorf("recorded %d writes, want 3: %v", len(s.done), s.done)
	}
	for _, l := range *lines {
		if strings.Contains(l, "Pod/pf-2") {
			t.Errorf("the refused write was logged as done: %s", l)
		}
	}
}
