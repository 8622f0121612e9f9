package fleet

import (
	"bytes"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
)

// facts turns the pass's observations into the pure planner's input. desired is the
// StatefulSet the operator renders now (its spec-hash annotation tells whether the live
// template is the operator's).
func (r *Reconciler) facts(s *scope, desired *appsv1.StatefulSet) lifecycle.Facts {
	f := s.fleet
	matches := s.sts != nil && !r.drifted(s.sts, desired.Annotations[v1.AnnotationSpecHash])
	lf := lifecycle.Facts{
		Now:               s.now,
		ReplacementDelay:  r.Options.MemberReplacementDelay,
		AbsorbWindow:      r.Options.AbsorbWindow,
		TerminationMargin: r.Options.TerminationMargin,
		Paused:            paused(f),
		OrderedBucket:     f.Spec.Profile == v1.ProfileBucket,
		Fleet:             f.Name,
		Declared:          f.DesiredReplicas(),
		Workload:          lifecycle.WorkloadFacts(s.sts, matches),
	}
	lf.Applied = lf.Workload.Replicas
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

// drifted reports whether the live workload is not the operator's current rendering: it
// carries another spec hash, or someone else wrote its spec after the operator's last apply
// (a hand edit rolls at once; the operator restores its template on the next reconcile).
func (r *Reconciler) drifted(live metav1.Object, hash string) bool {
	if live.GetAnnotations()[v1.AnnotationSpecHash] != hash {
		return true
	}
	var ours time.Time
	for _, m := range live.GetManagedFields() {
		if m.Manager == FieldOwner && m.Subresource == "" && m.Time != nil && m.Time.After(ours) {
			ours = m.Time.Time
		}
	}
	for _, m := range live.GetManagedFields() {
		if m.Manager == FieldOwner || m.Subresource != "" || m.Time == nil || m.FieldsV1 == nil {
			continue
		}
		if m.Time.After(ours) && touchesSpec(m.FieldsV1.Raw) {
			return true
		}
	}
	return false
}

// touchesSpec reports whether a managed-fields entry owns anything under spec.
func touchesSpec(fieldsV1 []byte) bool {
	return bytes.Contains(fieldsV1, []byte(`"f:spec"`))
}

// replicasOf is spec.replicas with the API's default of 1 for an unset field.
func replicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
