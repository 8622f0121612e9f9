package lifecycle

import (
	"testing"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

type replicaRow struct {
	name    string
	facts   Facts
	target  int32
	next    int32
	reason  string
	message string
}

func checkReplicas(t *testing.T, rows []replicaRow, plan func(Facts, int32) (int32, string, string)) {
	t.Helper()
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			next, reason, message := plan(row.facts, row.target)
			if next != row.next || reason != row.reason || message != row.message {
				t.Errorf("rule violated: %s\n got: %d %q %q\nwant: %d %q %q",
					row.name, next, reason, message, row.next, row.reason, row.message)
			}
		})
	}
}

// The rows follow "Growth" and "Where a fresh disk goes" in the PersistentFleet lifecycle.
func TestGrowthAddsOneRunOfOrdinalsAtATime(t *testing.T) {
	checkReplicas(t, []replicaRow{
		{"at the target: nothing to add", fleet(3), 3, 3, "", ""},
		{"below the target is contraction's business", fleet(3), 2, 3, "", ""},
		{"fresh ordinals in one run", fleet(3), 5, 5, v1.ReasonProvisioning, "Adding members f-3 to f-4 on fresh disks"},
		{"one fresh ordinal", fleet(3), 4, 4, v1.ReasonProvisioning, "Adding member f-3 on a fresh disk"},
		{"growing back to removed members: the kept run first", fleet(3, keptClaims(3, 5)), 7, 5,
			v1.ReasonProvisioning, "Adding members f-3 to f-4 on their kept disks"},
		{"after the kept run, the fresh run", fleet(5), 7, 7, v1.ReasonProvisioning, "Adding members f-5 to f-6 on fresh disks"},
		{"a fresh run ends where a kept claim begins", fleet(3, keptClaims(5, 6)), 7, 5,
			v1.ReasonProvisioning, "Adding members f-3 to f-4 on fresh disks"},
		{"kept, fresh, kept: the single kept ordinal alone", fleet(3, keptClaims(3, 4), keptClaims(5, 6)), 6, 4,
			v1.ReasonProvisioning, "Adding member f-3 on its kept disk"},
		{"a claim being deleted is not kept: its member gets a fresh disk", fleet(3, keptClaims(3, 4), claimDeleted(3)), 5, 5,
			v1.ReasonProvisioning, "Adding members f-3 to f-4 on fresh disks"},
		{"a run waits until the StatefulSet observed its spec", fleet(3, unobserved), 5, 3,
			v1.ReasonProvisioning, "Waiting for the StatefulSet to observe its spec before adding members f-3 to f-4"},
		{"a fresh run waits for the scheduler to decide every current member", fleet(3, undecided(2)), 5, 3,
			v1.ReasonProvisioning, "Waiting for the scheduler to place member f-2, or find no node for it, before adding members f-3 to f-4 on fresh disks"},
		{"a kept run waits for the scheduler too", fleet(3, keptClaims(3, 5), recreating(1)), 5, 3,
			v1.ReasonProvisioning, "Waiting for the scheduler to place member f-1, or find no node for it, before adding members f-3 to f-4 on their kept disks"},
		{"a member being recreated holds growth back", fleet(3, terminating(0, time.Second)), 4, 3,
			v1.ReasonProvisioning, "Waiting for the scheduler to place member f-0, or find no node for it, before adding member f-3 on a fresh disk"},
		{"a member the scheduler cannot place does not hold growth back", fleet(3, unschedulableFor(2, h)), 5, 5,
			v1.ReasonProvisioning, "Adding members f-3 to f-4 on fresh disks"},
		{"a member down on its node does not hold growth back", fleet(3, downFor(1, h)), 5, 5,
			v1.ReasonProvisioning, "Adding members f-3 to f-4 on fresh disks"},
		{"a foreign claim anywhere in the requested growth: no member is added", fleet(3, foreignClaimAt(5)), 7, 3,
			v1.ReasonStorageIdentityConflict, "PVC data-f-5 exists and does not belong to this fleet; refusing to adopt it"},
		{"a foreign claim beyond the requested growth does not matter", fleet(3, foreignClaimAt(6)), 5, 5,
			v1.ReasonProvisioning, "Adding members f-3 to f-4 on fresh disks"},
		{"a foreign claim refuses growth before any wait", fleet(3, unobserved, foreignClaimAt(3)), 4, 3,
			v1.ReasonStorageIdentityConflict, "PVC data-f-3 exists and does not belong to this fleet; refusing to adopt it"},
		{"no StatefulSet: created with the first run, on the existing claims", fleet(3, noWorkload, keptClaims(0, 3)), 5, 3,
			v1.ReasonProvisioning, "Adding members f-0 to f-2 on their kept disks"},
		{"a new fleet: every member at once on fresh disks", Facts{Fleet: "f", Now: t0}, 3, 3,
			v1.ReasonProvisioning, "Adding members f-0 to f-2 on fresh disks"},
		{"never beyond the API's 100 members", fleet(99), 500, 100, v1.ReasonProvisioning, "Adding member f-99 on a fresh disk"},
	}, Growth)
}

func TestForeignClaimRefusesToAdoptADisk(t *testing.T) {
	for _, row := range []struct {
		name         string
		facts        Facts
		upTo         int32
		reason, want string
	}{
		{"the fleet's own claims", fleet(3, noWorkload), 3, "", ""},
		{"no claims at all", Facts{Fleet: "f"}, 3, "", ""},
		{"a foreign claim at a member's name refuses recreation", fleet(3, noWorkload, foreignClaimAt(1)), 3,
			v1.ReasonStorageIdentityConflict, "PVC data-f-1 exists and does not belong to this fleet; refusing to adopt it"},
		{"a foreign claim above the count is not a member's", fleet(3, noWorkload, foreignClaimAt(4)), 3, "", ""},
	} {
		reason, msg := ForeignClaim(row.facts, row.upTo)
		if reason != row.reason || msg != row.want {
			t.Errorf("rule violated: %s: got %q %q, want %q %q", row.name, reason, msg, row.reason, row.want)
		}
	}
}

// The rows follow "Scale-in": one member per step, the highest ordinal, after the previous
// change has rolled out, keeping its claim.
func TestContractionRemovesOneMemberPerStep(t *testing.T) {
	checkReplicas(t, []replicaRow{
		{"one member per step, the highest ordinal", fleet(5), 3, 4,
			v1.ReasonProvisioning, "Removing member f-4; its disk is kept"},
		{"the last step", fleet(4), 3, 3, v1.ReasonProvisioning, "Removing member f-3; its disk is kept"},
		{"at the target: nothing", fleet(3), 3, 3, "", ""},
		{"above the target is growth's business", fleet(3), 5, 3, "", ""},
		{"waits for the previous change to roll out", fleet(5, rolling), 3, 5,
			v1.ReasonProvisioning, "Waiting for the previous change to roll out before removing a member"},
		{"waits while a member is not Ready", fleet(5, downFor(1, m)), 3, 5,
			v1.ReasonProvisioning, "Waiting for the previous change to roll out before removing a member"},
		{"waits while a template change is still to be applied", fleet(5, templateDrift), 3, 5,
			v1.ReasonProvisioning, "Waiting for the previous change to roll out before removing a member"},
		{"waits until the StatefulSet observed its spec", fleet(5, unobserved), 3, 5,
			v1.ReasonProvisioning, "Waiting for the previous change to roll out before removing a member"},
		{"never below one member", fleet(1), 0, 1, "", ""},
	}, Contraction)
}

func TestPlan(t *testing.T) {
	for _, row := range []struct {
		name     string
		facts    Facts
		target   int32
		replicas int32
		message  string
		heal     Action
	}{
		{"scaled to zero by hand while paused, then resumed: every member returns on its own disk at the declared count, whatever the policy",
			fleet(3, replicas(0), recreating(0), recreating(1), recreating(2)), 7, 3, "Adding members f-0 to f-2 on their kept disks", None},
		{"full stop with the declared count raised during the stop: the kept members return first",
			fleet(3, replicas(0), recreating(0), recreating(1), recreating(2), func(f *Facts) { f.Declared = 5 }), 5, 3,
			"Adding members f-0 to f-2 on their kept disks", None},
		{"still paused at zero: nothing is written", fleet(3, replicas(0), paused), 3, 0, "Workload changes suspended", None},
		{"a reconcile that grows replaces nothing", fleet(3, downFor(2, h)), 5, 5, "Adding members f-3 to f-4 on fresh disks", None},
		{"a settled reconcile heals", fleet(3, downFor(2, h)), 3, 3, "", ReplaceMember},
		{"scale-in keeps the claim: the planner deletes nothing", fleet(5), 3, 4, "Removing member f-4; its disk is kept", None},
	} {
		s := Plan(row.facts, row.target)
		if s.Replicas != row.replicas || s.Message != row.message || s.Heal.Action != row.heal {
			t.Errorf("rule violated: %s\n got: %d %q heal %v\nwant: %d %q heal %v",
				row.name, s.Replicas, s.Message, s.Heal.Action, row.replicas, row.message, row.heal)
		}
	}
}

func TestFullStopOnlyAppliesToAStatefulSetAtZero(t *testing.T) {
	if _, ok := FullStop(fleet(3)); ok {
		t.Error("a running fleet is not in a full stop")
	}
	if _, ok := FullStop(fleet(3, noWorkload)); ok {
		t.Error("a missing StatefulSet is recreated, not a full stop")
	}
	if n, ok := FullStop(fleet(3, replicas(0))); !ok || n != 3 {
		t.Errorf("a StatefulSet at zero returns to the declared count: got %d %v", n, ok)
	}
}
