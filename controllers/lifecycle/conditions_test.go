package lifecycle

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
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

// TestStatusConditionsAreEveryOwnedCondition: besides the verdict's three, MaintenancePaused
// and Deleting are always set (True with their reason, False with NotPaused or NotDeleting),
// Deleting carries the verdict's message, OperationSizeWarning exists only past the warning
// bound, and RoutingReady passes through at the fleet's generation.
func TestStatusConditionsAreEveryOwnedCondition(t *testing.T) {
	routing := &metav1.Condition{Type: v1.ConditionRoutingReady, Status: metav1.ConditionTrue, Reason: v1.ReasonRouteAccepted, Message: "accepted"}
	cases := []struct {
		name   string
		in     StatusInput
		want   map[string]string // type -> "Status/Reason"
		says   map[string]string // type -> part of the message
		remove []string
	}{
		{"a running fleet", StatusInput{Reason: v1.ReasonProvisioned, Message: "Ready", MembersReady: true},
			map[string]string{v1.ConditionReady: "True/" + v1.ReasonProvisioned, v1.ConditionBlocked: "False/" + v1.ReasonProvisioned,
				v1.ConditionMaintenancePaused: "False/" + v1.ReasonNotPaused, v1.ConditionDeleting: "False/" + v1.ReasonNotDeleting},
			nil, []string{v1.ConditionOperationSizeWarning}},
		{"a paused fleet", StatusInput{Reason: v1.ReasonMaintenancePaused, Message: "paused", Paused: true},
			map[string]string{v1.ConditionMaintenancePaused: "True/" + v1.ReasonMaintenancePaused, v1.ConditionBlocked: "True/" + v1.ReasonMaintenancePaused},
			map[string]string{v1.ConditionMaintenancePaused: "spec.maintenance.paused"}, []string{v1.ConditionOperationSizeWarning}},
		{"a fleet being deleted", StatusInput{Reason: v1.ReasonDeleting, Message: "Waiting for 3 member Pods to terminate", Deleting: true},
			map[string]string{v1.ConditionDeleting: "True/" + v1.ReasonDeleting, v1.ConditionProgressing: "True/" + v1.ReasonDeleting},
			map[string]string{v1.ConditionDeleting: "Waiting for 3 member Pods"}, []string{v1.ConditionOperationSizeWarning}},
		{"a capacity record past the warning bound", StatusInput{Reason: v1.ReasonProvisioned, Reservation: "s3-x", HistoryBytes: reservation.OperationWarningBytes + 1},
			map[string]string{v1.ConditionOperationSizeWarning: "True/" + v1.ReasonBoundedOperation},
			map[string]string{v1.ConditionOperationSizeWarning: "CelldStorageReservation s3-x uses"}, nil},
		{"a capacity record at the bound", StatusInput{Reason: v1.ReasonProvisioned, HistoryBytes: reservation.OperationWarningBytes},
			nil, nil, []string{v1.ConditionOperationSizeWarning}},
		{"routing", StatusInput{Reason: v1.ReasonProvisioned, Generation: 7, Routing: routing},
			map[string]string{v1.ConditionRoutingReady: "True/" + v1.ReasonRouteAccepted}, nil, []string{v1.ConditionOperationSizeWarning}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, remove := StatusConditions(c.in)
			got := map[string]metav1.Condition{}
			for _, cond := range set {
				if _, dup := got[cond.Type]; dup {
					t.Fatalf("%s set twice", cond.Type)
				}
				if cond.ObservedGeneration != c.in.Generation {
					t.Errorf("%s at generation %d, want %d", cond.Type, cond.ObservedGeneration, c.in.Generation)
				}
				got[cond.Type] = cond
			}
			for _, typ := range []string{v1.ConditionReady, v1.ConditionProgressing, v1.ConditionBlocked, v1.ConditionMaintenancePaused, v1.ConditionDeleting} {
				if _, ok := got[typ]; !ok {
					t.Errorf("%s is not set", typ)
				}
			}
			for typ, w := range c.want {
				if g := string(got[typ].Status) + "/" + got[typ].Reason; g != w {
					t.Errorf("%s = %s, want %s", typ, g, w)
				}
			}
			for typ, w := range c.says {
				if !strings.Contains(got[typ].Message, w) {
					t.Errorf("%s says %q, want %q in it", typ, got[typ].Message, w)
				}
			}
			if !slices.Equal(remove, c.remove) {
				t.Errorf("remove %v, want %v", remove, c.remove)
			}
			if routing.ObservedGeneration != 0 {
				t.Error("StatusConditions changed the routing condition it was given")
			}
		})
	}
}
