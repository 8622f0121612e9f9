package fleet

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func TestMetricsFollowTheFleetAndLeaveWithIt(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f"}}
	st := &v1.CelldFleetStatus{DesiredReplicas: 3, AppliedReplicas: 3, ReadyReplicas: 2, ReplicaObservationValid: true,
		BlockedSince: &metav1.Time{Time: time.Now().Add(-time.Minute)},
		Conditions:   []metav1.Condition{{Type: v1.ConditionBlocked, Status: metav1.ConditionTrue, Reason: v1.ReasonMemberUnschedulable}}}
	m.observe(f, st)
	if got := testutil.ToFloat64(m.gauges["ready_replicas"].WithLabelValues("ns", "f")); got != 2 {
		t.Fatalf("celld_fleet_ready_replicas = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.gauges["blocked"].WithLabelValues("ns", "f")); got != 1 {
		t.Fatalf("celld_fleet_blocked = %v, want 1", got)
	}
	if age := testutil.ToFloat64(m.gauges["blocked_age_seconds"].WithLabelValues("ns", "f")); age < 59 {
		t.Fatalf("celld_fleet_blocked_age_seconds = %v, want about 60", age)
	}
	m.forget("ns", "f")
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n != 0 {
		t.Fatalf("a deleted fleet must leave no series, %d remain (%v)", n, err)
	}
}
