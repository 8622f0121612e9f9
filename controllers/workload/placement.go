package workload

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// antiAffinityWeight makes Relaxed placement prefer distinct nodes as strongly as a preference
// can without ever refusing to schedule.
const antiAffinityWeight = 100

// affinity keeps members on Linux nodes in the allowed zones and apart from each other: required
// anti-affinity on the hostname in Strict mode (losing one node loses one member), preferred in
// Relaxed mode.
func affinity(f *v1.CelldFleet) *corev1.Affinity {
	a := &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(f.Spec.Placement.Zones)},
					{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Linux)}},
				}}},
			},
		},
	}
	term := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: Selector(f)},
		TopologyKey:   corev1.LabelHostname,
	}
	if f.Spec.Placement.Mode == v1.PlacementRelaxed {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			{Weight: antiAffinityWeight, PodAffinityTerm: term},
		}}
	} else {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
	}
	return a
}

// spread spreads members over the zones. Strict refuses to schedule a member that would skew
// the zones by more than one and, through minDomains, counts zones without a member yet, so the
// first azCount members land one per zone. Honoring node affinity and taints keeps zones the
// fleet may not use out of the skew. An Ordered Bucket fleet in Strict mode gets no spread: the
// reconciler pins each ordinal to its zone, and a spread could only contradict that pin.
func spread(f *v1.CelldFleet) []corev1.TopologySpreadConstraint {
	strict := f.Spec.Placement.Mode != v1.PlacementRelaxed
	if strict && ordered(f) {
		return nil
	}
	c := corev1.TopologySpreadConstraint{
		MaxSkew:            1,
		TopologyKey:        corev1.LabelTopologyZone,
		WhenUnsatisfiable:  corev1.ScheduleAnyway,
		LabelSelector:      &metav1.LabelSelector{MatchLabels: Selector(f)},
		NodeAffinityPolicy: new(corev1.NodeInclusionPolicyHonor),
		NodeTaintsPolicy:   new(corev1.NodeInclusionPolicyHonor),
	}
	if strict {
		c.WhenUnsatisfiable = corev1.DoNotSchedule
		c.MinDomains = new(f.Spec.Placement.AZCount)
	}
	return []corev1.TopologySpreadConstraint{c}
}

// tolerations shortens how long a member stays bound to an unreachable or not-ready node. nil
// leaves the Kubernetes defaults (300 s, added by admission).
func tolerations(o Options) []corev1.Toleration {
	if o.NodeLossTolerationSeconds == nil {
		return nil
	}
	return []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(*o.NodeLossTolerationSeconds)},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(*o.NodeLossTolerationSeconds)},
	}
}

// schedulingGates holds an Ordered Bucket member until the reconciler has assigned its zone.
func schedulingGates(f *v1.CelldFleet) []corev1.PodSchedulingGate {
	if !ordered(f) {
		return nil
	}
	return []corev1.PodSchedulingGate{{Name: v1.SchedulingGateBucketZone}}
}

// ordered reports whether the fleet runs the Ordered Bucket layout.
func ordered(f *v1.CelldFleet) bool {
	return f.Spec.Profile == v1.ProfileBucket && f.Spec.BucketWorkload == v1.BucketWorkloadOrdered
}
