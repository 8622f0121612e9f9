package lifecycle

import (
	"testing"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// rolledOut is a three-member workload with nothing left to do.
var rolledOut = Workload{Exists: true, Replicas: 3, TemplateMatches: true, Generation: 2, ObservedGeneration: 2,
	UpdatedReplicas: 3, ReadyReplicas: 3, RevisionCurrent: true}

func TestDecidePrecedence(t *testing.T) {
	deleting := &Verdict{v1.ReasonDeleting, "Deleting workload"}
	healAction := Decision{Action: ReplaceMember, Reason: v1.ReasonLifecycleProgress, Message: "replacing f-1"}
	healWait := Decision{Reason: v1.ReasonProvisioning, Message: "waiting for f-1 to recover", RequeueAfter: time.Minute}
	unschedulable := Decision{Reason: v1.ReasonMemberUnschedulable, Message: "f-2 has no node"}
	gate := &Verdict{v1.ReasonSchedulingBlocked, "could not lift the gate"}
	step := Verdict{v1.ReasonProvisioning, "Adding members 3 to 4"}
	failure := &Verdict{v1.ReasonProvisioning, "Retrying after an error: boom"}
	seed := &Verdict{v1.ReasonSeedInitializing, "waiting for executor snapshot"}
	rolling := rolledOut
	rolling.UpdatedReplicas = 1
	rolling.RevisionCurrent = false
	unobserved := rolledOut
	unobserved.ObservedGeneration = 1

	for _, c := range []struct {
		name string
		f    Findings
		want string
	}{
		{"deletion over every other finding", Findings{Deletion: deleting, Blockers: []Verdict{{v1.ReasonIsolationUnverified, ""}}, Paused: true, Heal: healAction}, v1.ReasonDeleting},
		{"the first blocker over healing", Findings{Blockers: []Verdict{{v1.ReasonInfrastructureBlocked, "a foreign PDB"}, {v1.ReasonStorageIdentityConflict, ""}}, Heal: healAction, Workload: rolledOut, Applied: 3}, v1.ReasonInfrastructureBlocked},
		{"a failure over a seed wait", Findings{Failure: failure, Seed: seed}, v1.ReasonProvisioning},
		{"a blocker over a seed wait", Findings{Blockers: []Verdict{{v1.ReasonSeedReservationBlocked, "failed"}}, Seed: seed}, v1.ReasonSeedReservationBlocked},
		{"a seed wait over maintenance", Findings{Seed: seed, Paused: true}, v1.ReasonSeedInitializing},
		{"deletion over a seed wait", Findings{Deletion: &Verdict{v1.ReasonSeedCancellationBlocked, "waiting"}, Seed: seed}, v1.ReasonSeedCancellationBlocked},
		{"a failure over maintenance", Findings{Failure: failure, Paused: true}, v1.ReasonProvisioning},
		{"maintenance over healing", Findings{Paused: true, Heal: healAction}, v1.ReasonMaintenancePaused},
		{"a healing action over a rollout", Findings{Heal: healAction, Workload: rolling, Applied: 3}, v1.ReasonLifecycleProgress},
		{"a healing wait over a replica step", Findings{Heal: healWait, Step: step, Workload: rolledOut, Applied: 4}, v1.ReasonProvisioning},
		{"a blocked member over a zone gate", Findings{Heal: unschedulable, ZoneGate: gate, Workload: rolledOut, Applied: 3}, v1.ReasonMemberUnschedulable},
		{"a zone gate over a created workload", Findings{ZoneGate: gate, Created: true}, v1.ReasonSchedulingBlocked},
		{"a step over the rollout", Findings{Step: Verdict{v1.ReasonCapacityUncertain, "no evidence"}, Workload: rolling, Applied: 3}, v1.ReasonCapacityUncertain},
		{"the rollout over the mesh", Findings{Workload: unobserved, Applied: 3, MeshMixed: true}, v1.ReasonProvisioning},
		{"the mesh over provisioned", Findings{Workload: rolledOut, Applied: 3, MeshMixed: true}, v1.ReasonProvisioning},
		{"provisioned", Findings{Workload: rolledOut, Applied: 3}, v1.ReasonProvisioned},
		{"a paused heal decision is not a wait", Findings{Heal: Decision{Reason: v1.ReasonMaintenancePaused, Message: PausedMessage}, Workload: rolledOut, Applied: 3}, v1.ReasonProvisioned},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Decide(c.f); got.Reason != c.want {
				t.Fatalf("Decide = %s (%s), want %s", got.Reason, got.Message, c.want)
			}
		})
	}
}

func TestDecideMessages(t *testing.T) {
	mesh := Decide(Findings{Workload: rolledOut, Applied: 3, MeshMixed: true})
	if mesh.Message != "Waiting for member sidecars to match the requested mesh membership; verify Istio injection" {
		t.Fatalf("mesh wait message: %q", mesh.Message)
	}
	change := Decide(Findings{Fleet: "f", Workload: rolledOut, Applied: 4})
	if change.Message != "Changing f from 3 to 4 members" {
		t.Fatalf("replica change message: %q", change.Message)
	}
	if v := Decide(Findings{}); v.Reason != v1.ReasonProvisioning || v.Message != "Waiting for the workload" {
		t.Fatalf("no workload: %+v", v)
	}
}

func TestRequeue(t *testing.T) {
	p := Periods{Resync: 10 * time.Minute, Waiting: 30 * time.Second}
	provisioned := Verdict{Reason: v1.ReasonProvisioned}
	for _, c := range []struct {
		name string
		f    Findings
		v    Verdict
		want time.Duration
	}{
		{"a settled fleet waits for the resync", Findings{}, provisioned, p.Resync},
		{"a paused fleet is settled", Findings{}, Verdict{Reason: v1.ReasonMaintenancePaused}, p.Resync},
		{"a blocked fleet polls", Findings{}, Verdict{Reason: v1.ReasonIsolationUnverified}, p.Waiting},
		{"a provisioning fleet polls", Findings{}, Verdict{Reason: v1.ReasonProvisioning}, p.Waiting},
		{"routing waiting on an unserved API polls", Findings{RoutingWaits: true}, provisioned, p.Waiting},
		{"a healing timer that expires sooner wins", Findings{Heal: Decision{RequeueAfter: 7 * time.Second}}, provisioned, 7 * time.Second},
		{"a healing timer later than the wait does not", Findings{Heal: Decision{RequeueAfter: time.Hour}}, Verdict{Reason: v1.ReasonProvisioning}, p.Waiting},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.f.Requeue(c.v, p); got != c.want {
				t.Fatalf("Requeue = %s, want %s", got, c.want)
			}
		})
	}
}

func TestDeploymentStep(t *testing.T) {
	notReady := rolledOut
	notReady.ReadyReplicas = 2
	drifted := rolledOut
	drifted.TemplateMatches = false
	for _, c := range []struct {
		name   string
		w      Workload
		target int32
		next   int32
		waits  bool
	}{
		{"growth applies the target at once", rolledOut, 6, 6, false},
		{"at the target", rolledOut, 3, 3, false},
		{"contraction removes one member per step", rolledOut, 1, 2, false},
		{"contraction waits for readiness", notReady, 1, 3, true},
		{"contraction waits for the template", drifted, 1, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, v := DeploymentStep(c.w, c.target)
			if next != c.next || (v.Reason != "") != c.waits {
				t.Fatalf("DeploymentStep = %d %+v, want %d (waits %v)", next, v, c.next, c.waits)
			}
		})
	}
}
