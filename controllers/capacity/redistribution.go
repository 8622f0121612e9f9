package capacity

import (
	"fmt"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// judgment is what the policy's last addition shows so far.
type judgment struct {
	// hold is ObservingRedistribution or LoadNotRedistributed while further additions wait,
	// "" when they may go ahead.
	hold, message string
	// left is how long the observation window still runs.
	left time.Duration
	// failed is the failed-batch count the next policy addition records.
	failed int32
}

// judge weighs the policy's last addition against its baseline. The addition helped when, over
// a continuous complete observation of redistributionObservationSeconds and minSamples counted
// samples after it, a newcomer works (CPU at or above cpuLowMillicores), fewer incumbents are
// high than before, or the fleet's CPU grew by more than 10% of the baseline and more than
// cpuLowMillicores (independent demand, which more members do serve). Memory alone is no
// evidence: an idle cache grows too. Two additions in a row that did not help hold the next one
// (LoadNotRedistributed) until one of those signs appears.
//
// An addition whose incumbents are no longer all there (one restarted, was replaced, or was
// removed) cannot be judged: it counts as neither help nor failure.
func judge(p *v1.CapacityPolicy, h *History, v *view, t *Trend, applied int32) judgment {
	r := judgment{failed: h.FailedBatches}
	b := h.Baseline
	if b == nil || applied < b.To {
		return r
	}
	var before, after int64
	hotBefore, hotAfter, k := 0, 0, 0
	busy := -1
	for _, i := range v.order {
		s := &v.obs.Samples[i]
		after += s.CPUMillicores
		if k < len(b.Incumbents) && b.Incumbents[k].Identity < s.Identity {
			return r
		}
		if k < len(b.Incumbents) && b.Incumbents[k].Identity == s.Identity {
			was := &b.Incumbents[k]
			k++
			before += was.CPUMillicores
			if hot(p, was.CPUMillicores, was.MemoryMiB, was.Pressured) {
				hotBefore++
			}
			if hot(p, s.CPUMillicores, s.MemoryMiB, s.Pressured || s.Backlog) {
				hotAfter++
			}
		} else if busy < 0 && s.CPUMillicores >= int64(p.CPULowMillicores) {
			busy = int(i)
		}
	}
	if k < len(b.Incumbents) {
		return r
	}
	n, span := t.steady, t.at.Sub(t.steadySince)
	if t.steady == 0 || t.steadySince.Before(b.At) {
		n, span = 0, 0
	}
	need := seconds(p.RedistributionObservationSeconds)
	if n < p.MinSamples || span < need {
		r.hold, r.left = ReasonObservingRedistribution, max(0, need-span)
		r.message = fmt.Sprintf("the addition at %s (%d to %d) has been observed for %s of redistributionObservationSeconds %d, over %d of minSamples %d samples; further additions wait",
			b.At.UTC().Format(time.RFC3339), b.From, b.To, secs(span), p.RedistributionObservationSeconds, n, p.MinSamples)
		return r
	}
	growth := max(before/10, int64(p.CPULowMillicores))
	if busy >= 0 || hotAfter < hotBefore || after-before > growth {
		r.failed = 0
		return r
	}
	r.failed = h.FailedBatches + 1
	if r.failed >= 2 {
		r.hold = ReasonLoadNotRedistributed
		r.message = fmt.Sprintf("%d additions in a row did not move load: after the last one (%d to %d) no newcomer reaches cpuLowMillicores %d, %d of %d incumbents are still high (%d before), and CPU went from %dm to %dm (more than +%dm would show new demand); further additions wait until load moves. Check that cells can move between members (CELLD_PRESSURE_OWNERSHIP, a few hot cells), or add members by hand through spec.replicas",
			r.failed, b.From, b.To, p.CPULowMillicores, hotAfter, len(b.Incumbents), hotBefore, before, after, growth)
	}
	return r
}

// loads is the load of every member, sorted by identity: the baseline of an addition.
func loads(v *view) []Load {
	out := make([]Load, len(v.order))
	for k, i := range v.order {
		s := &v.obs.Samples[i]
		out[k] = Load{Name: s.Name, Identity: s.Identity, CPUMillicores: s.CPUMillicores, MemoryMiB: s.MemoryMiB, Pressured: s.Pressured || s.Backlog}
	}
	return out
}
