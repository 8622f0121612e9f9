package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// Admission bounds spec.env's literal values (v1.MaxEnvValuesTotal) so the reserved-tuning
// record always fits. A fleet stored before that bound is not invalid for the reconciler: it
// keeps running and provisioning, while any other invalid field still blocks.
func TestAFleetStoredBeforeTheEnvBoundIsNotBlocked(t *testing.T) {
	f := corpus.Persistent()
	f.Namespace, f.Name = "ns", "old"
	f.Spec.Env = []v1.EnvVar{{Name: "CELLD_A", Value: new(strings.Repeat("a", 4096))}, {Name: "CELLD_B", Value: new("b")}}
	r := &Reconciler{}
	s := newScope(f, time.Now())
	if stop, err := r.validate(context.Background(), s); stop || err != nil || s.find.Blocked() {
		t.Fatalf("a fleet over the env bound only (admitted before it) must not be blocked: stop=%v err=%v blockers=%v", stop, err, s.find.Blockers)
	}

	f.Spec.Env = append(f.Spec.Env, v1.EnvVar{Name: "CELLD_NODE", Value: new("x")}) // operator-owned: invalid
	s = newScope(f, time.Now())
	if stop, _ := r.validate(context.Background(), s); !stop || len(s.find.Blockers) == 0 || s.find.Blockers[0].Reason != v1.ReasonInvalidConfiguration {
		t.Fatalf("another invalid field still blocks with InvalidConfiguration, got stop=%v blockers=%v", stop, s.find.Blockers)
	}
	if strings.Contains(s.find.Blockers[0].Message, v1.MsgEnvValuesTotal) {
		t.Fatalf("the env bound is not among the reasons a stored fleet is blocked: %s", s.find.Blockers[0].Message)
	}
}
