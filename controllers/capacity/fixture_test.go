package capacity

import (
	"fmt"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// t0 is the time of the last collection of every scenario.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const s = time.Second

// defaults is a policy of the given mode with the API defaults: min 3, max 10, step 1,
// sample interval 15 s, max age 45 s, window 5..60 s, 3 samples, stabilization 30 s out and
// 600 s in, cooldowns 300 s out and 900 s in, provisioning 600 s, redistribution 120 s,
// CPU 80..200 m, memory 384..768 Mi.
func defaults(mode v1.CapacityMode) v1.CapacityPolicy {
	p := v1.CapacityPolicy{Mode: mode}
	p.Default()
	return p
}

// Loads, per member and per collection.
type loadFunc func(member, collection int) (cpu, mem int64)

// Member 0 runs hot on CPU; the rest sit between the thresholds.
func hotCPU(m, _ int) (int64, int64) {
	if m == 0 {
		return 250, 400
	}
	return 100, 400
}

// Every member between the thresholds.
func within(_, _ int) (int64, int64) { return 100, 400 }

// Every member below both low thresholds.
func idle(_, _ int) (int64, int64) { return 50, 300 }

func constant(cpu, mem int64) loadFunc { return func(_, _ int) (int64, int64) { return cpu, mem } }

// sample is a Ready member with fresh sources taken at the collection time, a 15 s window and
// the default requests (250m, 512Mi).
func sample(i int, at time.Time, cpu, mem int64) Sample {
	return Sample{Name: fmt.Sprintf("f-%d", i), Identity: fmt.Sprintf("uid-%d/c1/0", i), Ready: true,
		RuntimeAt: at, MetricsAt: at, Window: 15 * s, CPUMillicores: cpu, MemoryMiB: mem,
		CPURequestMillicores: 250, MemoryRequestMiB: 512}
}

// collection is one complete collection of n members at at.
func collection(n int, at time.Time, c int, load loadFunc) *Observation {
	o := &Observation{At: at, Complete: true, Samples: make([]Sample, n)}
	for i := range n {
		cpu, mem := load(i, c)
		o.Samples[i] = sample(i, at, cpu, mem)
	}
	return o
}

// series is k collections of n members, every apart, the last at t0.
func series(n, k int, every time.Duration, load loadFunc) []*Observation {
	out := make([]*Observation, k)
	for c := range k {
		out[c] = collection(n, t0.Add(-time.Duration(k-1-c)*every), c, load)
	}
	return out
}

// at is collections of n members at the given offsets from t0.
func at(n int, load loadFunc, offsets ...time.Duration) []*Observation {
	out := make([]*Observation, len(offsets))
	for c, off := range offsets {
		out[c] = collection(n, t0.Add(off), c, load)
	}
	return out
}

// one is a single collection at t0.
func one(n int, load loadFunc) []*Observation { return series(n, 1, 15*s, load) }

// run feeds the collections to Decide in order, each at its own time, handing each decision's
// trend to the next; the last decision is made at the last collection's time plus after, with
// last applied to its input first.
func run(base Input, obs []*Observation, after time.Duration, last func(*Input)) Decision {
	in := base
	var d Decision
	for k, o := range obs {
		in.Observation, in.Now = o, o.At
		if k == len(obs)-1 {
			in.Now = in.Now.Add(after)
			if last != nil {
				last(&in)
			}
		}
		d = Decide(in)
		in.Trend = d.Trend
	}
	if len(obs) == 0 {
		in.Now = t0.Add(after)
		if last != nil {
			last(&in)
		}
		d = Decide(in)
	}
	return d
}
