package lifecycle

import (
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
)

// provisioned says, for each lifecycle reason, whether the fleet's infrastructure is in place
// (workload created, prerequisites applied). A reason that is not provisioned blocks the fleet;
// an unknown reason is not provisioned, so a new reason fails closed as Blocked until it is
// listed here.
var provisioned = map[string]bool{
	v1.ReasonNamespaceAccessDenied:   false,
	v1.ReasonInvalidConfiguration:    false,
	v1.ReasonMaintenancePaused:       false,
	v1.ReasonIsolationUnverified:     false,
	v1.ReasonServiceAccountMissing:   false,
	v1.ReasonStorageClassMissing:     false,
	v1.ReasonInvalidStorageClass:     false,
	v1.ReasonStorageScopeConflict:    false,
	v1.ReasonInfrastructureBlocked:   false,
	v1.ReasonStorageIdentityConflict: false,
	v1.ReasonLifecycleBlocked:        false,
	v1.ReasonDeletionBlocked:         false,
	v1.ReasonDeleting:                false,
	v1.ReasonSeedInitializing:        false,
	v1.ReasonSeedReservationBlocked:  false,
	v1.ReasonSeedCancellationBlocked: false,
	v1.ReasonProvisioning:            true,
	v1.ReasonProvisioned:             true,
	v1.ReasonLifecycleProgress:       true,
	// MemberUnschedulable is provisioned but still Blocked: the fleet exists, and a member
	// needs a node only an administrator can supply.
	v1.ReasonMemberUnschedulable: true,
	// MemberCrashLooping is provisioned but Blocked: the fleet runs, and its newest template
	// needs a correction only the user can make.
	v1.ReasonMemberCrashLooping: true,
	// CapacityUncertain is provisioned, so not Blocked: the fleet runs, only a contraction
	// waits for survivor-capacity evidence.
	v1.ReasonCapacityUncertain: true,
	v1.ReasonSchedulingBlocked: true,
}

// ReasonTable returns a copy of the reason → provisioned table.
func ReasonTable() map[string]bool { return maps.Clone(provisioned) }

// Provisioned reports whether reason means the fleet's infrastructure is in place.
func Provisioned(reason string) bool { return provisioned[reason] }

// Statuses are the lifecycle conditions' statuses for one reason.
type Statuses struct {
	Ready, Progressing, Blocked metav1.ConditionStatus
}

// Project maps a lifecycle reason onto the conditions:
//   - Ready: membersReady (Workload.MembersReady: every member Ready, generation-aware),
//     whatever the reason;
//   - Progressing: the reason is LifecycleProgress, Provisioning, Deleting or SeedInitializing;
//   - Blocked: the reason is not provisioned and not progress (LifecycleProgress, Deleting,
//     SeedInitializing), or it is MemberUnschedulable or MemberCrashLooping.
//
// Deleting is progress: the operator is draining and removing the fleet, and a stuck deletion
// reports DeletionBlocked instead.
func Project(reason string, membersReady bool) Statuses {
	progress := reason == v1.ReasonLifecycleProgress || reason == v1.ReasonDeleting || reason == v1.ReasonSeedInitializing
	return Statuses{
		Ready:       status(membersReady),
		Progressing: status(progress || reason == v1.ReasonProvisioning),
		Blocked:     status((!provisioned[reason] && !progress) || reason == v1.ReasonMemberUnschedulable || reason == v1.ReasonMemberCrashLooping),
	}
}

// Conditions returns Ready, Progressing and Blocked for a lifecycle reason, all with the same
// reason and message. LastTransitionTime is left for meta.SetStatusCondition to fill, so an
// unchanged status keeps its time.
func Conditions(reason, message string, membersReady bool, generation int64) []metav1.Condition {
	s := Project(reason, membersReady)
	c := func(t string, st metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: st, Reason: reason, Message: message, ObservedGeneration: generation}
	}
	return []metav1.Condition{
		c(v1.ConditionReady, s.Ready),
		c(v1.ConditionProgressing, s.Progressing),
		c(v1.ConditionBlocked, s.Blocked),
	}
}

func status(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// StatusInput is what the fleet's conditions are projected from: the pass's verdict (reason
// and message), whether every member is Ready, the fleet's generation, whether it is paused or
// being deleted (as the pass read it), the size of the capacity record on its reservation, and
// the pass's RoutingReady condition (nil leaves the one the fleet has).
type StatusInput struct {
	Reason, Message string
	MembersReady    bool
	Generation      int64
	Paused          bool
	Deleting        bool
	Reservation     string
	HistoryBytes    int
	Routing         *metav1.Condition
}

// StatusConditions is every condition the reconciler owns, in one place: Ready, Progressing and
// Blocked from the verdict (Conditions), MaintenancePaused, Deleting (with the verdict's message
// while the fleet is deleted), OperationSizeWarning while the capacity record on the
// reservation is past reservation.OperationWarningBytes, and RoutingReady. It returns the
// conditions to set, and the types to remove.
func StatusConditions(in StatusInput) (set []metav1.Condition, remove []string) {
	set = Conditions(in.Reason, in.Message, in.MembersReady, in.Generation)
	add := func(t string, ok bool, reason, msg string) {
		set = append(set, metav1.Condition{Type: t, Status: status(ok), Reason: reason, Message: msg, ObservedGeneration: in.Generation})
	}
	if in.Paused {
		add(v1.ConditionMaintenancePaused, true, v1.ReasonMaintenancePaused, "Workload changes suspended by spec.maintenance.paused")
	} else {
		add(v1.ConditionMaintenancePaused, false, v1.ReasonNotPaused, "Workload changes are applied")
	}
	if in.Deleting {
		add(v1.ConditionDeleting, true, v1.ReasonDeleting, in.Message)
	} else {
		add(v1.ConditionDeleting, false, v1.ReasonNotDeleting, "The fleet is not being deleted")
	}
	if in.HistoryBytes > reservation.OperationWarningBytes {
		add(v1.ConditionOperationSizeWarning, true, v1.ReasonBoundedOperation, fmt.Sprintf(
			"Persisted capacity-policy state on CelldStorageReservation %s uses %d of %d bytes", in.Reservation, in.HistoryBytes, reservation.MaxOperationBytes))
	} else {
		remove = append(remove, v1.ConditionOperationSizeWarning)
	}
	if in.Routing != nil {
		c := *in.Routing
		c.ObservedGeneration = in.Generation
		set = append(set, c)
	}
	return set, remove
}
