package reservation

import (
	"bytes"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// A reservation is permanent, so the hash an earlier release froze in it must verify for the
// fleet that created it for as long as the fleet lives. Those releases hashed other layouts of
// the same spec; new reservations always get SpecHash.
//
//   - v0.0.2 hashed its spec.qualification, since removed from the API, before everything
//     else: the current layout with "qualification":"Experimental" before "profile".
//     Experimental is the value the reference records for it; a hash of any other value is
//     not verified (the object no longer says what it was).
//   - v0.0.8 and v0.0.9 hashed spec.export, defaulted, with the rest: the current layout with
//     export in its place after telemetry. Export has since left the hash so it may change,
//     but such a reservation froze it: it verifies only while export is exactly what it was
//     (recreate the fleet to change export). A fleet without export hashed the current layout.
type layout string

const (
	layoutCurrent       layout = "current"
	layoutQualification layout = "v0.0.2"
	layoutExport        layout = "v0.0.8/v0.0.9"
)

// profileFirst is how the current layout begins: profile is the first field of the spec and
// never omitted, so v0.0.2's layout is the current bytes with its qualification spliced in.
var (
	profileFirst  = []byte(`{"profile":`)
	qualification = []byte(`{"qualification":"Experimental",`)
)

// frozenLayout names the layout in which f's spec, with initialReplicas in place of replicas,
// hashes to want, or returns "" when none does. The layouts are disjoint (only v0.0.2's has a
// qualification member, only v0.0.8/v0.0.9's an export member), so accepting all of them lets
// no other spec through.
func frozenLayout(f *v1.CelldFleet, initialReplicas int32, want string) layout {
	if want == "" {
		return "" // a hash that failed to encode is "", and must never match an empty one
	}
	d := defaulted(&f.Spec)
	export := d.Export
	h := excluded(d, initialReplicas)
	b := specJSON(h)
	if digest(b) == want {
		return layoutCurrent
	}
	if bytes.HasPrefix(b, profileFirst) {
		legacy := make([]byte, 0, len(qualification)+len(b)-1)
		legacy = append(append(legacy, qualification...), b[1:]...)
		if digest(legacy) == want {
			return layoutQualification
		}
	}
	if export != nil {
		h.Export = export
		if digest(specJSON(h)) == want {
			return layoutExport
		}
	}
	return ""
}
