package capacity

import (
	"fmt"
	"time"
)

// running: a high or low window is open.
func (t *Trend) running() bool { return t.high > 0 || t.low > 0 }

// restartWindows closes the high and low windows.
func (t *Trend) restartWindows() {
	t.high, t.low = 0, 0
	t.highSince, t.lowSince = time.Time{}, time.Time{}
}

// restart forgets every counted observation; only the policy and the start of a pending
// period are kept.
func (t *Trend) restart() {
	t.restartWindows()
	t.at, t.sources = time.Time{}, nil
	t.steady, t.steadySince = 0, time.Time{}
}

// sameMembers: the observation has exactly the processes of the last counted one.
func (t *Trend) sameMembers(v *view) bool {
	if len(t.sources) != len(v.order) {
		return false
	}
	for k, i := range v.order {
		if t.sources[k].identity != v.obs.Samples[i].Identity {
			return false
		}
	}
	return true
}

// repeated names the first member whose load view or Metrics API timestamp did not advance
// since the last counted observation, or returns "" when every one advanced. The members must
// be the same.
func (t *Trend) repeated(v *view) string {
	for k, i := range v.order {
		s, prev := &v.obs.Samples[i], &t.sources[k]
		switch {
		case !s.MetricsAt.After(prev.metricsAt):
			return fmt.Sprintf("member %s's Metrics API timestamp %s did not advance since the last counted sample", s.Name, s.MetricsAt.UTC().Format(time.RFC3339))
		case !s.RuntimeAt.After(prev.runtimeAt):
			return fmt.Sprintf("member %s's /state load view timestamp %s did not advance since the last counted sample", s.Name, s.RuntimeAt.UTC().Format(time.RFC3339))
		}
	}
	return ""
}

// mark makes the observation the last counted one, without extending a window: the next one
// is due sampleIntervalSeconds after it and must advance every source.
func (t *Trend) mark(v *view) {
	t.at = v.obs.At
	t.sources = make([]source, len(v.order))
	for k, i := range v.order {
		s := &v.obs.Samples[i]
		t.sources[k] = source{identity: s.Identity, metricsAt: s.MetricsAt, runtimeAt: s.RuntimeAt}
	}
}

// count makes obs the last counted observation and extends the windows it belongs to.
// baselineAt is the time of the addition being judged: the redistribution window only counts
// observations after it.
func (t *Trend) count(v *view, high, low bool, baselineAt time.Time) {
	t.mark(v)
	at := v.obs.At
	switch {
	case high:
		t.low, t.lowSince = 0, time.Time{}
		if t.high == 0 {
			t.highSince = at
		}
		t.high++
	case low:
		t.high, t.highSince = 0, time.Time{}
		if t.low == 0 {
			t.lowSince = at
		}
		t.low++
	default:
		t.restartWindows()
	}
	if t.steady == 0 || t.steadySince.Before(baselineAt) {
		t.steady, t.steadySince = 0, at
	}
	t.steady++
}
