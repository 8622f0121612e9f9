package application

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// metrics are the observer's series, labelled namespace and fleet like the lifecycle's
// celld_fleet_* series, and removed when the fleet is gone.
type metrics struct {
	observed, unavailable, converged *prometheus.GaugeVec
	duration                         prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	labels := []string{"namespace", "fleet"}
	m := &metrics{
		observed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "celld_fleet_application_observed_nodes",
			Help: "Members freshly observed by the last /state collection."}, labels),
		unavailable: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "celld_fleet_application_unavailable_nodes",
			Help: "Members the last /state collection could not observe freshly."}, labels),
		converged: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "celld_fleet_application_converged",
			Help: "1 when ApplicationConverged is True, 0 when False, -1 when Unknown."}, labels),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "celld_fleet_application_collection_seconds",
			Help: "Duration of one fleet's /state collection (10 s deadline).", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
	}
	for _, c := range []prometheus.Collector{m.observed, m.unavailable, m.converged, m.duration} {
		if err := reg.Register(c); err != nil {
			if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
				switch c.(type) {
				case prometheus.Histogram:
					m.duration = are.ExistingCollector.(prometheus.Histogram)
				}
			}
		}
	}
	return m
}

func defaultMetrics() *metrics { return newMetrics(crmetrics.Registry) }

// record publishes one collection's result.
func (m *metrics) record(f *v1.CelldFleet, r Result, took time.Duration) {
	if m == nil {
		return
	}
	m.duration.Observe(took.Seconds())
	m.observed.WithLabelValues(f.Namespace, f.Name).Set(float64(r.Application.ObservedNodes))
	m.unavailable.WithLabelValues(f.Namespace, f.Name).Set(float64(r.Application.UnavailableNodes))
	v := -1.0
	switch r.Status {
	case metav1.ConditionTrue:
		v = 1
	case metav1.ConditionFalse:
		v = 0
	}
	m.converged.WithLabelValues(f.Namespace, f.Name).Set(v)
}

// forget removes a gone fleet's series.
func (m *metrics) forget(namespace, name string) {
	if m == nil {
		return
	}
	for _, g := range []*prometheus.GaugeVec{m.observed, m.unavailable, m.converged} {
		g.DeleteLabelValues(namespace, name)
	}
}
