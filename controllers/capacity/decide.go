package capacity

import (
	"fmt"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Decide turns the latest observation, the trend of the earlier ones, the durable history and
// the policy into one decision. It reads no clock and no cluster, and it does not change its
// input: running it twice on the same input gives the same decision.
//
// The precedence, first match decides:
//
//  1. External mode: ExternalOwner; the target is spec.replicas.
//  2. A stopped workload, or a spec.replicas edit not applied yet: ManualOverride.
//  3. An observation that contradicts itself or the clock: InvalidObservation.
//  4. No observation that stands for the current fleet: IncompleteMetrics.
//  5. A member not Ready: PendingCapacity, then IneffectiveCapacity past provisioningTimeout.
//  6. A Ready member without a usable sample: IncompleteMetrics.
//  7. The policy changed: PolicyChanged. A source that did not advance: RepeatedSamples. A
//     gap, a change of members or a contrary observation that broke a window: WindowInterrupted.
//  8. High demand: AtMaximum, ObservingRedistribution or LoadNotRedistributed, StabilizingOut,
//     RateLimited, then ScaleOutRecommended.
//  9. Low demand: AtMinimum, StabilizingIn, RateLimited, then ScaleInRecommended.
//  10. WithinThresholds.
//
// Every reason after 2 leaves the target at the applied count unless the mode lets the
// recommendation act.
func Decide(in Input) Decision {
	p := &in.Policy
	d := Decision{Mode: p.Mode, Desired: in.Applied, Target: in.Applied, declared: in.Declared, failed: in.History.FailedBatches}
	if p.Mode == v1.CapacityExternal {
		return external(&in, d)
	}
	v := assess(p, &in.History, in.Now, in.Observation, in.Applied)
	if v.obs != nil && v.invalid == "" && v.absent == "" {
		d.Useful, d.Covered = v.useful, v.covered
		d.Pending = max(0, in.Applied-v.useful)
	}
	if in.Applied < 1 || manualPending(&in) {
		return manual(&in, d)
	}
	return policy(&in, &v, d)
}

// manualPending: spec.replicas was edited since the policy last accounted for it, and the
// workload does not have it yet. A new history has accounted for nothing, so a declared count
// not yet applied when the policy is enabled is reached first.
func manualPending(in *Input) bool {
	return in.Declared != in.Applied && in.Declared != in.History.Declared
}

// external: one /scale writer owns spec.replicas; the policy computes nothing. A contraction
// it asks for still needs the survivors' evidence.
func external(in *Input, d Decision) Decision {
	d.Reason, d.Desired, d.Target = ReasonExternalOwner, in.Declared, in.Declared
	d.Message = fmt.Sprintf("spec.replicas is owned by the /scale writer: desired %d, applied %d; the built-in policy computes nothing",
		in.Declared, in.Applied)
	if in.Applied >= 1 && in.Declared < in.Applied {
		uncertain(in, &d)
	}
	return d
}

// manual: the declared count wins until it is applied; the windows restart behind it.
func manual(in *Input, d Decision) Decision {
	d.Reason, d.Desired, d.Target = ReasonManualOverride, in.Declared, in.Declared
	d.Trend = Trend{policy: in.Policy}
	if in.Applied < 1 {
		d.Message = fmt.Sprintf("The workload is stopped (0 members applied); every member returns at spec.replicas %d before the policy decides again",
			in.Declared)
		return d
	}
	d.Message = fmt.Sprintf("spec.replicas %d is not applied yet (%d applied) and wins over the policy until it is; the windows restart after it",
		in.Declared, in.Applied)
	if in.Declared < in.Applied && in.Policy.Mode == v1.CapacityAutomatic {
		uncertain(in, &d)
	}
	return d
}

// uncertain holds a contraction of an Automatic or External fleet at the applied count when
// the survivors' capacity is not shown. It runs after the message is written, and says there
// that the removal waits.
func uncertain(in *Input, d *Decision) {
	if missing := survivors(&in.Policy, in.Now, in.Observation, in.Applied, in.Victim); missing != "" {
		d.Target = in.Applied
		d.CapacityUncertain = true
		d.UncertainMessage = "Removing a member waits for survivor-capacity evidence: " + missing
		d.Message += "; the removal waits for survivor-capacity evidence (CapacityUncertain)"
	}
}

// pass is one run of the policy chain: its input, what the observation shows, and the trend
// and decision it builds.
type pass struct {
	in *Input
	v  *view
	t  Trend
	d  Decision
}

// say ends the chain with a reason and a message.
func (c *pass) say(reason, format string, args ...any) Decision {
	c.d.Reason, c.d.Message, c.d.Trend = reason, fmt.Sprintf(format, args...), c.t
	if c.d.RequeueAfter == 0 {
		c.d.RequeueAfter = nextSample(&c.t, c.in.Now, seconds(c.in.Policy.SampleIntervalSeconds))
	}
	return c.d
}

// policy is the chain after the overrides: the observation, the trend, then demand.
func policy(in *Input, v *view, d Decision) Decision {
	c := &pass{in: in, v: v, t: in.Trend, d: d}
	p, t := &in.Policy, &c.t
	changed := t.policy != (v1.CapacityPolicy{}) && t.policy != *p
	if changed {
		t.restartWindows()
	}
	t.policy = *p

	switch {
	case v.invalid != "":
		t.restart()
		return c.say(ReasonInvalidObservation, "The observation is not trusted: %s; the windows restart", v.invalid)
	case v.obs != nil && v.obs.At.Before(t.at):
		msg := fmt.Sprintf("the collection finished at %s, before the last counted one at %s; check the operator node's clock",
			v.obs.At.UTC().Format(time.RFC3339), t.at.UTC().Format(time.RFC3339))
		t.restart()
		return c.say(ReasonInvalidObservation, "The observation is not trusted: %s; the windows restart", msg)
	case v.absent != "":
		t.restart()
		return c.say(ReasonIncompleteMetrics, "Capacity decisions wait: %s", v.absent)
	case c.d.Pending > 0:
		return c.pending()
	}
	t.pendingSince = time.Time{}
	if v.uncovered != "" {
		t.restart()
		return c.say(ReasonIncompleteMetrics, "Capacity decisions wait: %s; %d of %d members covered", v.uncovered, c.d.Covered, in.Applied)
	}

	// Every member is Ready and covered: the observation is evidence.
	high := v.high || in.Applied < p.MinReplicas
	low := v.low && !high
	repeated, interrupted := c.advance(high, low)
	switch {
	case changed:
		return c.say(ReasonPolicyChanged, "spec.capacity changed; the windows restart under the new values (scaleOutStabilizationSeconds %d, scaleInStabilizationSeconds %d, minSamples %d)",
			p.ScaleOutStabilizationSeconds, p.ScaleInStabilizationSeconds, p.MinSamples)
	case repeated != "":
		return c.say(ReasonRepeatedSamples, "%s; the windows restart. Raise sampleIntervalSeconds %d above the Metrics Server's resolution",
			repeated, p.SampleIntervalSeconds)
	case interrupted != "":
		return c.say(ReasonWindowInterrupted, "The window was interrupted: %s; it restarts", interrupted)
	case high:
		return c.highDemand()
	case low:
		return c.lowDemand()
	}
	a, b := &v.obs.Samples[v.topCPU], &v.obs.Samples[v.topMem]
	return c.say(ReasonWithinThresholds, "All %d members observed; the highest CPU is %dm (%s) and the highest memory %dMi (%s), between the low (%dm, %dMi) and high (%dm, %dMi) thresholds",
		in.Applied, a.CPUMillicores, a.Name, b.MemoryMiB, b.Name, p.CPULowMillicores, p.MemoryLowMiB, p.CPUHighMillicores, p.MemoryHighMiB)
}

// pending holds every step while a member the workload applies is not Ready, and says so
// louder once provisioningTimeoutSeconds has passed since the first observation that found it.
func (c *pass) pending() Decision {
	p, t := &c.in.Policy, &c.t
	t.restart()
	if t.pendingSince.IsZero() {
		t.pendingSince = c.v.obs.At
	}
	timeout := seconds(p.ProvisioningTimeoutSeconds)
	waited := c.in.Now.Sub(t.pendingSince)
	if waited >= timeout {
		return c.say(ReasonIneffectiveCapacity, "Members not Ready for %[3]s, past provisioningTimeoutSeconds %[4]d: %[1]d of %[2]d; no member is added or removed until they are. Check their Pods' events, scheduling, zones and volumes",
			c.d.Pending, c.in.Applied, secs(waited), p.ProvisioningTimeoutSeconds)
	}
	c.d.RequeueAfter = min(seconds(p.SampleIntervalSeconds), timeout-waited)
	return c.say(ReasonPendingCapacity, "Members not Ready yet: %d of %d, for %s of provisioningTimeoutSeconds %d; no member is added or removed while capacity arrives",
		c.d.Pending, c.in.Applied, secs(waited), p.ProvisioningTimeoutSeconds)
}

// advance folds a complete observation into the trend. An observation sampleIntervalSeconds
// or more after the last counted one is counted, unless a member's source did not advance
// (repeated); one in between is not counted, but breaks a window it contradicts. A change of
// members or a gap longer than maxAgeSeconds restarts the windows, and interrupts a running one.
func (c *pass) advance(high, low bool) (repeated, interrupted string) {
	p, t, obs := &c.in.Policy, &c.t, c.v.obs
	var baselineAt time.Time
	if b := c.in.History.Baseline; b != nil {
		baselineAt = b.At
	}
	same := !t.at.IsZero() && t.sameMembers(c.v)
	if !t.at.IsZero() && !same {
		if t.running() {
			interrupted = "the members changed since the last counted sample"
		}
		t.restartWindows()
		t.steady = 0
	}
	gap := obs.At.Sub(t.at)
	switch {
	case !t.at.IsZero() && gap < seconds(p.SampleIntervalSeconds):
		if gap > 0 && ((t.high > 0 && !high) || (t.low > 0 && !low)) {
			interrupted = "demand changed between counted samples"
			t.restartWindows()
		}
		return repeated, interrupted
	case !t.at.IsZero() && gap > seconds(p.MaxAgeSeconds):
		if t.running() {
			interrupted = fmt.Sprintf("no sample was counted for %s, longer than maxAgeSeconds %d", secs(gap), p.MaxAgeSeconds)
		}
		t.restartWindows()
		t.steady = 0
	case same:
		if repeated = t.repeated(c.v); repeated != "" {
			t.restartWindows()
			t.steady = 0
			t.mark(c.v)
			return repeated, interrupted
		}
	}
	t.count(c.v, high, low, baselineAt)
	return repeated, interrupted
}

// highDemand is the chain for high demand: the ceiling, the redistribution hold, the window,
// the cooldown, then a bounded addition.
func (c *pass) highDemand() Decision {
	in, v, t, p := c.in, c.v, &c.t, &c.in.Policy
	var why string
	if v.hot >= 0 {
		s := &v.obs.Samples[v.hot]
		why = fmt.Sprintf("member %s is at %dm CPU and %dMi memory%s (high: %dm, %dMi)",
			s.Name, s.CPUMillicores, s.MemoryMiB, pressure(s), p.CPUHighMillicores, p.MemoryHighMiB)
	} else {
		why = fmt.Sprintf("%d members are below minReplicas %d", in.Applied, p.MinReplicas)
	}
	if in.Applied >= p.MaxReplicas {
		return c.say(ReasonAtMaximum, "Demand is high (%s) but the fleet has maxReplicas %d members; raise maxReplicas or lower the load", why, p.MaxReplicas)
	}
	if in.Applied >= p.MinReplicas {
		r := judge(p, &in.History, v, t, in.Applied)
		c.d.failed = r.failed
		if r.hold != "" {
			if r.left > 0 {
				c.d.RequeueAfter = min(seconds(p.SampleIntervalSeconds), r.left)
			}
			return c.say(r.hold, "Demand is high (%s); %s", why, r.message)
		}
	}
	window := t.at.Sub(t.highSince)
	if t.high < p.MinSamples || window < seconds(p.ScaleOutStabilizationSeconds) {
		return c.say(ReasonStabilizingOut, "Demand is high (%s) for %s of scaleOutStabilizationSeconds %d, over %d of minSamples %d samples",
			why, secs(window), p.ScaleOutStabilizationSeconds, t.high, p.MinSamples)
	}
	if left := cooldown(&in.History, in.Now, p.ScaleOutCooldownSeconds); left > 0 {
		c.d.RequeueAfter = min(seconds(p.SampleIntervalSeconds), left)
		return c.say(ReasonRateLimited, "Demand is high (%s), but the last step was %s ago, inside scaleOutCooldownSeconds %d; adding waits %s",
			why, secs(in.Now.Sub(lastStep(&in.History))), p.ScaleOutCooldownSeconds, secs(left))
	}
	c.d.Desired = min(in.Applied+p.ScaleOutStep, p.MaxReplicas)
	step := fmt.Sprintf("adding %d: %d to %d (scaleOutStep %d, maxReplicas %d)",
		c.d.Desired-in.Applied, in.Applied, c.d.Desired, p.ScaleOutStep, p.MaxReplicas)
	if p.Mode == v1.CapacityShadow {
		return c.say(ReasonScaleOutRecommended, "Demand is high (%s) for %s over %d samples; Shadow recommends %s. Set mode ScaleOut or Automatic to act",
			why, secs(window), t.high, step)
	}
	c.d.Target = c.d.Desired
	c.d.incumbent = loads(v)
	return c.say(ReasonScaleOutRecommended, "Demand is high (%s) for %s over %d samples; %s", why, secs(window), t.high, step)
}

// lowDemand is the chain for low demand: the floor, the window, the cooldown, then one
// removal, which only Automatic takes and only with the survivors' evidence.
func (c *pass) lowDemand() Decision {
	in, v, t, p := c.in, c.v, &c.t, &c.in.Policy
	a, b := &v.obs.Samples[v.topCPU], &v.obs.Samples[v.topMem]
	why := fmt.Sprintf("every member is below %dm CPU and %dMi memory; the highest are %dm (%s) and %dMi (%s)",
		p.CPULowMillicores, p.MemoryLowMiB, a.CPUMillicores, a.Name, b.MemoryMiB, b.Name)
	if in.Applied <= p.MinReplicas {
		return c.say(ReasonAtMinimum, "Demand is low (%s) but the fleet has minReplicas %d members", why, p.MinReplicas)
	}
	window := t.at.Sub(t.lowSince)
	if t.low < p.MinSamples || window < seconds(p.ScaleInStabilizationSeconds) {
		return c.say(ReasonStabilizingIn, "Demand is low (%s) for %s of scaleInStabilizationSeconds %d, over %d of minSamples %d samples",
			why, secs(window), p.ScaleInStabilizationSeconds, t.low, p.MinSamples)
	}
	if left := cooldown(&in.History, in.Now, p.ScaleInCooldownSeconds); left > 0 {
		c.d.RequeueAfter = min(seconds(p.SampleIntervalSeconds), left)
		return c.say(ReasonRateLimited, "Demand is low (%s), but the last step was %s ago, inside scaleInCooldownSeconds %d; removing waits %s",
			why, secs(in.Now.Sub(lastStep(&in.History))), p.ScaleInCooldownSeconds, secs(left))
	}
	c.d.Desired = in.Applied - 1
	if p.Mode != v1.CapacityAutomatic {
		return c.say(ReasonScaleInRecommended, "Demand is low (%s) for %s over %d samples; %s recommends removing one member: %d to %d. Only Automatic removes members",
			why, secs(window), t.low, p.Mode, in.Applied, c.d.Desired)
	}
	c.d.Target = c.d.Desired
	d := c.say(ReasonScaleInRecommended, "Demand is low (%s) for %s over %d samples; removing one member: %d to %d (minReplicas %d)",
		why, secs(window), t.low, in.Applied, c.d.Desired, p.MinReplicas)
	uncertain(in, &d)
	return d
}

func pressure(s *Sample) string {
	switch {
	case s.Pressured && s.Backlog:
		return ", pressured with a backlog"
	case s.Pressured:
		return ", pressured"
	case s.Backlog:
		return ", with a backlog"
	}
	return ""
}

// cooldown is what is left of a cooldown counted from the last recorded step, up or down;
// zero once it has passed. Exactly at its end the cooldown has passed.
func cooldown(h *History, now time.Time, n int32) time.Duration {
	last := lastStep(h)
	if last.IsZero() {
		return 0
	}
	return max(0, seconds(n)-now.Sub(last))
}

// nextSample is when the next sample is due: sampleIntervalSeconds after the last counted
// one, and at least a second away.
func nextSample(t *Trend, now time.Time, interval time.Duration) time.Duration {
	if t.at.IsZero() {
		return interval
	}
	return max(time.Second, t.at.Add(interval).Sub(now))
}
