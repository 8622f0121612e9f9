package capacity

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// rule is one row of the policy: a fleet, what was collected, and the decision the policy's
// rules give.
type rule struct {
	name              string
	mode              v1.CapacityMode
	policy            func(*v1.CapacityPolicy)
	declared, applied int32
	victim            string
	// history is the durable state; its Declared defaults to declared (no manual edit
	// pending) unless newHistory is set.
	history    History
	newHistory bool
	obs        []*Observation
	after      time.Duration // the last decision is made this long after the last collection
	last       func(*Input)  // a change just before the last decision
	want       string
	target     int32
	desired    int32
	uncertain  bool
}

func (r *rule) input() Input {
	p := defaults(r.mode)
	if r.policy != nil {
		r.policy(&p)
	}
	h := r.history
	if h.Declared == 0 && !r.newHistory {
		h.Declared = r.declared
	}
	return Input{Policy: p, Declared: r.declared, Applied: r.applied, Victim: r.victim, History: h}
}

func edit(o *Observation, f func(*Observation)) *Observation { f(o); return o }

// lastOf applies f to the last collection of obs.
func lastOf(obs []*Observation, f func(*Observation)) []*Observation {
	edit(obs[len(obs)-1], f)
	return obs
}

func policyEdit(f func(*v1.CapacityPolicy)) func(*Input) { return func(in *Input) { f(&in.Policy) } }

var (
	automatic    = v1.CapacityAutomatic
	scaleOut     = v1.CapacityScaleOut
	shadow       = v1.CapacityShadow
	externalMode = v1.CapacityExternal
)

// The high window of the defaults completes with its third sample, 30 s after the first.
func highWindow(n int) []*Observation { return series(n, 3, 15*s, hotCPU) }

// The low window of the defaults completes after 600 s: 41 samples 15 s apart.
func lowWindow(n int, load loadFunc) []*Observation { return series(n, 41, 15*s, load) }

// baseline is a policy addition from 3 to 4 members at t0-d, from three incumbents f-0..f-2
// with f-0 hot.
func baseline(d time.Duration) *Baseline {
	b := &Baseline{At: t0.Add(-d), From: 3, To: 4}
	for i := range 3 {
		cpu, mem := hotCPU(i, 0)
		b.Incumbents = append(b.Incumbents, Load{Name: sample(i, t0, 0, 0).Name, Identity: sample(i, t0, 0, 0).Identity,
			CPUMillicores: cpu, MemoryMiB: mem})
	}
	return b
}

// newcomer: the fourth member (f-3, added by the baseline's addition) works at cpu.
func newcomer(cpu int64) loadFunc {
	return func(m, c int) (int64, int64) {
		if m == 3 {
			return cpu, 300
		}
		return hotCPU(m, c)
	}
}

func rules() []rule {
	return []rule{
		// Modes and overrides.
		{name: "External: the /scale writer owns spec.replicas and the policy computes nothing",
			mode: externalMode, declared: 5, applied: 4, obs: one(4, hotCPU), want: ReasonExternalOwner, target: 5, desired: 5},
		{name: "External: a /scale contraction goes ahead when fresh samples show the survivors absorb the victim",
			mode: externalMode, declared: 3, applied: 4, victim: "f-3", obs: one(4, idle), want: ReasonExternalOwner, target: 3, desired: 3},
		{name: "External: a /scale contraction waits while a survivor has no fresh metrics",
			mode: externalMode, declared: 3, applied: 4, victim: "f-3",
			obs:  lastOf(one(4, idle), func(o *Observation) { o.Samples[1].MetricsAt = time.Time{} }),
			want: ReasonExternalOwner, target: 4, desired: 3, uncertain: true},
		{name: "External: a /scale contraction waits without any observation",
			mode: externalMode, declared: 3, applied: 4, victim: "f-3", want: ReasonExternalOwner, target: 4, desired: 3, uncertain: true},
		{name: "a spec.replicas edit not yet applied wins over Automatic",
			mode: automatic, declared: 6, applied: 4, history: History{Declared: 4}, obs: one(4, idle), want: ReasonManualOverride, target: 6, desired: 6},
		{name: "a spec.replicas edit not yet applied wins over Shadow",
			mode: shadow, declared: 6, applied: 4, history: History{Declared: 4}, obs: one(4, within), want: ReasonManualOverride, target: 6, desired: 6},
		{name: "a manual contraction of an Automatic fleet needs the survivors' evidence",
			mode: automatic, declared: 3, applied: 4, history: History{Declared: 4}, victim: "f-3", obs: one(4, constant(150, 400)),
			want: ReasonManualOverride, target: 4, desired: 3, uncertain: true},
		{name: "a manual contraction of a ScaleOut fleet needs no survivor evidence",
			mode: scaleOut, declared: 3, applied: 4, history: History{Declared: 4}, victim: "f-3", obs: one(4, constant(150, 400)),
			want: ReasonManualOverride, target: 3, desired: 3},
		{name: "once the manual count is applied the policy decides again",
			mode: automatic, declared: 5, applied: 5, history: History{Declared: 3}, obs: one(5, within), want: ReasonWithinThresholds, target: 5, desired: 5},
		{name: "a count the policy applied away from spec.replicas is not a manual edit",
			mode: scaleOut, declared: 3, applied: 4, obs: one(4, within), want: ReasonWithinThresholds, target: 4, desired: 4},
		{name: "a workload stopped by hand returns at spec.replicas whatever the policy",
			mode: automatic, declared: 3, applied: 0, obs: one(3, idle), want: ReasonManualOverride, target: 3, desired: 3},
		{name: "a new history first reaches a declared count not yet applied",
			mode: scaleOut, declared: 4, applied: 3, newHistory: true, obs: one(3, within), want: ReasonManualOverride, target: 4, desired: 4},

		// What counts as an observation.
		{name: "no collection yet: nothing is decided",
			mode: scaleOut, declared: 3, applied: 3, want: ReasonIncompleteMetrics, target: 3, desired: 3},
		{name: "a collection that finished after now is not trusted",
			mode: scaleOut, declared: 3, applied: 3, obs: one(3, hotCPU), after: -s, want: ReasonInvalidObservation, target: 3, desired: 3},
		{name: "a sample taken after its collection finished is not trusted",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(one(3, hotCPU), func(o *Observation) { o.Samples[2].MetricsAt = t0.Add(s) }),
			want: ReasonInvalidObservation, target: 3, desired: 3},
		{name: "one process identity reported for two members is not trusted",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(one(3, hotCPU), func(o *Observation) { o.Samples[2].Identity = o.Samples[0].Identity }),
			want: ReasonInvalidObservation, target: 3, desired: 3},
		{name: "negative usage is not trusted",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(one(3, hotCPU), func(o *Observation) { o.Samples[1].CPUMillicores = -1 }),
			want: ReasonInvalidObservation, target: 3, desired: 3},
		{name: "a collection older than the last counted one is not trusted",
			mode: scaleOut, declared: 3, applied: 3, obs: at(3, hotCPU, 0, -10*s), after: 10 * s, want: ReasonInvalidObservation, target: 3, desired: 3},
		{name: "a collection that could not list every member decides nothing",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(highWindow(3), func(o *Observation) { o.Complete = false }),
			want: ReasonIncompleteMetrics, target: 3, desired: 3},
		{name: "a collection from before the last step decides nothing",
			mode: scaleOut, declared: 3, applied: 3, history: History{LastScaleIn: t0.Add(s)}, obs: one(3, hotCPU), after: 2 * s,
			want: ReasonIncompleteMetrics, target: 3, desired: 3},
		{name: "a removed member still listed decides nothing",
			mode: automatic, declared: 4, applied: 4, obs: one(5, idle), want: ReasonIncompleteMetrics, target: 4, desired: 4},
		{name: "a member not Ready holds every step",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(highWindow(3), func(o *Observation) { o.Samples[2].Ready = false }),
			want: ReasonPendingCapacity, target: 3, desired: 3},
		{name: "a member without a Pod yet is pending",
			mode: scaleOut, declared: 3, applied: 4, obs: one(3, hotCPU), want: ReasonPendingCapacity, target: 4, desired: 4},
		{name: "a member not Ready one second before provisioningTimeoutSeconds is still pending",
			mode: scaleOut, declared: 3, applied: 4, obs: one(3, hotCPU), after: 599 * s, want: ReasonPendingCapacity, target: 4, desired: 4},
		{name: "a member not Ready for provisioningTimeoutSeconds is ineffective capacity",
			mode: scaleOut, declared: 3, applied: 4, obs: one(3, hotCPU), after: 600 * s, want: ReasonIneffectiveCapacity, target: 4, desired: 4},
		{name: "provisioningTimeoutSeconds counts from the first collection that found the member pending",
			mode: scaleOut, declared: 3, applied: 4, obs: at(3, hotCPU, -300*s, 0), after: 300 * s, want: ReasonIneffectiveCapacity, target: 4, desired: 4},
		{name: "a member with no Metrics API sample decides nothing",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(highWindow(3), func(o *Observation) { o.Samples[1].MetricsAt = time.Time{} }),
			want: ReasonIncompleteMetrics, target: 3, desired: 3},
		{name: "a member with no /state load view decides nothing",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(highWindow(3), func(o *Observation) { o.Samples[1].RuntimeAt = time.Time{} }),
			want: ReasonIncompleteMetrics, target: 3, desired: 3},
		{name: "a sample exactly maxAgeSeconds old still counts",
			mode: scaleOut, declared: 3, applied: 3, obs: one(3, within), after: 45 * s, want: ReasonWithinThresholds, target: 3, desired: 3},
		{name: "a sample one second older than maxAgeSeconds does not count",
			mode: scaleOut, declared: 3, applied: 3, obs: one(3, within), after: 46 * s, want: ReasonIncompleteMetrics, target: 3, desired: 3},
		{name: "a Metrics API window of exactly minWindowSeconds counts",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(one(3, within), func(o *Observation) { o.Samples[0].Window = 5 * s }),
			want: ReasonWithinThresholds, target: 3, desired: 3},
		{name: "a Metrics API window below minWindowSeconds does not count",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(one(3, within), func(o *Observation) { o.Samples[0].Window = 4 * s }),
			want: ReasonIncompleteMetrics, target: 3, desired: 3},
		{name: "a Metrics API window of exactly maxWindowSeconds counts",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(one(3, within), func(o *Observation) { o.Samples[0].Window = 60 * s }),
			want: ReasonWithinThresholds, target: 3, desired: 3},
		{name: "a Metrics API window above maxWindowSeconds does not count",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(one(3, within), func(o *Observation) { o.Samples[0].Window = 61 * s }),
			want: ReasonIncompleteMetrics, target: 3, desired: 3},

		// Windows.
		{name: "an edit of spec.capacity restarts the windows",
			mode: scaleOut, declared: 3, applied: 3, obs: highWindow(3), last: policyEdit(func(p *v1.CapacityPolicy) { p.CPUHighMillicores = 240 }),
			want: ReasonPolicyChanged, target: 3, desired: 3},
		{name: "a source timestamp that did not advance is not new evidence",
			mode: scaleOut, declared: 3, applied: 3,
			obs:  lastOf(highWindow(3), func(o *Observation) { o.Samples[1].MetricsAt = t0.Add(-15 * s) }),
			want: ReasonRepeatedSamples, target: 3, desired: 3},
		{name: "a /state load view timestamp that did not advance is not new evidence",
			mode: scaleOut, declared: 3, applied: 3,
			obs:  lastOf(highWindow(3), func(o *Observation) { o.Samples[2].RuntimeAt = t0.Add(-20 * s) }),
			want: ReasonRepeatedSamples, target: 3, desired: 3},
		{name: "a gap longer than maxAgeSeconds breaks a running window",
			mode: scaleOut, declared: 3, applied: 3, obs: at(3, hotCPU, -61*s, -46*s, 0), want: ReasonWindowInterrupted, target: 3, desired: 3},
		{name: "a gap of exactly maxAgeSeconds keeps the window",
			mode: scaleOut, declared: 3, applied: 3, obs: at(3, hotCPU, -60*s, -45*s, 0), want: ReasonScaleOutRecommended, target: 4, desired: 4},
		{name: "a contrary collection between counted samples breaks the window",
			mode: scaleOut, declared: 3, applied: 3, obs: append(at(3, hotCPU, -20*s, -5*s), at(3, within, 0)...), want: ReasonWindowInterrupted, target: 3, desired: 3},
		{name: "an agreeing collection between counted samples is not counted",
			mode: scaleOut, declared: 3, applied: 3, obs: at(3, hotCPU, -20*s, -5*s, 0), want: ReasonStabilizingOut, target: 3, desired: 3},
		{name: "a member that restarted mid-window interrupts it",
			mode: scaleOut, declared: 3, applied: 3, obs: lastOf(highWindow(3), func(o *Observation) { o.Samples[2].Identity = "uid-2/c2/1" }),
			want: ReasonWindowInterrupted, target: 3, desired: 3},

		// High demand.
		{name: "high for scaleOutStabilizationSeconds over minSamples: ScaleOut adds scaleOutStep",
			mode: scaleOut, declared: 3, applied: 3, obs: highWindow(3), want: ReasonScaleOutRecommended, target: 4, desired: 4},
		{name: "Automatic adds like ScaleOut",
			mode: automatic, declared: 3, applied: 3, obs: highWindow(3), want: ReasonScaleOutRecommended, target: 4, desired: 4},
		{name: "Shadow recommends the addition and keeps the applied count",
			mode: shadow, declared: 3, applied: 3, obs: highWindow(3), want: ReasonScaleOutRecommended, target: 3, desired: 4},
		{name: "one sample short of minSamples is still stabilizing",
			mode: scaleOut, declared: 3, applied: 3, obs: at(3, hotCPU, -30*s, 0), want: ReasonStabilizingOut, target: 3, desired: 3},
		{name: "a high window one second short of scaleOutStabilizationSeconds is still stabilizing",
			mode: scaleOut, declared: 3, applied: 3, policy: func(p *v1.CapacityPolicy) { p.SampleIntervalSeconds = 10 },
			obs: at(3, hotCPU, -29*s, -19*s, 0), want: ReasonStabilizingOut, target: 3, desired: 3},
		{name: "a high window of exactly scaleOutStabilizationSeconds is complete",
			mode: scaleOut, declared: 3, applied: 3, policy: func(p *v1.CapacityPolicy) { p.SampleIntervalSeconds = 10 },
			obs: at(3, hotCPU, -30*s, -20*s, 0), want: ReasonScaleOutRecommended, target: 4, desired: 4},
		{name: "CPU exactly at cpuHighMillicores is high",
			mode: scaleOut, declared: 3, applied: 3, obs: series(3, 3, 15*s, constant(200, 400)), want: ReasonScaleOutRecommended, target: 4, desired: 4},
		{name: "CPU one millicore below cpuHighMillicores is not high",
			mode: scaleOut, declared: 3, applied: 3, obs: series(3, 3, 15*s, constant(199, 400)), want: ReasonWithinThresholds, target: 3, desired: 3},
		{name: "memory exactly at memoryHighMiB is high",
			mode: scaleOut, declared: 3, applied: 3, obs: series(3, 3, 15*s, constant(100, 768)), want: ReasonScaleOutRecommended, target: 4, desired: 4},
		{name: "memory one MiB below memoryHighMiB is not high",
			mode: scaleOut, declared: 3, applied: 3, obs: series(3, 3, 15*s, constant(100, 767)), want: ReasonWithinThresholds, target: 3, desired: 3},
		{name: "celld's own pressure is high demand below the thresholds",
			mode: scaleOut, declared: 3, applied: 3, obs: func() []*Observation {
				obs := series(3, 3, 15*s, within)
				for _, o := range obs {
					o.Samples[1].Pressured = true
				}
				return obs
			}(), want: ReasonScaleOutRecommended, target: 4, desired: 4},
		{name: "an addition is cut at maxReplicas",
			mode: scaleOut, declared: 9, applied: 9, policy: func(p *v1.CapacityPolicy) { p.ScaleOutStep = 3 },
			obs: highWindow(9), want: ReasonScaleOutRecommended, target: 10, desired: 10},
		{name: "an addition of scaleOutStep below maxReplicas is whole",
			mode: scaleOut, declared: 7, applied: 7, policy: func(p *v1.CapacityPolicy) { p.ScaleOutStep = 3 },
			obs: highWindow(7), want: ReasonScaleOutRecommended, target: 10, desired: 10},
		{name: "at maxReplicas nothing is added",
			mode: scaleOut, declared: 10, applied: 10, obs: highWindow(10), want: ReasonAtMaximum, target: 10, desired: 10},
		{name: "below minReplicas counts as high demand and adds toward the floor",
			mode: scaleOut, declared: 2, applied: 2, obs: series(2, 3, 15*s, within), want: ReasonScaleOutRecommended, target: 3, desired: 3},
		{name: "one second inside scaleOutCooldownSeconds after the last step the addition waits",
			mode: scaleOut, declared: 3, applied: 3, history: History{LastScaleOut: t0.Add(-299 * s)}, obs: highWindow(3),
			want: ReasonRateLimited, target: 3, desired: 3},
		{name: "exactly at the end of scaleOutCooldownSeconds the addition goes ahead",
			mode: scaleOut, declared: 3, applied: 3, history: History{LastScaleOut: t0.Add(-300 * s)}, obs: highWindow(3),
			want: ReasonScaleOutRecommended, target: 4, desired: 4},
		{name: "a removal starts the scale-out cooldown too",
			mode: scaleOut, declared: 3, applied: 3, history: History{LastScaleIn: t0.Add(-100 * s)}, obs: highWindow(3),
			want: ReasonRateLimited, target: 3, desired: 3},

		// Low demand.
		{name: "low for scaleInStabilizationSeconds over minSamples: Automatic removes one member",
			mode: automatic, declared: 5, applied: 5, victim: "f-4", obs: lowWindow(5, idle), want: ReasonScaleInRecommended, target: 4, desired: 4},
		{name: "a low window one sample short of scaleInStabilizationSeconds is still stabilizing",
			mode: automatic, declared: 5, applied: 5, victim: "f-4", obs: series(5, 40, 15*s, idle), want: ReasonStabilizingIn, target: 5, desired: 5},
		{name: "a low window needs minSamples even when it is long enough",
			mode: automatic, declared: 5, applied: 5, victim: "f-4", policy: func(p *v1.CapacityPolicy) { p.MinSamples = 42 },
			obs: lowWindow(5, idle), want: ReasonStabilizingIn, target: 5, desired: 5},
		{name: "CPU exactly at cpuLowMillicores is not low",
			mode: automatic, declared: 5, applied: 5, obs: lowWindow(5, constant(80, 300)), want: ReasonWithinThresholds, target: 5, desired: 5},
		{name: "memory exactly at memoryLowMiB is not low",
			mode: automatic, declared: 5, applied: 5, obs: lowWindow(5, constant(50, 384)), want: ReasonWithinThresholds, target: 5, desired: 5},
		{name: "ScaleOut recommends a removal and never takes it",
			mode: scaleOut, declared: 5, applied: 5, obs: lowWindow(5, idle), want: ReasonScaleInRecommended, target: 5, desired: 4},
		{name: "Shadow recommends a removal and never takes it",
			mode: shadow, declared: 5, applied: 5, obs: lowWindow(5, idle), want: ReasonScaleInRecommended, target: 5, desired: 4},
		{name: "at minReplicas nothing is removed",
			mode: automatic, declared: 3, applied: 3, obs: one(3, idle), want: ReasonAtMinimum, target: 3, desired: 3},
		{name: "one second inside scaleInCooldownSeconds after the last step the removal waits",
			mode: automatic, declared: 5, applied: 5, victim: "f-4", history: History{LastScaleOut: t0.Add(-899 * s)}, obs: lowWindow(5, idle),
			want: ReasonRateLimited, target: 5, desired: 5},
		{name: "exactly at the end of scaleInCooldownSeconds the removal goes ahead",
			mode: automatic, declared: 5, applied: 5, victim: "f-4", history: History{LastScaleIn: t0.Add(-900 * s)}, obs: lowWindow(5, idle),
			want: ReasonScaleInRecommended, target: 4, desired: 4},
		{name: "an Automatic removal waits when the survivors would exceed their requests",
			mode: automatic, declared: 4, applied: 4, victim: "f-3", obs: func() []*Observation {
				obs := lowWindow(4, constant(50, 380))
				for _, o := range obs {
					for i := range o.Samples {
						o.Samples[i].MemoryRequestMiB = 400
					}
				}
				return obs
			}(), want: ReasonScaleInRecommended, target: 4, desired: 3, uncertain: true},

		// Redistribution.
		{name: "after a policy addition further additions wait while its effect is observed",
			mode: scaleOut, declared: 3, applied: 4, history: History{LastScaleOut: t0.Add(-400 * s), Baseline: baseline(400 * s)},
			obs: series(4, 3, 15*s, hotCPU), want: ReasonObservingRedistribution, target: 4, desired: 4},
		{name: "an addition is observed one sample short of redistributionObservationSeconds",
			mode: scaleOut, declared: 3, applied: 4, history: History{LastScaleOut: t0.Add(-400 * s), Baseline: baseline(400 * s)},
			obs: series(4, 8, 15*s, hotCPU), want: ReasonObservingRedistribution, target: 4, desired: 4},
		{name: "a newcomer that works shows the addition helped, and the next addition goes ahead",
			mode: scaleOut, declared: 3, applied: 4, history: History{LastScaleOut: t0.Add(-400 * s), Baseline: baseline(400 * s)},
			obs: series(4, 9, 15*s, newcomer(80)), want: ReasonScaleOutRecommended, target: 5, desired: 5},
		{name: "one ineffective addition is counted and the next addition goes ahead",
			mode: scaleOut, declared: 3, applied: 4, history: History{LastScaleOut: t0.Add(-400 * s), Baseline: baseline(400 * s)},
			obs: series(4, 9, 15*s, newcomer(79)), want: ReasonScaleOutRecommended, target: 5, desired: 5},
		{name: "two ineffective additions in a row hold the next one",
			mode: scaleOut, declared: 3, applied: 4, history: History{LastScaleOut: t0.Add(-400 * s), Baseline: baseline(400 * s), FailedBatches: 1},
			obs: series(4, 9, 15*s, newcomer(79)), want: ReasonLoadNotRedistributed, target: 4, desired: 4},
		{name: "an addition whose incumbent restarted cannot be judged and holds nothing",
			mode: scaleOut, declared: 3, applied: 4, history: History{LastScaleOut: t0.Add(-400 * s), Baseline: baseline(400 * s), FailedBatches: 1},
			obs: func() []*Observation {
				obs := series(4, 9, 15*s, newcomer(79))
				for _, o := range obs {
					o.Samples[1].Identity = "uid-1/c2/1"
				}
				return obs
			}(), want: ReasonScaleOutRecommended, target: 5, desired: 5},
		{name: "an addition a removal partly undid cannot be judged and holds nothing",
			mode: scaleOut, declared: 3, applied: 3, history: History{LastScaleOut: t0.Add(-400 * s), Baseline: baseline(400 * s), FailedBatches: 1},
			obs: highWindow(3), want: ReasonScaleOutRecommended, target: 4, desired: 4},
		{name: "within the thresholds an addition under observation holds nothing",
			mode: scaleOut, declared: 3, applied: 4, history: History{LastScaleOut: t0.Add(-400 * s), Baseline: baseline(400 * s)},
			obs: series(4, 3, 15*s, within), want: ReasonWithinThresholds, target: 4, desired: 4},
	}
}

// TestDecideFollowsThePolicysRules runs each rule of the capacity policy as a row, and checks
// that the rows give every reason.
func TestDecideFollowsThePolicysRules(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range rules() {
		t.Run(r.name, func(t *testing.T) {
			d := run(r.input(), r.obs, r.after, r.last)
			seen[d.Reason] = true
			if d.Reason != r.want || d.Target != r.target || d.Desired != r.desired || d.CapacityUncertain != r.uncertain {
				t.Fatalf("got %s target %d desired %d uncertain %v (%s%s), want %s target %d desired %d uncertain %v",
					d.Reason, d.Target, d.Desired, d.CapacityUncertain, d.Message, d.UncertainMessage, r.want, r.target, r.desired, r.uncertain)
			}
			if d.Message == "" || d.Mode != r.input().Policy.Mode {
				t.Fatalf("a decision must carry its mode and a message: %+v", d)
			}
			if d.CapacityUncertain == (d.UncertainMessage == "") {
				t.Fatalf("CapacityUncertain %v must come with a message saying what is missing, and only then: %q", d.CapacityUncertain, d.UncertainMessage)
			}
		})
	}
	for _, reason := range Reasons {
		if !seen[reason] {
			t.Errorf("no rule gives %s: every reason needs a row", reason)
		}
	}
}

// TestMessagesNameTheNumbersAndTheFix spot-checks that messages carry the values that decided
// and what to change.
func TestMessagesNameTheNumbersAndTheFix(t *testing.T) {
	find := func(name string) rule {
		for _, r := range rules() {
			if r.name == name {
				return r
			}
		}
		t.Fatalf("no rule %q", name)
		return rule{}
	}
	for name, want := range map[string][]string{
		"high for scaleOutStabilizationSeconds over minSamples: ScaleOut adds scaleOutStep": {"f-0", "250m", "200m", "30s", "3 samples", "3 to 4", "scaleOutStep 1", "maxReplicas 10"},
		"Shadow recommends the addition and keeps the applied count":                        {"Shadow recommends", "Set mode ScaleOut or Automatic"},
		"one second inside scaleOutCooldownSeconds after the last step the addition waits":  {"299s ago", "scaleOutCooldownSeconds 300", "waits 1s"},
		"a member not Ready for provisioningTimeoutSeconds is ineffective capacity":         {"1 of 4", "600s", "provisioningTimeoutSeconds 600", "events"},
		"a Metrics API window above maxWindowSeconds does not count":                        {"f-0", "61s", "minWindowSeconds 5", "maxWindowSeconds 60", "--metric-resolution"},
		"a sample one second older than maxAgeSeconds does not count":                       {"46s old", "maxAgeSeconds 45"},
		"a source timestamp that did not advance is not new evidence":                       {"f-1", "sampleIntervalSeconds 15"},
		"a gap longer than maxAgeSeconds breaks a running window":                           {"46s", "maxAgeSeconds 45"},
		"at maxReplicas nothing is added":                                                   {"maxReplicas 10", "raise maxReplicas"},
		"a low window one sample short of scaleInStabilizationSeconds is still stabilizing": {"585s of scaleInStabilizationSeconds 600", "40 of minSamples 3"},
		"two ineffective additions in a row hold the next one":                              {"2 additions in a row", "cpuLowMillicores 80", "spec.replicas"},
		"a spec.replicas edit not yet applied wins over Automatic":                          {"spec.replicas 6", "4 applied"},
		"External: the /scale writer owns spec.replicas and the policy computes nothing":    {"desired 5, applied 4"},
		"an addition is observed one sample short of redistributionObservationSeconds":      {"105s of redistributionObservationSeconds 120", "8 of minSamples 3"},
	} {
		r := find(name)
		d := run(r.input(), r.obs, r.after, r.last)
		for _, w := range want {
			if !strings.Contains(d.Message, w) {
				t.Errorf("%s: the message %q does not name %q", name, d.Message, w)
			}
		}
	}
	r := find("an Automatic removal waits when the survivors would exceed their requests")
	if d := run(r.input(), r.obs, r.after, r.last); !strings.Contains(d.Message, "the removal waits for survivor-capacity evidence (CapacityUncertain)") ||
		!strings.Contains(d.UncertainMessage, "survivor f-0 would carry 507Mi memory (380Mi now plus 127Mi of f-3's 380Mi), above its request of 400Mi") {
		t.Errorf("a recommended removal that waits must say so, and why: %q / %q", d.Message, d.UncertainMessage)
	}
	r = find("External: a /scale contraction waits while a survivor has no fresh metrics")
	if d := run(r.input(), r.obs, r.after, r.last); !strings.Contains(d.UncertainMessage, "f-1 has no Metrics API sample") {
		t.Errorf("the CapacityUncertain message must name the member and what it lacks: %q", d.UncertainMessage)
	}
}

func TestRequeueAfterIsWhenTheDecisionCanNextChange(t *testing.T) {
	for _, c := range []struct {
		name string
		r    rule
		want time.Duration
	}{
		{"a window waits for the next sample", rule{mode: scaleOut, declared: 3, applied: 3, obs: at(3, hotCPU, 0), after: 4 * s}, 11 * s},
		{"an overdue sample is looked for within a second", rule{mode: scaleOut, declared: 3, applied: 3, obs: at(3, within, 0), after: 30 * s}, s},
		{"a cooldown ending before the next sample", rule{mode: scaleOut, declared: 3, applied: 3, history: History{LastScaleOut: t0.Add(-295 * s)}, obs: highWindow(3)}, 5 * s},
		{"a provisioning deadline before the next sample", rule{mode: scaleOut, declared: 3, applied: 4, obs: one(3, hotCPU), after: 590 * s}, 10 * s},
		{"a manual edit waits for the workload", rule{mode: scaleOut, declared: 5, applied: 3, obs: one(3, hotCPU), history: History{Declared: 3}}, 0},
		{"External waits for the /scale writer", rule{mode: externalMode, declared: 5, applied: 3}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if d := run(c.r.input(), c.r.obs, c.r.after, c.r.last); d.RequeueAfter != c.want {
				t.Fatalf("RequeueAfter = %s (%s: %s), want %s", d.RequeueAfter, d.Reason, d.Message, c.want)
			}
		})
	}
}

func TestUsefulPendingAndCoveredCountTheMembers(t *testing.T) {
	obs := lastOf(one(4, within), func(o *Observation) {
		o.Samples[1].Ready = false
		o.Samples[2].MetricsAt = time.Time{}
	})
	d := Decide(Input{Policy: defaults(scaleOut), Now: t0, Declared: 5, Applied: 5, History: History{Declared: 5}, Observation: obs[0]})
	if d.Useful != 3 || d.Pending != 2 || d.Covered != 2 {
		t.Fatalf("useful %d pending %d covered %d; want 3 Ready of 5 applied, 2 pending (one not Ready, one without a Pod), 2 covered", d.Useful, d.Pending, d.Covered)
	}
	st := d.Status()
	if st.UsefulReplicas != 3 || st.PendingReplicas != 2 || st.CoveredReplicas != 2 || st.Reason != ReasonPendingCapacity || st.Mode != scaleOut || st.DesiredReplicas != 5 {
		t.Fatalf("status.capacity is not the decision's projection: %+v", st)
	}
}

func TestDecideIsAFunctionOfItsInput(t *testing.T) {
	r := rules()[0]
	for _, r = range rules() {
		if r.name == "a newcomer that works shows the addition helped, and the next addition goes ahead" {
			break
		}
	}
	in := r.input()
	for _, o := range r.obs[:len(r.obs)-1] {
		in.Observation, in.Now = o, o.At
		in.Trend = Decide(in).Trend
	}
	in.Observation, in.Now = r.obs[len(r.obs)-1], t0
	before := *in.Observation
	before.Samples = slices.Clone(before.Samples)
	history := *in.History.Baseline
	history.Incumbents = slices.Clone(history.Incumbents)
	sources := slices.Clone(in.Trend.sources)

	a, b := Decide(in), Decide(in)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two decisions on one input differ:\n%+v\n%+v", a, b)
	}
	if !reflect.DeepEqual(before, *in.Observation) || !reflect.DeepEqual(history, *in.History.Baseline) || !reflect.DeepEqual(sources, in.Trend.sources) {
		t.Fatal("Decide changed its input")
	}
	// The same collection handed again is not counted twice.
	in.Trend = a.Trend
	if c := Decide(in); c.Trend.high != a.Trend.high || c.Trend.steady != a.Trend.steady {
		t.Fatalf("the same collection was counted again: high %d -> %d, steady %d -> %d", a.Trend.high, c.Trend.high, a.Trend.steady, c.Trend.steady)
	}
}

// TestAnOperatorRestartKeepsTheCooldownAndRestartsTheWindows: the history is durable, the
// trend is not.
func TestAnOperatorRestartKeepsTheCooldownAndRestartsTheWindows(t *testing.T) {
	r := rule{mode: scaleOut, declared: 3, applied: 3, obs: highWindow(3)}
	d := run(r.input(), r.obs, 0, nil)
	if d.Reason != ReasonScaleOutRecommended {
		t.Fatalf("setup: %s (%s)", d.Reason, d.Message)
	}
	h := r.input().History.Record(&d, t0, 3, 4)

	// Restarted: a fresh trend, the saved history, pressure continuing once the new member
	// is Ready.
	later := series(4, 3, 15*s, hotCPU)
	for _, o := range later {
		o.At = o.At.Add(60 * s)
		for i := range o.Samples {
			o.Samples[i].MetricsAt, o.Samples[i].RuntimeAt = o.At, o.At
		}
	}
	in := Input{Policy: defaults(scaleOut), Declared: 3, Applied: 4, History: h}
	got := run(in, later, 0, nil)
	if got.Reason != ReasonObservingRedistribution {
		t.Fatalf("after a restart the addition is still being judged: got %s (%s)", got.Reason, got.Message)
	}
	h.Baseline = nil
	in.History = h
	if got = run(in, later, 0, nil); got.Reason != ReasonRateLimited || !strings.Contains(got.Message, "60s ago") {
		t.Fatalf("after a restart the cooldown of the step still holds: got %s (%s)", got.Reason, got.Message)
	}
	if got = run(in, later[2:], 0, nil); got.Reason != ReasonStabilizingOut {
		t.Fatalf("after a restart the window starts over: got %s (%s)", got.Reason, got.Message)
	}
}
