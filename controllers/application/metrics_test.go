package application

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func TestMetricsReportTheVerdictAndLeaveWithTheFleet(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f"}}
	m.record(f, Result{Status: metav1.ConditionUnknown, Application: v1.ApplicationStatus{ObservedNodes: 2, UnavailableNodes: 1}}, 20*time.Millisecond)
	if got := testutil.ToFloat64(m.converged.WithLabelValues("ns", "f")); got != -1 {
		t.Fatalf("Unknown must read -1, got %v", got)
	}
	if got := testutil.ToFloat64(m.unavailable.WithLabelValues("ns", "f")); got != 1 {
		t.Fatalf("unavailable nodes = %v, want 1", got)
	}
	m.record(f, Result{Status: metav1.ConditionTrue, Application: v1.ApplicationStatus{ObservedNodes: 3}}, 10*time.Millisecond)
	if got := testutil.ToFloat64(m.converged.WithLabelValues("ns", "f")); got != 1 {
		t.Fatalf("Converged must read 1, got %v", got)
	}
	m.forget("ns", "f")
	for _, g := range []*prometheus.GaugeVec{m.observed, m.unavailable, m.converged} {
		if n := testutil.CollectAndCount(g); n != 0 {
			t.Fatalf("a gone fleet left %d series", n)
		}
	}
}
