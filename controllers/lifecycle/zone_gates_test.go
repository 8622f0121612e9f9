package lifecycle

import (
	"fmt"
	"testing"
	"time"
)

// ordered is a three-member Ordered Bucket fleet, edited.
func ordered(edits ...edit) Facts { return fleet(3, append([]edit{orderedBucket}, edits...)...) }

// gated: member i's Pod was just created by the StatefulSet controller and waits on the zone
// gate, unscheduled.
func gated(i int32) edit {
	return func(f *Facts) {
		p := &member(f, i).Pod
		*p = Pod{Exists: true, UID: uid("pod", i), ResourceVersion: fmt.Sprint(300 + i), Created: t0.Add(-time.Second),
			ReadyTransition: t0.Add(-time.Second), Revision: "rev-a", ZoneGated: true}
	}
}

func TestPlanWorkloadReleasesZoneGates(t *testing.T) {
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	in := func(f Facts, e ...func(*WorkloadInput)) WorkloadInput {
		w := WorkloadInput{StatefulSet: true, Facts: f, Target: f.Declared, Zones: zones}
		for _, x := range e {
			x(&w)
		}
		return w
	}
	stuck := terminating(0, 2*time.Minute) // force-deleted: an action this pass
	for _, c := range []struct {
		name string
		in   WorkloadInput
		want string // Member@Zone, in order
	}{
		{"gated members are pinned to their ordinal's zone", in(ordered(gated(1), gated(2))), "[1@us-east-1b 2@us-east-1c]"},
		{"an ordinal past the zone count wraps", in(ordered(replicas(5), declared(5), gated(4))), "[4@us-east-1b]"},
		{"zones in spec order, not sorted", in(ordered(gated(0)), func(w *WorkloadInput) { w.Zones = []string{"us-east-1c", "us-east-1a"} }), "[0@us-east-1c]"},
		{"a deleting gated Pod is left to its successor", in(ordered(gated(1), func(f *Facts) { member(f, 1).Pod.Deleting = true })), "[]"},
		{"nothing gated, nothing released", in(ordered()), "[]"},
		{"released under a blocker: members already created must run", in(ordered(gated(2)), func(w *WorkloadInput) { w.Blocked = true }), "[2@us-east-1c]"},
		{"a healing action this pass releases nothing", in(ordered(gated(2), stuck)), "[]"},
		{"paused: nothing", in(ordered(gated(2), func(f *Facts) { f.Paused = true })), "[]"},
		{"a foreign workload: nothing", in(ordered(gated(2)), func(w *WorkloadInput) { w.Foreign = "StatefulSet ns/f exists" }), "[]"},
		{"another layout: nothing", in(ordered(gated(2), func(f *Facts) { f.OrderedBucket = false })), "[]"},
		{"no zones: nothing", in(ordered(gated(2)), func(w *WorkloadInput) { w.Zones = nil }), "[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := PlanWorkload(c.in)
			got := []string{}
			for _, z := range p.ZoneGates {
				if z.Pod.Name != fmt.Sprintf("f-%d", z.Member) || z.Pod.UID != uid("pod", z.Member) {
					t.Errorf("release %+v does not name member %d's Pod", z, z.Member)
				}
				got = append(got, fmt.Sprintf("%d@%s", z.Member, z.Zone))
			}
			if fmt.Sprint(got) != c.want {
				t.Errorf("zone releases = %v, want %s (heal %+v)", got, c.want, p.Heal)
			}
		})
	}
}

// TestOrderedZoneIsOrdinalModuloZones: ordinal n goes to zones[n % len], in spec order.
func TestOrderedZoneIsOrdinalModuloZones(t *testing.T) {
	three := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	two := []string{"us-east-1c", "us-east-1a"}
	for _, c := range []struct {
		zones []string
		n     int32
		want  string
	}{
		{three, 0, "us-east-1a"}, {three, 1, "us-east-1b"}, {three, 2, "us-east-1c"},
		{three, 3, "us-east-1a"}, {three, 7, "us-east-1b"}, {three, 99, "us-east-1a"},
		{two, 0, "us-east-1c"}, {two, 1, "us-east-1a"}, {two, 2, "us-east-1c"},
		{three, -1, ""}, {nil, 0, ""},
	} {
		if got := OrderedZone(c.zones, c.n); got != c.want {
			t.Errorf("OrderedZone(%v, %d) = %q, want %q", c.zones, c.n, got, c.want)
		}
	}
}
