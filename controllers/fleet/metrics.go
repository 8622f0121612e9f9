package fleet

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// metrics are the celld_fleet_* gauges, labelled namespace and fleet, removed with the fleet.
type metrics struct {
	gauges map[string]*prometheus.GaugeVec
	// steps counts the capacity policy's steps by direction (out, in).
	steps *prometheus.CounterVec
}

var gaugeHelp = map[string]string{
	"desired_replicas":          "Members the fleet is heading to.",
	"applied_replicas":          "Replica count on the fleet's workload.",
	"observed_replicas":         "Non-terminating fleet Pods observed.",
	"ready_replicas":            "Ready members, counted once the workload observed its spec.",
	"joining_replicas":          "Fleet Pods neither terminating nor ready.",
	"terminating_replicas":      "Fleet Pods being deleted.",
	"replica_observation_valid": "1 when the Pod inventory was read completely.",
	"blocked":                   "1 while the fleet's Blocked condition is True.",
	"blocked_age_seconds":       "Seconds since the current Blocked period began; 0 when not blocked.",
	"capacity_desired_replicas": "Members the capacity policy asks for (status.capacity.desiredReplicas); 0 without spec.capacity.",
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{gauges: map[string]*prometheus.GaugeVec{}}
	for name, help := range gaugeHelp {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "celld_fleet_" + name, Help: help}, []string{"namespace", "fleet"})
		if err := reg.Register(g); err != nil {
			if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
				g = are.ExistingCollector.(*prometheus.GaugeVec)
			}
		}
		m.gauges[name] = g
	}
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "celld_fleet_capacity_steps_total",
		Help: "Replica steps the capacity policy took, by direction (out, in)."}, []string{"namespace", "fleet", "direction"})
	if err := reg.Register(m.steps); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			m.steps = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return m
}

// step counts a capacity policy step.
func (m *metrics) step(f *v1.CelldFleet, out bool) {
	if m == nil {
		return
	}
	direction := "in"
	if out {
		direction = "out"
	}
	m.steps.WithLabelValues(f.Namespace, f.Name, direction).Inc()
}

// defaultMetrics registers on controller-runtime's registry, served at /metrics.
func defaultMetrics() *metrics { return newMetrics(crmetrics.Registry) }

func (m *metrics) observe(f *v1.CelldFleet, st *v1.CelldFleetStatus) {
	if m == nil {
		return
	}
	blocked := meta.IsStatusConditionTrue(st.Conditions, v1.ConditionBlocked)
	age := 0.0
	if blocked && st.BlockedSince != nil {
		age = time.Since(st.BlockedSince.Time).Seconds()
	}
	valid := 0.0
	if st.ReplicaObservationValid {
		valid = 1
	}
	policy := 0.0
	if st.Capacity != nil {
		policy = float64(st.Capacity.DesiredReplicas)
	}
	for name, v := range map[string]float64{
		"desired_replicas": float64(st.DesiredReplicas), "applied_replicas": float64(st.AppliedReplicas),
		"observed_replicas": float64(st.ObservedReplicas), "ready_replicas": float64(st.ReadyReplicas),
		"joining_replicas": float64(st.JoiningReplicas), "terminating_replicas": float64(st.TerminatingReplicas),
		"replica_observation_valid": valid, "blocked": b2f(blocked), "blocked_age_seconds": age,
		"capacity_desired_replicas": policy,
	} {
		m.gauges[name].WithLabelValues(f.Namespace, f.Name).Set(v)
	}
}

// forget removes every series of a fleet that no longer exists.
func (m *metrics) forget(namespace, fleet string) {
	if m == nil {
		return
	}
	for _, g := range m.gauges {
		g.DeleteLabelValues(namespace, fleet)
	}
	m.steps.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "fleet": fleet})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
