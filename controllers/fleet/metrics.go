package fleet

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
)

// metrics are the celld_fleet_* series, labelled namespace and fleet, removed with the fleet.
// docs/operations.md ("Metrics and alerts") lists them; tests/bundle/monitoring_test.go keeps
// that list, the alerts and the dashboard to the names defined here.
type metrics struct {
	gauges map[string]*prometheus.GaugeVec
	// steps counts the capacity policy's steps by direction (out, in).
	steps *prometheus.CounterVec
	// conditions is the condition state-set: one series per condition type and status, 1 for
	// the status the condition has, 0 for the other two, all with the condition's reason.
	conditions *prometheus.GaugeVec
	// healing counts the self-healing actions taken, by action and reason.
	healing *prometheus.CounterVec
	// statusWrites counts the status writes of all fleets by kind: "change" (something a
	// reader acts on changed) or "counters" (only member counters and the wording of unchanged
	// conditions); statusPaced counts the counters-only writes the memory's pace put off. Unlabelled
	// by fleet: they show where a fleet's requests go while it comes up (docs/performance.md).
	statusWrites *prometheus.CounterVec
	statusPaced  prometheus.Counter

	mu sync.Mutex
	// conditionSeries remembers, per fleet, the label values of the condition series last set,
	// so a reason or a condition that went away leaves no series behind.
	conditionSeries map[types.NamespacedName]map[[2]string]bool
}

var gaugeHelp = map[string]string{
	"desired_replicas":                "Members the fleet is heading to.",
	"applied_replicas":                "Replica count on the fleet's workload.",
	"observed_replicas":               "Non-terminating fleet Pods observed.",
	"ready_replicas":                  "Ready members, counted once the workload observed its spec.",
	"joining_replicas":                "Fleet Pods neither terminating nor ready.",
	"terminating_replicas":            "Fleet Pods being deleted.",
	"replica_observation_valid":       "1 when the Pod inventory was read completely.",
	"blocked":                         "1 while the fleet's Blocked condition is True.",
	"blocked_since_timestamp_seconds": "Unix time at which the current Blocked period began (status.blockedSince); 0 when not blocked.",
	"capacity_desired_replicas":       "Members the capacity policy asks for (status.capacity.desiredReplicas); 0 without spec.capacity.",
}

// conditionTypes are the fleet condition types the state-set reports; a condition of any
// other type is left out, so the type label stays bounded.
var conditionTypes = map[string]bool{
	v1.ConditionReady: true, v1.ConditionProgressing: true, v1.ConditionBlocked: true,
	v1.ConditionMaintenancePaused: true, v1.ConditionDeleting: true, v1.ConditionRoutingReady: true,
	v1.ConditionApplicationConverged: true, v1.ConditionOperationSizeWarning: true,
}

// conditionReasons are the reasons a fleet condition may carry (api/v1alpha1/names.go: the
// lifecycle, RoutingReady and ApplicationConverged reasons); any other value is reported as
// otherReason, so the reason label stays bounded whatever a status holds.
var conditionReasons = map[string]bool{
	v1.ReasonNamespaceAccessDenied: true, v1.ReasonInvalidConfiguration: true, v1.ReasonMaintenancePaused: true,
	v1.ReasonIsolationUnverified: true, v1.ReasonServiceAccountMissing: true, v1.ReasonStorageClassMissing: true,
	v1.ReasonInvalidStorageClass: true, v1.ReasonStorageScopeConflict: true, v1.ReasonInfrastructureBlocked: true,
	v1.ReasonStorageIdentityConflict: true, v1.ReasonLifecycleBlocked: true, v1.ReasonProvisioning: true,
	v1.ReasonProvisioned: true, v1.ReasonLifecycleProgress: true, v1.ReasonMemberUnschedulable: true,
	v1.ReasonMemberCrashLooping: true, v1.ReasonCapacityUncertain: true, v1.ReasonSchedulingBlocked: true,
	v1.ReasonDeletionBlocked: true, v1.ReasonDeleting: true, v1.ReasonNotPaused: true, v1.ReasonNotDeleting: true,
	v1.ReasonBoundedOperation: true, v1.ReasonSeedInitializing: true, v1.ReasonSeedReservationBlocked: true,
	v1.ReasonSeedCancellationBlocked: true,
	// RoutingReady
	v1.ReasonRoutingDisabled: true, v1.ReasonServiceConflict: true, v1.ReasonRoutingError: true,
	v1.ReasonRemovingRoute: true, v1.ReasonGatewayAPIUnavailable: true, v1.ReasonAddressAssigned: true,
	v1.ReasonAwaitingAddress: true, v1.ReasonRouteRejected: true, v1.ReasonRouteAccepted: true,
	v1.ReasonAwaitingAcceptance: true,
	// ApplicationConverged
	v1.ReasonConverged: true, v1.ReasonMixedVersions: true, v1.ReasonConverging: true, v1.ReasonStale: true,
	v1.ReasonUnsupported: true, v1.ReasonMalformed: true, v1.ReasonIncompleteCoverage: true,
	v1.ReasonMembershipChanged: true, v1.ReasonMembershipUnavailable: true, v1.ReasonWorkloadUnavailable: true,
	v1.ReasonFleetDeleting: true,
}

// otherReason stands for a condition reason outside conditionReasons.
const otherReason = "Other"

// conditionStatuses are the states of the state-set, in the order they are set.
var conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}

// boundedReason is reason when it is one of conditionReasons, else otherReason.
func boundedReason(reason string) string {
	if conditionReasons[reason] {
		return reason
	}
	return otherReason
}

// healingNoEvent is the reason label of a self-healing action that sends no event: a Pod
// deleted so that the claim already being deleted under it is released (lifecycle.DeletePod).
const healingNoEvent = "ClaimReleased"

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{gauges: map[string]*prometheus.GaugeVec{}, conditionSeries: map[types.NamespacedName]map[[2]string]bool{}}
	for name, help := range gaugeHelp {
		m.gauges[name] = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "celld_fleet_" + name, Help: help}, []string{"namespace", "fleet"}))
	}
	m.steps = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "celld_fleet_capacity_steps_total",
		Help: "Replica steps the capacity policy took, by direction (out, in)."}, []string{"namespace", "fleet", "direction"}))
	m.conditions = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "celld_fleet_condition",
		Help: "Condition state-set: 1 for the status (True, False, Unknown) the fleet's condition of this type has, 0 for the others; reason is the condition's reason, Other for one the operator does not define."},
		[]string{"namespace", "fleet", "type", "status", "reason"}))
	m.healing = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "celld_fleet_healing_actions_total",
		Help: "Self-healing actions taken, by action (ForceDeletePod, DeletePod, ReplaceMember) and reason (the action's event reason, or ClaimReleased)."},
		[]string{"namespace", "fleet", "action", "reason"}))
	m.statusWrites = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "celld_operator_status_writes_total",
		Help: "Fleet status writes, by kind: change (a condition's status or reason, a count or record a reader acts on) or counters (member counters and the wording of unchanged conditions only)."},
		[]string{"kind"}))
	m.statusPaced = register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "celld_operator_status_writes_paced_total",
		Help: "Counters-only fleet status writes put off because the fleet's status was written less than a second before; the next pass writes the newer status."}))
	return m
}

// register registers c on reg, or returns the collector registered already under its name
// (a second reconciler in the same process, as in tests).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
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

// healed counts a self-healing action once it is taken (its delete succeeded).
func (m *metrics) healed(f *v1.CelldFleet, d lifecycle.Decision) {
	if m == nil || d.Action == lifecycle.None {
		return
	}
	reason := d.Event
	if reason == "" {
		reason = healingNoEvent
	}
	m.healing.WithLabelValues(f.Namespace, f.Name, d.Action.String(), reason).Inc()
}

// statusWritten counts a status write; counters says it changed only counters and wording.
func (m *metrics) statusWritten(counters bool) {
	if m == nil {
		return
	}
	kind := "change"
	if counters {
		kind = "counters"
	}
	m.statusWrites.WithLabelValues(kind).Inc()
}

// paced counts a counters-only status write the pace put off.
func (m *metrics) paced() {
	if m != nil {
		m.statusPaced.Inc()
	}
}

// defaultMetrics registers on controller-runtime's registry, served at /metrics.
func defaultMetrics() *metrics { return newMetrics(crmetrics.Registry) }

func (m *metrics) observe(f *v1.CelldFleet, st *v1.CelldFleetStatus) {
	if m == nil {
		return
	}
	blocked := meta.IsStatusConditionTrue(st.Conditions, v1.ConditionBlocked)
	since := 0.0
	if blocked && st.BlockedSince != nil {
		since = float64(st.BlockedSince.Unix())
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
		"replica_observation_valid": valid, "blocked": b2f(blocked), "blocked_since_timestamp_seconds": since,
		"capacity_desired_replicas": policy,
	} {
		m.gauges[name].WithLabelValues(f.Namespace, f.Name).Set(v)
	}
	m.observeConditions(f, st.Conditions)
}

// observeConditions sets the condition state-set of a fleet and deletes the series of
// conditions or reasons it no longer has. Each condition's three series are set before a
// stale one goes, so a scrape never finds a condition without its state.
func (m *metrics) observeConditions(f *v1.CelldFleet, conditions []metav1.Condition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := types.NamespacedName{Namespace: f.Namespace, Name: f.Name}
	now := map[[2]string]bool{}
	for _, c := range conditions {
		if !conditionTypes[c.Type] {
			continue
		}
		reason := boundedReason(c.Reason)
		now[[2]string{c.Type, reason}] = true
		for _, s := range conditionStatuses {
			m.conditions.WithLabelValues(f.Namespace, f.Name, c.Type, string(s), reason).Set(b2f(c.Status == s))
		}
	}
	for series := range m.conditionSeries[key] {
		if now[series] {
			continue
		}
		for _, s := range conditionStatuses {
			m.conditions.DeleteLabelValues(f.Namespace, f.Name, series[0], string(s), series[1])
		}
	}
	m.conditionSeries[key] = now
}

// forget removes every series of a fleet that no longer exists.
func (m *metrics) forget(namespace, fleet string) {
	if m == nil {
		return
	}
	for _, g := range m.gauges {
		g.DeleteLabelValues(namespace, fleet)
	}
	own := prometheus.Labels{"namespace": namespace, "fleet": fleet}
	m.steps.DeletePartialMatch(own)
	m.healing.DeletePartialMatch(own)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conditions.DeletePartialMatch(own)
	delete(m.conditionSeries, types.NamespacedName{Namespace: namespace, Name: fleet})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
