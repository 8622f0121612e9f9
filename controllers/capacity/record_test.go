package capacity

import (
	"encoding/json"
	"reflect"
	"testing"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func decided(t *testing.T, name string) (rule, Decision) {
	t.Helper()
	for _, r := range rules() {
		if r.name == name {
			return r, run(r.input(), r.obs, r.after, r.last)
		}
	}
	t.Fatalf("no rule %q", name)
	return rule{}, Decision{}
}

func TestAPolicyAdditionRecordsItsCooldownAndItsBaseline(t *testing.T) {
	r, d := decided(t, "high for scaleOutStabilizationSeconds over minSamples: ScaleOut adds scaleOutStep")
	h := r.input().History.Record(&d, t0, 3, 4)
	if !h.LastScaleOut.Equal(t0) || !h.LastScaleIn.IsZero() || h.Declared != 3 || h.FailedBatches != 0 {
		t.Fatalf("the addition's step time and declared count are not recorded: %+v", h)
	}
	b := h.Baseline
	if b == nil || !b.At.Equal(t0) || b.From != 3 || b.To != 4 || len(b.Incumbents) != 3 {
		t.Fatalf("the addition's baseline is not recorded: %+v", b)
	}
	if got := b.Incumbents[0]; got.Name != "f-0" || got.CPUMillicores != 250 || got.MemoryMiB != 400 {
		t.Fatalf("the baseline must hold each incumbent's load: %+v", got)
	}
}

func TestAStepCutShortByAGrowthRunIsRecordedAsTheStepTaken(t *testing.T) {
	r, d := decided(t, "an addition of scaleOutStep below maxReplicas is whole")
	if d.Target != 10 {
		t.Fatalf("setup: target %d", d.Target)
	}
	if h := r.input().History.Record(&d, t0, 7, 8); h.Baseline.To != 8 {
		t.Fatalf("the redistribution must be judged against the run that was added, 7 to 8; recorded %d to %d", h.Baseline.From, h.Baseline.To)
	}
}

func TestTheNextAdditionRecordsHowTheLastOneWasJudged(t *testing.T) {
	for name, want := range map[string]int32{
		"one ineffective addition is counted and the next addition goes ahead":              1,
		"a newcomer that works shows the addition helped, and the next addition goes ahead": 0,
		"an addition whose incumbent restarted cannot be judged and holds nothing":          1, // unchanged
	} {
		r, d := decided(t, name)
		h := r.input().History.Record(&d, t0, 4, 5)
		if h.FailedBatches != want {
			t.Errorf("%s: recorded %d failed additions, want %d", name, h.FailedBatches, want)
		}
		if h.Baseline == nil || h.Baseline.From != 4 || len(h.Baseline.Incumbents) != 4 {
			t.Errorf("%s: the new addition needs its own baseline: %+v", name, h.Baseline)
		}
	}
}

func TestAManualAdditionClearsTheBaselineAndKeepsTheFailedCount(t *testing.T) {
	r, d := decided(t, "a spec.replicas edit not yet applied wins over Automatic")
	old := r.input().History
	old.Baseline, old.FailedBatches = baseline(400*s), 1
	h := old.Record(&d, t0, 4, 6)
	if h.Baseline != nil || h.FailedBatches != 1 || !h.LastScaleOut.Equal(t0) || h.Declared != 6 {
		t.Fatalf("a manual addition reaching spec.replicas: baseline cleared, failed count kept, cooldown and declared recorded; got %+v", h)
	}
}

func TestAManualEditWinsUntilItIsReached(t *testing.T) {
	r, d := decided(t, "a spec.replicas edit not yet applied wins over Automatic") // 4 applied, 6 declared
	h := r.input().History.Record(&d, t0, 4, 5)                                    // a run of one
	if h.Declared != 4 {
		t.Fatalf("a manual step short of spec.replicas must not end the override: declared %d recorded", h.Declared)
	}
	in := r.input()
	in.History, in.Applied, in.Now, in.Observation = h, 5, t0.Add(20*s), collection(5, t0.Add(20*s), 0, within)
	if d = Decide(in); d.Reason != ReasonManualOverride || d.Target != 6 {
		t.Fatalf("the override must win until spec.replicas is reached: %s target %d", d.Reason, d.Target)
	}
	h = h.Record(&d, in.Now, 5, 6)
	in.History, in.Applied, in.Now, in.Observation = h, 6, t0.Add(40*s), collection(6, t0.Add(40*s), 0, within)
	if d = Decide(in); d.Reason != ReasonWithinThresholds {
		t.Fatalf("once spec.replicas is reached the policy decides again: %s (%s)", d.Reason, d.Message)
	}
}

func TestARemovalRecordsItsCooldownAndDropsTheBaseline(t *testing.T) {
	r, d := decided(t, "low for scaleInStabilizationSeconds over minSamples: Automatic removes one member")
	old := r.input().History
	old.Baseline = baseline(3600 * s)
	h := old.Record(&d, t0, 5, 4)
	if !h.LastScaleIn.Equal(t0) || h.Baseline != nil || h.Declared != 5 {
		t.Fatalf("a removal records its time and drops the baseline: %+v", h)
	}
}

func TestNoStepNoRecord(t *testing.T) {
	r, d := decided(t, "Shadow recommends the addition and keeps the applied count")
	if d.Target != r.applied {
		t.Fatalf("Shadow must keep the applied count: target %d", d.Target)
	}
	before := r.input().History
	if h := before.Record(&d, t0, 3, 3); !reflect.DeepEqual(h, before) {
		t.Fatalf("a reconcile that took no step must record nothing: %+v", h)
	}
}

func TestHistoryIsSmallJSON(t *testing.T) {
	b, _ := json.Marshal(History{})
	if string(b) != "{}" {
		t.Fatalf("an empty history must marshal to {} (then the annotation can go): %s", b)
	}
	r, d := decided(t, "high for scaleOutStabilizationSeconds over minSamples: ScaleOut adds scaleOutStep")
	h := r.input().History.Record(&d, t0, 3, 4)
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back History
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, h) {
		t.Fatalf("the history does not survive its annotation: %v\n%s\n%+v", err, b, back)
	}
	// A full fleet's baseline stays far below the annotation's bound.
	full := Decision{Reason: ReasonScaleOutRecommended, incumbent: loads(func() *view {
		v := assess(new(defaults(v1.CapacityScaleOut)), &History{}, t0, collection(v1.MaxMembers, t0, 0, within), v1.MaxMembers)
		return &v
	}())}
	b, _ = json.Marshal(History{}.Record(&full, t0, 99, 100))
	if len(b) > 16<<10 {
		t.Fatalf("a 100-member baseline takes %d bytes", len(b))
	}
}
