package capacity

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// fleetOf is one collection at t0 of members with the given CPU (m) and memory (Mi).
func fleetOf(loads ...[2]int64) *Observation {
	o := &Observation{At: t0, Complete: true}
	for i, l := range loads {
		o.Samples = append(o.Samples, sample(i, t0, l[0], l[1]))
	}
	return o
}

func TestSurvivorsMustShowTheyCanTakeTheRemovedMembersLoad(t *testing.T) {
	p := defaults(v1.CapacityAutomatic) // CPU high 200m, memory high 768Mi; requests 250m, 512Mi
	light := [2]int64{50, 200}
	for _, c := range []struct {
		name    string
		obs     *Observation
		applied int32
		victim  string
		missing string // "" when the evidence holds
	}{
		{"light survivors take the highest ordinal's load", fleetOf(light, light, light, light), 4, "f-3", ""},
		{"spread evenly, the load leaves a survivor one millicore below cpuHighMillicores",
			fleetOf([2]int64{149, 200}, light, light, [2]int64{150, 200}), 4, "f-3", ""},
		{"spread evenly, the load brings a survivor exactly to cpuHighMillicores",
			fleetOf([2]int64{150, 200}, light, light, [2]int64{150, 200}), 4, "f-3", "survivor f-0 would carry 200m CPU (150m now plus 50m of f-3's 150m), not below cpuHighMillicores 200"},
		{"the share is rounded up",
			fleetOf([2]int64{149, 200}, light, light, [2]int64{151, 200}), 4, "f-3", "survivor f-0 would carry 200m CPU"},
		{"a survivor may not go past its memory request",
			fleetOf([2]int64{50, 400}, light, light, [2]int64{50, 339}), 4, "f-3", "survivor f-0 would carry 513Mi memory (400Mi now plus 113Mi of f-3's 339Mi), above its request of 512Mi"},
		{"a survivor may reach its memory request",
			fleetOf([2]int64{50, 400}, light, light, [2]int64{50, 336}), 4, "f-3", ""},
		{"a survivor celld reports pressured takes nothing",
			edit(fleetOf(light, light, light, light), func(o *Observation) { o.Samples[1].Pressured = true }), 4, "f-3", "survivor f-1 is itself under pressure"},
		{"a pressured victim may go when the survivors take its load",
			edit(fleetOf(light, light, light, light), func(o *Observation) { o.Samples[3].Backlog = true }), 4, "f-3", ""},
		{"the victim needs a sample", fleetOf(light, light, light, light), 4, "f-7", "member f-7, which the contraction removes, has no sample"},
		{"no collection", nil, 4, "f-3", "survivor metrics unavailable"},
		{"an incomplete member list", edit(fleetOf(light, light, light, light), func(o *Observation) { o.Complete = false }), 4, "f-3", "could not list every member"},
		{"membership that is not the applied count", fleetOf(light, light, light), 4, "f-3", "found 3 members while the workload applies 4"},
		{"a survivor without fresh metrics",
			edit(fleetOf(light, light, light, light), func(o *Observation) { o.Samples[2].MetricsAt = t0.Add(-46 * time.Second) }), 4, "f-3", "member f-2's Metrics API sample is 46s old, older than maxAgeSeconds 45"},
		{"a survivor with a sample from the future",
			edit(fleetOf(light, light, light, light), func(o *Observation) { o.Samples[1].RuntimeAt = t0.Add(time.Second) }), 4, "f-3", "member f-1 has a sample timestamped after"},
		{"a member not Ready", edit(fleetOf(light, light, light, light), func(o *Observation) { o.Samples[0].Ready = false }), 4, "f-3", "member f-0 is not Ready"},
		{"one member has no survivor", fleetOf(light), 1, "f-0", "no survivor"},
		{"Deployment: any member may go when every one is light", fleetOf(light, light, light, light), 4, "", ""},
		{"Deployment: a loaded member's removal would overload the tightest survivor",
			fleetOf([2]int64{180, 200}, [2]int64{160, 200}, light, light), 4, "", "survivor f-1 would carry 220m CPU (160m now plus 60m of f-0's 180m), not below cpuHighMillicores 200 if Kubernetes removes f-0"},
		{"Deployment: the member with the least room is no survivor of its own removal; the next one is",
			edit(fleetOf([2]int64{120, 200}, [2]int64{170, 200}, [2]int64{10, 200}, [2]int64{10, 200}), func(o *Observation) { o.Samples[0].CPURequestMillicores = 125 }),
			4, "", "survivor f-1 would carry 210m CPU (170m now plus 40m of f-0's 120m), not below cpuHighMillicores 200 if Kubernetes removes f-0"},
		{"Deployment: a member's removal may overload the member with the least room",
			edit(fleetOf([2]int64{50, 200}, [2]int64{150, 200}, light, light), func(o *Observation) { o.Samples[0].CPURequestMillicores = 60 }),
			4, "", "survivor f-0 would carry 100m CPU (50m now plus 50m of f-1's 150m), above its request of 60m if Kubernetes removes f-1"},
		{"Deployment: a pressured member is a survivor of another member's removal",
			edit(fleetOf(light, light, light, light), func(o *Observation) { o.Samples[2].Pressured = true }), 4, "", "survivor f-2 is itself under pressure"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := survivors(&p, t0, c.obs, c.applied, c.victim)
			switch {
			case c.missing == "" && got != "":
				t.Fatalf("the evidence holds, but the check says %q", got)
			case c.missing != "" && !strings.Contains(got, c.missing):
				t.Fatalf("the evidence is missing and the check must say %q; it says %q", c.missing, got)
			}
		})
	}
}
