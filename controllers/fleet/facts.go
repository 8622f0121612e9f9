package fleet

import (
	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
)

// facts turns the pass's observations into the pure planner's input. matches says the live
// workload's spec, other than replicas, is the operator's current rendering (its content
// compared with what the API server stores for the rendering). A StatefulSet fleet's facts
// carry its members, a Deployment fleet's only the Deployment.
func (r *Reconciler) facts(s *scope, matches bool) lifecycle.Facts {
	f := s.fleet
	lf := lifecycle.Facts{
		Now:               s.now,
		ReplacementDelay:  r.Options.MemberReplacementDelay,
		AbsorbWindow:      r.Options.AbsorbWindow,
		TerminationMargin: r.Options.TerminationMargin,
		Paused:            paused(f),
		OrderedBucket:     f.Spec.Profile == v1.ProfileBucket,
		Fleet:             f.Name,
		Declared:          f.DesiredReplicas(),
		Workload:          s.workloadFacts(matches),
	}
	lf.Applied = lf.Workload.Replicas
	if !f.RunsAsStatefulSet() {
		return lf // a Deployment's Pods are no ordinal members: its plan reads the workload alone
	}
	// Every current and declared ordinal has a slot, Pod or not; AddClaim extends the slots
	// to removed members' kept claims.
	lf.Members = make([]lifecycle.Member, max(lf.Workload.Replicas, lf.Declared))
	for i := range s.pods {
		lf.AddPod(&s.pods[i])
	}
	for i := range s.namedClaims {
		lf.AddClaim(&s.namedClaims[i], f.UID)
	}
	return lf
}
