package capacity

import (
	"fmt"
	"testing"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Run with: go test -run='^$' -bench=Decide -benchmem ./controllers/capacity

var sink Decision

// BenchmarkDecide decides on a new collection that completes a window, at 3 and 100 members:
// within the thresholds (the whole chain, nothing recommended); a completed low window of an
// Automatic Deployment fleet with minReplicas 1 (the survivor check for every member); and a completed high
// window judging the previous addition against its baseline and keeping a new one. A fleet of
// 100 is at the CRD's maximum and cannot grow, so the high case runs at 99.
func BenchmarkDecide(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		mode v1.CapacityMode
		obs  []*Observation
	}{
		{"within", 3, v1.CapacityScaleOut, series(3, 3, 15*s, within)},
		{"within", 100, v1.CapacityScaleOut, series(100, 3, 15*s, within)},
		{"scale-in", 3, v1.CapacityAutomatic, series(3, 41, 15*s, idle)},
		{"scale-in", 100, v1.CapacityAutomatic, series(100, 41, 15*s, idle)},
		{"scale-out", 3, v1.CapacityScaleOut, series(3, 9, 15*s, hotCPU)},
		{"scale-out", 99, v1.CapacityScaleOut, series(99, 9, 15*s, hotCPU)},
	} {
		n := int32(c.n)
		in := Input{Policy: defaults(c.mode), Declared: n, Applied: n, History: History{Declared: n}}
		in.Policy.MinReplicas, in.Policy.MaxReplicas = 1, v1.MaxMembers
		if c.name == "scale-out" {
			// The previous addition, from n-1 members an hour ago, is judged on every decision.
			v := assess(&in.Policy, &History{}, t0, collection(c.n-1, t0, 0, hotCPU), n-1)
			in.History.Baseline = &Baseline{At: t0.Add(-time.Hour), From: n - 1, To: n, Incumbents: loads(&v)}
			in.History.LastScaleOut = t0.Add(-time.Hour)
		}
		for _, o := range c.obs[:len(c.obs)-1] {
			in.Observation, in.Now = o, o.At
			in.Trend = Decide(in).Trend
		}
		last := c.obs[len(c.obs)-1]
		in.Observation, in.Now = last, last.At
		if d := Decide(in); d.Reason == ReasonIncompleteMetrics || d.Reason == ReasonAtMaximum {
			b.Fatalf("setup: %s (%s)", d.Reason, d.Message)
		}
		b.Run(fmt.Sprintf("%s/members=%d", c.name, c.n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = Decide(in)
			}
		})
	}
}
