package capacity

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// view is what one observation shows under the policy.
type view struct {
	obs *Observation
	// order indexes obs.Samples by identity.
	order []int32
	// useful, covered: see Decision.
	useful, covered int32
	// invalid explains an observation that contradicts itself or the clock; absent, one that
	// cannot stand for the current fleet; uncovered, the first Ready member without a usable
	// sample.
	invalid, absent, uncovered string
	// high: a covered member is at or above a high threshold, or celld reports it pressured.
	// low: every member is covered and below both low thresholds with no pressure.
	high, low bool
	// hot is the first high member; top the members with the most CPU and the most memory.
	hot            int
	topCPU, topMem int
}

func seconds(n int32) time.Duration { return time.Duration(n) * time.Second }

// secs prints a duration as whole seconds, the unit of every policy field.
func secs(d time.Duration) string { return fmt.Sprintf("%ds", int64(d/time.Second)) }

// fresh: a source time no older than maxAge, and not after now. Exactly maxAge old is fresh.
func fresh(t, now time.Time, maxAge time.Duration) bool {
	return !t.IsZero() && !t.After(now) && now.Sub(t) <= maxAge
}

// lastStep is the time of the last recorded step, up or down.
func lastStep(h *History) time.Time {
	if h.LastScaleIn.After(h.LastScaleOut) {
		return h.LastScaleIn
	}
	return h.LastScaleOut
}

// assess reads one observation under the policy.
func assess(p *v1.CapacityPolicy, h *History, now time.Time, obs *Observation, applied int32) view {
	v := view{obs: obs, hot: -1, topCPU: -1, topMem: -1}
	switch {
	case obs == nil || obs.At.IsZero():
		v.absent = "no capacity observation has been collected yet; the Metrics API (metrics-server) and each member's /state on port 8081 must answer"
		return v
	case obs.At.After(now):
		v.invalid = fmt.Sprintf("the collection finished at %s, after the decision's clock %s; check the operator node's clock",
			obs.At.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		return v
	}
	v.order = make([]int32, len(obs.Samples))
	for i := range v.order {
		v.order[i] = int32(i)
	}
	slices.SortFunc(v.order, func(a, b int32) int { return cmp.Compare(obs.Samples[a].Identity, obs.Samples[b].Identity) })
	for k, i := range v.order {
		s := &obs.Samples[i]
		switch {
		case s.Name == "" || s.Identity == "":
			v.invalid = fmt.Sprintf("sample %d has no member name or process identity", i)
		case k > 0 && obs.Samples[v.order[k-1]].Identity == s.Identity:
			v.invalid = fmt.Sprintf("members %s and %s report the same process identity %q", obs.Samples[v.order[k-1]].Name, s.Name, s.Identity)
		case s.CPUMillicores < 0 || s.MemoryMiB < 0:
			v.invalid = fmt.Sprintf("member %s reports negative usage (%dm CPU, %dMi memory)", s.Name, s.CPUMillicores, s.MemoryMiB)
		case s.MetricsAt.After(obs.At) || s.RuntimeAt.After(obs.At):
			v.invalid = fmt.Sprintf("member %s has a sample from after the collection finished at %s; check the node clocks", s.Name, obs.At.UTC().Format(time.RFC3339))
		}
		if v.invalid != "" {
			return v
		}
	}
	since := lastStep(h)
	switch {
	case !obs.Complete:
		v.absent = "the last collection could not list every member, or the members changed while it ran"
	case obs.At.Before(since):
		v.absent = fmt.Sprintf("the last collection finished at %s, before the step at %s; waiting for one after it",
			obs.At.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
	case int32(len(obs.Samples)) > applied:
		v.absent = fmt.Sprintf("the last collection found %d member Pods while the workload applies %d; waiting for the removed member to terminate",
			len(obs.Samples), applied)
	}
	v.low = int32(len(obs.Samples)) == applied
	for i := range obs.Samples {
		s := &obs.Samples[i]
		if s.Ready {
			v.useful++
		}
		if gap := coverage(p, now, s); gap != "" {
			v.low = false
			if s.Ready && v.uncovered == "" {
				v.uncovered = gap
			}
			continue
		}
		v.covered++
		if v.topCPU < 0 || s.CPUMillicores > obs.Samples[v.topCPU].CPUMillicores {
			v.topCPU = i
		}
		if v.topMem < 0 || s.MemoryMiB > obs.Samples[v.topMem].MemoryMiB {
			v.topMem = i
		}
		if hot(p, s.CPUMillicores, s.MemoryMiB, s.Pressured || s.Backlog) {
			v.high = true
			v.low = false
			if v.hot < 0 {
				v.hot = i
			}
		} else if s.CPUMillicores >= int64(p.CPULowMillicores) || s.MemoryMiB >= int64(p.MemoryLowMiB) {
			v.low = false
		}
	}
	return v
}

// hot: at or above a high threshold, or pressured by celld's own account. Exactly at the
// threshold counts as high.
func hot(p *v1.CapacityPolicy, cpu, mem int64, pressured bool) bool {
	return pressured || cpu >= int64(p.CPUHighMillicores) || mem >= int64(p.MemoryHighMiB)
}

// coverage says why a sample cannot stand for its member, or "" when it can: the member is
// Ready, its /state load view and its Metrics API sample are no older than maxAgeSeconds, and
// the Metrics API window lies within minWindowSeconds..maxWindowSeconds.
func coverage(p *v1.CapacityPolicy, now time.Time, s *Sample) string {
	maxAge := seconds(p.MaxAgeSeconds)
	switch {
	case !s.Ready:
		return fmt.Sprintf("member %s is not Ready", s.Name)
	case s.RuntimeAt.IsZero():
		return fmt.Sprintf("member %s gave no /state load view; check that the operator reaches port 8081 (NetworkPolicy, mesh)", s.Name)
	case s.RuntimeAt.After(now) || s.MetricsAt.After(now):
		return fmt.Sprintf("member %s has a sample timestamped after %s; check the node clocks", s.Name, now.UTC().Format(time.RFC3339))
	case !fresh(s.RuntimeAt, now, maxAge):
		return fmt.Sprintf("member %s's /state load view is %s old, older than maxAgeSeconds %d", s.Name, secs(now.Sub(s.RuntimeAt)), p.MaxAgeSeconds)
	case s.MetricsAt.IsZero():
		return fmt.Sprintf("member %s has no Metrics API sample; check that metrics-server serves metrics.k8s.io (kubectl top pod %s)", s.Name, s.Name)
	case !fresh(s.MetricsAt, now, maxAge):
		return fmt.Sprintf("member %s's Metrics API sample is %s old, older than maxAgeSeconds %d; check metrics-server, or raise maxAgeSeconds above its resolution",
			s.Name, secs(now.Sub(s.MetricsAt)), p.MaxAgeSeconds)
	case s.Window < seconds(p.MinWindowSeconds) || s.Window > seconds(p.MaxWindowSeconds):
		return fmt.Sprintf("member %s's Metrics API window is %s, outside minWindowSeconds %d to maxWindowSeconds %d; match metrics-server's --metric-resolution or widen the bounds",
			s.Name, secs(s.Window), p.MinWindowSeconds, p.MaxWindowSeconds)
	}
	return ""
}
