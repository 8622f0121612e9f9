package capacity

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestPlanStep: a step the policy recommended is told (CapacityScaledOut or CapacityScaledIn,
// with the counts and the decision's message) and recorded; a manual step is recorded and not
// told; no decision or no change of count is no step; and a history the step leaves as it was
// is not written again.
func TestPlanStep(t *testing.T) {
	out := &Decision{Mode: v1.CapacityScaleOut, Reason: ReasonScaleOutRecommended, Message: "high for 5m", declared: 3}
	in := &Decision{Mode: v1.CapacityAutomatic, Reason: ReasonScaleInRecommended, Message: "low for 10m", declared: 3}
	manual := &Decision{Mode: v1.CapacityAutomatic, Reason: ReasonManualOverride, Message: "spec.replicas changed", declared: 5}
	recorded := History{LastScaleOut: t0.Add(-time.Hour), Declared: 3}
	cases := []struct {
		name                 string
		d                    *Decision
		h                    History
		from, to             int32
		event, message       string
		changed, scaleOutNow bool
	}{
		{name: "no policy: no step", d: nil, from: 3, to: 4},
		{name: "no change of count: no step", d: out, from: 3, to: 3},
		{name: "a policy addition is told and recorded", d: out, from: 3, to: 4, event: v1.EventCapacityScaledOut,
			message: "Added members on the ScaleOut capacity policy: 3 to 4 applied (high for 5m)", changed: true, scaleOutNow: true},
		{name: "a policy removal is told and recorded", d: in, from: 4, to: 3, event: v1.EventCapacityScaledIn,
			message: "Removed members on the Automatic capacity policy: 4 to 3 applied (low for 10m)", changed: true},
		{name: "a manual step is recorded, not told", d: manual, from: 3, to: 5, changed: true, scaleOutNow: true},
		{name: "a manual addition recorded at this very time is not written again", d: manual, h: History{LastScaleOut: t0, Declared: 5},
			from: 4, to: 5},
		{name: "a policy step over an older record is written", d: out, h: recorded, from: 4, to: 5, event: v1.EventCapacityScaledOut,
			message: "Added members on the ScaleOut capacity policy: 4 to 5 applied (high for 5m)", changed: true, scaleOutNow: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := PlanStep(tc.d, tc.h, t0, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if st.Event != tc.event || st.Message != tc.message {
				t.Errorf("told %q %q, want %q %q", st.Event, st.Message, tc.event, tc.message)
			}
			if st.Changed != tc.changed {
				t.Fatalf("changed = %v, want %v (history %+v from %+v)", st.Changed, tc.changed, st.History, tc.h)
			}
			if tc.scaleOutNow != st.History.LastScaleOut.Equal(t0) && tc.changed {
				t.Errorf("the step's time is not the history's last addition: %+v", st.History)
			}
			if !tc.changed {
				return
			}
			var back History
			if err := json.Unmarshal(st.Encoded, &back); err != nil || !back.LastScaleOut.Equal(st.History.LastScaleOut) ||
				!back.LastScaleIn.Equal(st.History.LastScaleIn) || back.Declared != st.History.Declared {
				t.Errorf("the encoded record is not the history: %s (%v)", st.Encoded, err)
			}
			if tc.to < tc.from && !st.History.LastScaleIn.Equal(t0) {
				t.Errorf("a removal starts the scale-in cooldown: %+v", st.History)
			}
			if tc.event != "" && !strings.Contains(st.Message, tc.d.Message) {
				t.Errorf("the event must carry the decision's message: %q", st.Message)
			}
		})
	}
}
