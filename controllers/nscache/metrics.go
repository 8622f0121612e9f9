package nscache

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// childEvents counts the changes of cached fleet children by kind, and whether each woke its
// fleet (woke="false": a resync, or a status-only update of a kind whose status no decision
// reads). Divided by the number of fleets, it says what wakes a fleet how often.
var childEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "celld_operator_child_events_total",
	Help: "Changes of cached fleet children by kind, and whether each woke its fleet",
}, []string{"kind", "woke"})

func init() { metrics.Registry.MustRegister(childEvents) }
