package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func declared(n int32) edit { return func(f *Facts) { f.Declared = n } }

// sts is a StatefulSet fleet's workload input planning toward target.
func sts(target int32, f Facts) WorkloadInput {
	return WorkloadInput{StatefulSet: true, Facts: f, Target: target}
}

func TestPlanWorkload(t *testing.T) {
	const m = time.Minute
	lost := claimPhase(2, corev1.ClaimLost)
	down := downFor(2, DefaultReplacementDelay+m)
	uncertain := &Verdict{Reason: v1.ReasonCapacityUncertain, Message: "no survivor evidence"}
	with := func(in WorkloadInput, e func(*WorkloadInput)) WorkloadInput { e(&in); return in }
	blocked := func(in *WorkloadInput) { in.Blocked = true }

	type want struct {
		write    WorkloadWrite
		replicas int32
		step     string
		block    string
		heal     Action // only checked when healing runs
		healMem  int32
		noHeal   bool // healing does not run this pass
		release  bool
		stop     bool
	}
	cases := []struct {
		name string
		in   WorkloadInput
		want want
	}{
		// the two healing bugs of issue 26: growth held back must not hold healing back
		{"growth blocked (applied 3, declared 4) heals a lost disk at the applied count",
			with(sts(4, fleet(3, declared(4), lost)), blocked),
			want{replicas: 3, heal: ReplaceMember, healMem: 2}},
		{"growth blocked heals a member down past the replacement delay",
			with(sts(4, fleet(3, declared(4), down)), blocked),
			want{replicas: 3, heal: ReplaceMember, healMem: 2}},
		{"a capacity hold at 3 of 4 heals a lost disk",
			sts(3, fleet(3, declared(4), lost)),
			want{write: WriteUpdate, replicas: 3, heal: ReplaceMember, healMem: 2}},
		{"a capacity hold at 3 of 4 heals a member down past the delay",
			sts(3, fleet(3, declared(4), down)),
			want{write: WriteUpdate, replicas: 3, heal: ReplaceMember, healMem: 2}},
		{"a blocked fleet's drifted template counts as matching: nothing of ours is about to roll",
			with(sts(3, fleet(3, templateDrift, lost)), blocked),
			want{replicas: 3, heal: ReplaceMember, healMem: 2}},
		{"blocked with no workload: nothing runs, the pass ends",
			with(sts(3, fleet(3, noWorkload)), blocked),
			want{noHeal: true, stop: true}},

		// paused: no write and no healing action, whatever is lost
		{"paused releases holds and ends the pass",
			sts(4, fleet(3, declared(4), lost, paused)),
			want{replicas: 3, noHeal: true, release: true, stop: true}},
		{"paused wins over a foreign workload",
			with(sts(3, fleet(3, paused)), func(in *WorkloadInput) { in.Foreign = "StatefulSet ns/f exists" }),
			want{replicas: 3, noHeal: true, release: true, stop: true}},

		// a foreign workload is left alone
		{"a foreign workload blocks and ends the pass",
			with(sts(3, fleet(3, lost)), func(in *WorkloadInput) { in.Foreign = "StatefulSet ns/f exists" }),
			want{replicas: 3, block: v1.ReasonLifecycleBlocked, noHeal: true, stop: true}},

		// growth refused for the members' disks: blocked, members healed at the applied count
		{"StorageIdentityConflict blocks growth and heals a lost disk",
			sts(4, fleet(3, declared(4), foreignClaimAt(3), lost)),
			want{replicas: 3, block: v1.ReasonStorageIdentityConflict, heal: ReplaceMember, healMem: 2}},
		{"StorageIdentityConflict with no workload: nothing to heal, the pass ends",
			sts(3, fleet(3, noWorkload, foreignClaimAt(0))),
			want{block: v1.ReasonStorageIdentityConflict, noHeal: true, stop: true}},

		// steps
		{"settled: an update that writes nothing, healing runs",
			sts(3, fleet(3)),
			want{write: WriteUpdate, replicas: 3}},
		{"growth from 3 to 4",
			sts(4, fleet(3, declared(4))),
			want{write: WriteUpdate, replicas: 4, step: v1.ReasonProvisioning}},
		{"no workload: created at the first growth run, the pass ends",
			sts(3, fleet(3, noWorkload)),
			want{write: WriteCreate, replicas: 3, step: v1.ReasonProvisioning, noHeal: true, stop: true}},
		{"CapacityUncertain is the step when the plan has nothing else to say",
			with(sts(3, fleet(3)), func(in *WorkloadInput) { in.Uncertain = uncertain }),
			want{write: WriteUpdate, replicas: 3, step: v1.ReasonCapacityUncertain}},

		// a Deployment: no healing, one member per step on scale-in
		{"Deployment: created at spec.replicas whatever the capacity target",
			WorkloadInput{Facts: Facts{Declared: 3}, Target: 2},
			want{write: WriteCreate, replicas: 3, noHeal: true, stop: true}},
		{"Deployment: scale-in removes one member per step",
			WorkloadInput{Facts: fleet(3), Target: 1},
			want{write: WriteUpdate, replicas: 2, noHeal: true}},
		{"Deployment: scale-in waits for the previous rollout",
			WorkloadInput{Facts: fleet(3, rolling), Target: 1},
			want{write: WriteUpdate, replicas: 3, step: v1.ReasonProvisioning, noHeal: true}},
		{"Deployment: growth is one write",
			WorkloadInput{Facts: fleet(3), Target: 5, Uncertain: uncertain},
			want{write: WriteUpdate, replicas: 5, step: v1.ReasonCapacityUncertain, noHeal: true}},
		{"Deployment: a blocker ends the pass with no write",
			WorkloadInput{Facts: fleet(3), Target: 3, Blocked: true},
			want{replicas: 3, noHeal: true, stop: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := PlanWorkload(c.in)
			if p.Write != c.want.write || p.Replicas != c.want.replicas || p.Step.Reason != c.want.step ||
				p.ReleaseHolds != c.want.release || p.Stop != c.want.stop {
				t.Fatalf("plan = %s %d step %q release %v stop %v, want %s %d step %q release %v stop %v",
					p.Write, p.Replicas, p.Step.Reason, p.ReleaseHolds, p.Stop,
					c.want.write, c.want.replicas, c.want.step, c.want.release, c.want.stop)
			}
			switch {
			case c.want.block == "" && p.Block != nil:
				t.Fatalf("blocked by %s: %s", p.Block.Reason, p.Block.Message)
			case c.want.block != "" && (p.Block == nil || p.Block.Reason != c.want.block):
				t.Fatalf("block = %+v, want %s", p.Block, c.want.block)
			}
			if c.want.noHeal {
				if p.Heal != nil {
					t.Fatalf("healing runs (%s), want none", p.Heal.Action)
				}
				return
			}
			if p.Heal == nil {
				t.Fatal("healing does not run")
			}
			if p.Heal.Action != c.want.heal || (c.want.heal != None && p.Heal.Ordinal != c.want.healMem) {
				t.Fatalf("heal = %s of member %d (%s), want %s of member %d", p.Heal.Action, p.Heal.Ordinal, p.Heal.Message, c.want.heal, c.want.healMem)
			}
			// The confirmation plans again from the same input with the members re-read; the
			// same members must confirm the same action (the bug: it planned at another count).
			again := PlanWorkload(c.in)
			if !p.Heal.Confirms(*again.Heal) {
				t.Fatalf("the confirmation's plan %s does not confirm %s", again.Heal.Action, p.Heal.Action)
			}
		})
	}
}

// TestPlanWorkloadHealsUnderEveryBlocker: whatever holds growth back (a blocker found earlier
// in the pass, the capacity policy's target, a foreign claim beyond the applied count), a
// member that runs on its own disk is healed, at the applied count.
func TestPlanWorkloadHealsUnderEveryBlocker(t *testing.T) {
	const m = time.Minute
	holds := map[string]func(Facts) WorkloadInput{
		"InfrastructureBlocked": func(f Facts) WorkloadInput { in := sts(4, f); in.Blocked = true; return in },
		"capacity hold":         func(f Facts) WorkloadInput { return sts(3, f) },
		"foreign claim":         func(f Facts) WorkloadInput { foreignClaimAt(3)(&f); return sts(4, f) },
	}
	faults := map[string]struct {
		e      edit
		action Action
	}{
		"lost disk":         {claimPhase(1, corev1.ClaimLost), ReplaceMember},
		"member down":       {downFor(1, DefaultReplacementDelay+m), ReplaceMember},
		"stuck terminating": {terminating(1, 10*m), ForceDeletePod},
	}
	for hn, hold := range holds {
		for fn, fault := range faults {
			t.Run(hn+" x "+fn, func(t *testing.T) {
				p := PlanWorkload(hold(fleet(3, declared(4), fault.e)))
				if p.Heal == nil || p.Heal.Action != fault.action || p.Heal.Ordinal != 1 {
					t.Fatalf("plan %+v: heal %+v, want %s of member 1", p, p.Heal, fault.action)
				}
				if p.Replicas != 3 {
					t.Fatalf("replicas %d, want the applied 3", p.Replicas)
				}
			})
		}
	}
	// A pause is the one hold under which nothing is healed: nothing while paused.
	for fn, fault := range faults {
		t.Run("paused x "+fn, func(t *testing.T) {
			p := PlanWorkload(sts(4, fleet(3, declared(4), fault.e, paused)))
			if p.Heal != nil && p.Heal.Action != None {
				t.Fatalf("a paused fleet must take no healing action, got %s", p.Heal.Action)
			}
			if !p.ReleaseHolds || !p.Stop || p.Write != WriteNone {
				t.Fatalf("a paused fleet releases holds and writes nothing: %+v", p)
			}
		})
	}
}
