package lifecycle

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

const (
	yes = metav1.ConditionTrue
	no  = metav1.ConditionFalse
)

func TestConditionsProjectTheLifecycleReason(t *testing.T) {
	for _, row := range []struct {
		reason                       string
		ready                        bool
		readyS, progressing, blocked metav1.ConditionStatus
	}{
		{v1.ReasonProvisioned, true, yes, no, no},
		{v1.ReasonProvisioning, false, no, yes, no},
		{v1.ReasonProvisioning, true, yes, yes, no},
		{v1.ReasonLifecycleProgress, false, no, yes, no},
		{v1.ReasonMemberUnschedulable, false, no, no, yes},
		{v1.ReasonCapacityUncertain, true, yes, no, no},
		{v1.ReasonSchedulingBlocked, true, yes, no, no},
		{v1.ReasonMaintenancePaused, true, yes, no, yes},
		{v1.ReasonStorageIdentityConflict, false, no, no, yes},
		{v1.ReasonStorageScopeConflict, false, no, no, yes},
		{v1.ReasonInvalidConfiguration, false, no, no, yes},
		{v1.ReasonNamespaceAccessDenied, false, no, no, yes},
		{v1.ReasonDeletionBlocked, false, no, no, yes},
		{v1.ReasonDeleting, false, no, yes, no},
		{v1.ReasonSeedInitializing, false, no, yes, no},
		{v1.ReasonSeedReservationBlocked, false, no, no, yes},
		{v1.ReasonSeedCancellationBlocked, false, no, no, yes},
		{"SomeFutureReason", false, no, no, yes},
	} {
		got := Project(row.reason, row.ready)
		want := Statuses{Ready: row.readyS, Progressing: row.progressing, Blocked: row.blocked}
		if got != want {
			t.Errorf("%s (members ready %v): got %+v, want %+v", row.reason, row.ready, got, want)
		}
	}
}

func TestEveryLifecycleReasonIsInTheTable(t *testing.T) {
	table := ReasonTable()
	for _, r := range []string{
		v1.ReasonNamespaceAccessDenied, v1.ReasonInvalidConfiguration, v1.ReasonMaintenancePaused,
		v1.ReasonIsolationUnverified, v1.ReasonServiceAccountMissing, v1.ReasonStorageClassMissing,
		v1.ReasonInvalidStorageClass, v1.ReasonStorageScopeConflict, v1.ReasonInfrastructureBlocked,
		v1.ReasonStorageIdentityConflict, v1.ReasonLifecycleBlocked, v1.ReasonProvisioning,
		v1.ReasonProvisioned, v1.ReasonLifecycleProgress, v1.ReasonMemberUnschedulable,
		v1.ReasonCapacityUncertain, v1.ReasonSchedulingBlocked, v1.ReasonDeletionBlocked,
	} {
		if _, ok := table[r]; !ok {
			t.Errorf("lifecycle reason %s has no provisioned entry; it would report Blocked by default", r)
		}
	}
	table[v1.ReasonProvisioned] = false
	if !Provisioned(v1.ReasonProvisioned) {
		t.Error("ReasonTable must return a copy: editing it changed the projection")
	}
}

func TestConditionsCarryOneReasonAndMessage(t *testing.T) {
	cs := Conditions(v1.ReasonMemberUnschedulable, "Member f-2 has not been scheduled", false, 9)
	if len(cs) != 3 {
		t.Fatalf("want Ready, Progressing and Blocked, got %d conditions", len(cs))
	}
	for _, c := range cs {
		if c.Reason != v1.ReasonMemberUnschedulable || c.Message != "Member f-2 has not been scheduled" || c.ObservedGeneration != 9 {
			t.Errorf("%s: every lifecycle condition carries the same reason, message and generation: %+v", c.Type, c)
		}
	}
	if cs[2].Type != v1.ConditionBlocked || cs[2].Status != yes {
		t.Errorf("MemberUnschedulable blocks the fleet: %+v", cs[2])
	}
}

func TestMembersReadyIsGenerationAware(t *testing.T) {
	if !fleet(3).Workload.MembersReady() {
		t.Error("three of three Ready on an observed spec is ready")
	}
	if fleet(3, unobserved).Workload.MembersReady() {
		t.Error("ready counts of a spec the StatefulSet has not observed must not count")
	}
	if fleet(3, downFor(0, m)).Workload.MembersReady() {
		t.Error("two of three Ready is not ready")
	}
	if fleet(3, replicas(0)).Workload.MembersReady() {
		t.Error("a fleet with no member is not ready")
	}
}
