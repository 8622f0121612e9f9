package fleet

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
)

func TestMetricsFollowTheFleetAndLeaveWithIt(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f"}}
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st := &v1.CelldFleetStatus{DesiredReplicas: 3, AppliedReplicas: 3, ReadyReplicas: 2, ReplicaObservationValid: true,
		BlockedSince: &metav1.Time{Time: since},
		Conditions:   []metav1.Condition{{Type: v1.ConditionBlocked, Status: metav1.ConditionTrue, Reason: v1.ReasonMemberUnschedulable}}}
	m.observe(f, st)
	if got := testutil.ToFloat64(m.gauges["ready_replicas"].WithLabelValues("ns", "f")); got != 2 {
		t.Fatalf("celld_fleet_ready_replicas = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.gauges["blocked"].WithLabelValues("ns", "f")); got != 1 {
		t.Fatalf("celld_fleet_blocked = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.gauges["blocked_since_timestamp_seconds"].WithLabelValues("ns", "f")); got != float64(since.Unix()) {
		t.Fatalf("celld_fleet_blocked_since_timestamp_seconds = %v, want %d (status.blockedSince)", got, since.Unix())
	}
	m.healed(f, lifecycle.Decision{Action: lifecycle.ForceDeletePod, Event: v1.EventMemberForceDeleted})
	m.step(f, true)

	// no longer blocked: the timestamp goes to 0
	st.Conditions = []metav1.Condition{{Type: v1.ConditionBlocked, Status: metav1.ConditionFalse, Reason: v1.ReasonProvisioned}}
	m.observe(f, st)
	if got := testutil.ToFloat64(m.gauges["blocked_since_timestamp_seconds"].WithLabelValues("ns", "f")); got != 0 {
		t.Fatalf("celld_fleet_blocked_since_timestamp_seconds = %v once Blocked is False, want 0", got)
	}

	m.forget("ns", "f")
	n, err := testutil.GatherAndCount(reg)
	// the operator-wide status counters carry no fleet: one series, the paced total
	if err != nil || n != 1 {
		t.Fatalf("a deleted fleet must leave no series, %d remain besides the operator's (%v)", n-1, err)
	}
}

// TestConditionStateSet: each known condition has three series (True, False, Unknown), exactly
// one of them 1, labelled with the condition's reason; a reason the operator does not define is
// Other; a changed reason or a condition that went away leaves no series behind.
func TestConditionStateSet(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f"}}
	other := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	m.observe(other, &v1.CelldFleetStatus{Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonProvisioned}}})

	m.observe(f, &v1.CelldFleetStatus{Conditions: []metav1.Condition{
		{Type: v1.ConditionBlocked, Status: metav1.ConditionTrue, Reason: v1.ReasonMaintenancePaused},
		{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: "SomethingAUserWrote"},
		{Type: "NotAFleetCondition", Status: metav1.ConditionTrue, Reason: v1.ReasonProvisioned},
	}})
	want := `
# HELP celld_fleet_condition Condition state-set: 1 for the status (True, False, Unknown) the fleet's condition of this type has, 0 for the others; reason is the condition's reason, Other for one the operator does not define.
# TYPE celld_fleet_condition gauge
celld_fleet_condition{fleet="f",namespace="ns",reason="MaintenancePaused",status="False",type="Blocked"} 0
celld_fleet_condition{fleet="f",namespace="ns",reason="MaintenancePaused",status="True",type="Blocked"} 1
celld_fleet_condition{fleet="f",namespace="ns",reason="MaintenancePaused",status="Unknown",type="Blocked"} 0
celld_fleet_condition{fleet="f",namespace="ns",reason="Other",status="False",type="Ready"} 1
celld_fleet_condition{fleet="f",namespace="ns",reason="Other",status="True",type="Ready"} 0
celld_fleet_condition{fleet="f",namespace="ns",reason="Other",status="Unknown",type="Ready"} 0
celld_fleet_condition{fleet="g",namespace="ns",reason="Provisioned",status="False",type="Ready"} 0
celld_fleet_condition{fleet="g",namespace="ns",reason="Provisioned",status="True",type="Ready"} 1
celld_fleet_condition{fleet="g",namespace="ns",reason="Provisioned",status="Unknown",type="Ready"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "celld_fleet_condition"); err != nil {
		t.Fatal(err)
	}

	// the pause ends: Blocked turns False with another reason, Ready goes away
	m.observe(f, &v1.CelldFleetStatus{Conditions: []metav1.Condition{
		{Type: v1.ConditionBlocked, Status: metav1.ConditionFalse, Reason: v1.ReasonProvisioned},
	}})
	want = `
# HELP celld_fleet_condition Condition state-set: 1 for the status (True, False, Unknown) the fleet's condition of this type has, 0 for the others; reason is the condition's reason, Other for one the operator does not define.
# TYPE celld_fleet_condition gauge
celld_fleet_condition{fleet="f",namespace="ns",reason="Provisioned",status="False",type="Blocked"} 1
celld_fleet_condition{fleet="f",namespace="ns",reason="Provisioned",status="True",type="Blocked"} 0
celld_fleet_condition{fleet="f",namespace="ns",reason="Provisioned",status="Unknown",type="Blocked"} 0
celld_fleet_condition{fleet="g",namespace="ns",reason="Provisioned",status="False",type="Ready"} 0
celld_fleet_condition{fleet="g",namespace="ns",reason="Provisioned",status="True",type="Ready"} 1
celld_fleet_condition{fleet="g",namespace="ns",reason="Provisioned",status="Unknown",type="Ready"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "celld_fleet_condition"); err != nil {
		t.Fatal(err)
	}

	m.forget("ns", "f")
	if n := testutil.CollectAndCount(m.conditions); n != 3 {
		t.Fatalf("after the fleet is forgotten %d condition series remain, want only the other fleet's 3", n)
	}
}

// TestHealingActionsAreCountedByActionAndReason: one increment per action taken, labelled with
// the action and its event reason; an action without an event is ClaimReleased; no decision,
// no count.
func TestHealingActionsAreCountedByActionAndReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f"}}
	m.healed(f, lifecycle.Decision{Action: lifecycle.None, Reason: v1.ReasonProvisioning})
	m.healed(f, lifecycle.Decision{Action: lifecycle.ReplaceMember, Event: v1.EventMemberReplaced})
	m.healed(f, lifecycle.Decision{Action: lifecycle.ReplaceMember, Event: v1.EventMemberReplaced})
	m.healed(f, lifecycle.Decision{Action: lifecycle.ReplaceMember, Event: v1.EventMemberDiskLost})
	m.healed(f, lifecycle.Decision{Action: lifecycle.DeletePod, Event: v1.EventMemberRecreated})
	m.healed(f, lifecycle.Decision{Action: lifecycle.DeletePod})
	m.healed(f, lifecycle.Decision{Action: lifecycle.ForceDeletePod, Event: v1.EventMemberForceDeleted})
	want := `
# HELP celld_fleet_healing_actions_total Self-healing actions taken, by action (ForceDeletePod, DeletePod, ReplaceMember) and reason (the action's event reason, or ClaimReleased).
# TYPE celld_fleet_healing_actions_total counter
celld_fleet_healing_actions_total{action="DeletePod",fleet="f",namespace="ns",reason="ClaimReleased"} 1
celld_fleet_healing_actions_total{action="DeletePod",fleet="f",namespace="ns",reason="MemberRecreated"} 1
celld_fleet_healing_actions_total{action="ForceDeletePod",fleet="f",namespace="ns",reason="MemberForceDeleted"} 1
celld_fleet_healing_actions_total{action="ReplaceMember",fleet="f",namespace="ns",reason="MemberDiskLost"} 1
celld_fleet_healing_actions_total{action="ReplaceMember",fleet="f",namespace="ns",reason="MemberReplaced"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "celld_fleet_healing_actions_total"); err != nil {
		t.Fatal(err)
	}
	var nilMetrics *metrics
	nilMetrics.healed(f, lifecycle.Decision{Action: lifecycle.DeletePod}) // a reconciler without metrics
}

// TestConditionReasonsCoverTheAPI: every fleet condition reason and type api/v1alpha1/names.go
// defines is reported as itself, not as Other. The CelldPreview reasons are not fleet
// reasons and are left out.
func TestConditionReasonsCoverTheAPI(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "api", "v1alpha1", "names.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	reasons, types := 0, 0
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST || strings.Contains(gd.Doc.Text(), "CelldPreview") {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				value, _ := strconv.Unquote(lit.Value)
				switch {
				case strings.HasPrefix(name.Name, "Reason"):
					reasons++
					if boundedReason(value) != value {
						t.Errorf("v1.%s (%q) is a fleet condition reason missing from conditionReasons: celld_fleet_condition reports it as Other", name.Name, value)
					}
				case strings.HasPrefix(name.Name, "Condition"):
					types++
					if !conditionTypes[value] {
						t.Errorf("v1.%s (%q) is a fleet condition type missing from conditionTypes: celld_fleet_condition leaves it out", name.Name, value)
					}
				}
			}
		}
	}
	if reasons < 20 || types < 5 {
		t.Fatalf("found %d reasons and %d condition types in names.go; the scan is broken", reasons, types)
	}
	if boundedReason(v1.ReasonPreviewReady) != otherReason {
		t.Errorf("a CelldPreview reason is not a fleet condition reason and must be Other")
	}
}
