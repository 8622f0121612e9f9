package workload_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/workload"
)

func relaxed(f *v1.CelldFleet) { f.Spec.Placement.Mode = v1.PlacementRelaxed }

// TestPlacementPerMode: Strict refuses to schedule a skewing member and never puts two members
// on one node; Relaxed prefers both; the zone allowlist and Linux hold in every mode; an Ordered
// fleet in Strict mode relies on its per-ordinal zone instead of a spread.
func TestPlacementPerMode(t *testing.T) {
	for _, c := range []struct {
		name         string
		sample       string
		mutate       func(*v1.CelldFleet)
		spread       corev1.UnsatisfiableConstraintAction // "" = no spread constraint
		minDomains   *int32
		requiredAnti bool
		gated        bool
	}{
		{"PersistentFleet Strict", "persistent", nil, corev1.DoNotSchedule, new(int32(3)), true, false},
		{"PersistentFleet Relaxed", "persistent", relaxed, corev1.ScheduleAnyway, nil, false, false},
		{"Bucket Deployment Strict", "bucket", nil, corev1.DoNotSchedule, new(int32(3)), true, false},
		{"Bucket Deployment Relaxed", "bucket", relaxed, corev1.ScheduleAnyway, nil, false, false},
		{"Ordered Bucket Strict drops the spread", "bucket-ordered", nil, "", nil, true, true},
		{"Ordered Bucket Relaxed", "bucket-ordered", relaxed, corev1.ScheduleAnyway, nil, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mutate []func(*v1.CelldFleet)
			if c.mutate != nil {
				mutate = append(mutate, c.mutate)
			}
			f := fleet(t, c.sample, mutate...)
			spec := workload.PodTemplate(f, testOptions(f)).Spec
			checkZoneAllowlist(t, spec.Affinity, f.Spec.Placement.Zones)
			checkSpread(t, spec.TopologySpreadConstraints, c.spread, c.minDomains, f)
			checkAntiAffinity(t, spec.Affinity.PodAntiAffinity, c.requiredAnti, f)
			gated := slices.Contains(spec.SchedulingGates, corev1.PodSchedulingGate{Name: v1.SchedulingGateBucketZone})
			if gated != c.gated || (!c.gated && len(spec.SchedulingGates) != 0) {
				t.Errorf("scheduling gates %v, want the bucket-zone gate only for Ordered", spec.SchedulingGates)
			}
		})
	}
}

func checkZoneAllowlist(t *testing.T, a *corev1.Affinity, zones []string) {
	t.Helper()
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 {
		t.Fatalf("want one node selector term (requirements ANDed), got %d", len(terms))
	}
	want := []corev1.NodeSelectorRequirement{
		{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: zones},
		{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
	}
	got := terms[0].MatchExpressions
	if len(got) != len(want) {
		t.Fatalf("node affinity %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Operator != want[i].Operator || !slices.Equal(got[i].Values, want[i].Values) {
			t.Errorf("node affinity %v, want %v", got[i], want[i])
		}
	}
}

func checkSpread(t *testing.T, got []corev1.TopologySpreadConstraint, mode corev1.UnsatisfiableConstraintAction, minDomains *int32, f *v1.CelldFleet) {
	t.Helper()
	if mode == "" {
		if len(got) != 0 {
			t.Errorf("want no spread constraint, got %v", got)
		}
		return
	}
	if len(got) != 1 {
		t.Fatalf("want one spread constraint, got %v", got)
	}
	c := got[0]
	if c.TopologyKey != "topology.kubernetes.io/zone" || c.MaxSkew != 1 || c.WhenUnsatisfiable != mode {
		t.Errorf("spread %s/%d/%s, want zone/1/%s", c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable, mode)
	}
	if (c.MinDomains == nil) != (minDomains == nil) || (minDomains != nil && *c.MinDomains != *minDomains) {
		t.Errorf("minDomains %v, want %v", c.MinDomains, minDomains)
	}
	honor := corev1.NodeInclusionPolicyHonor
	if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy != honor || c.NodeTaintsPolicy == nil || *c.NodeTaintsPolicy != honor {
		t.Errorf("spread must honor node affinity and taints, so zones the fleet cannot use do not count")
	}
	if !selects(c.LabelSelector.MatchLabels, f) {
		t.Errorf("spread selector %v must be the fleet UID only", c.LabelSelector.MatchLabels)
	}
}

func checkAntiAffinity(t *testing.T, a *corev1.PodAntiAffinity, required bool, f *v1.CelldFleet) {
	t.Helper()
	var term corev1.PodAffinityTerm
	switch {
	case required && len(a.RequiredDuringSchedulingIgnoredDuringExecution) == 1 && len(a.PreferredDuringSchedulingIgnoredDuringExecution) == 0:
		term = a.RequiredDuringSchedulingIgnoredDuringExecution[0]
	case !required && len(a.PreferredDuringSchedulingIgnoredDuringExecution) == 1 && len(a.RequiredDuringSchedulingIgnoredDuringExecution) == 0:
		w := a.PreferredDuringSchedulingIgnoredDuringExecution[0]
		if w.Weight != 100 {
			t.Errorf("preferred anti-affinity weight %d, want 100", w.Weight)
		}
		term = w.PodAffinityTerm
	default:
		t.Fatalf("anti-affinity %+v, want exactly one %s term", a, map[bool]string{true: "required", false: "preferred"}[required])
	}
	if term.TopologyKey != "kubernetes.io/hostname" || !selects(term.LabelSelector.MatchLabels, f) {
		t.Errorf("anti-affinity term %+v, want the fleet UID per hostname", term)
	}
}

func selects(m map[string]string, f *v1.CelldFleet) bool {
	return len(m) == 1 && m[v1.LabelFleetUID] == string(f.UID)
}

// TestNodeLossTolerations: nil keeps the Kubernetes defaults; a value bounds both node-loss
// taints, which e2e uses to see eviction within its time budget.
func TestNodeLossTolerations(t *testing.T) {
	f := fleet(t, "persistent")
	o := testOptions(f)
	if got := workload.PodTemplate(f, o).Spec.Tolerations; got != nil {
		t.Errorf("default options must leave tolerations to Kubernetes, got %v", got)
	}
	o.NodeLossTolerationSeconds = new(int64(15))
	got := workload.PodTemplate(f, o).Spec.Tolerations
	keys := map[string]bool{}
	for _, tol := range got {
		if tol.Operator != corev1.TolerationOpExists || tol.Effect != corev1.TaintEffectNoExecute || tol.TolerationSeconds == nil || *tol.TolerationSeconds != 15 {
			t.Errorf("toleration %+v, want Exists/NoExecute/15s", tol)
		}
		keys[tol.Key] = true
	}
	if len(got) != 2 || !keys[corev1.TaintNodeNotReady] || !keys[corev1.TaintNodeUnreachable] {
		t.Errorf("tolerations %v, want not-ready and unreachable", got)
	}
	*o.NodeLossTolerationSeconds = 30
	if *got[0].TolerationSeconds != 15 {
		t.Error("the template must not alias the options")
	}
}
