package reservation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// MaxTuningRecord bounds the reserved-tuning annotation. A record is read on every reconcile,
// so it is small by construction and refused beyond this size.
const MaxTuningRecord = 64 << 10

// Reasons Matches gives when the fleet may use the reservation.
const (
	MatchCurrent  = "the fleet's spec reproduces the reserved hash"
	MatchRecorded = "the fleet's spec reproduces the reserved hash with its creation-time tuning from the reserved-tuning record"
)

// tuning is the reserved-tuning record: the fleet's execution, lifecycle, env and telemetry as
// it was created.
type tuning struct {
	Execution *v1.ExecutionSpec `json:"execution,omitempty"`
	Lifecycle *v1.LifecycleSpec `json:"lifecycle,omitempty"`
	Env       []v1.EnvVar       `json:"env,omitempty"`
	Telemetry *v1.TelemetrySpec `json:"telemetry,omitempty"`
}

// TuningRecord is the reserved-tuning record of the fleet's current (defaulted) tuning. Write
// it only while the fleet still reproduces the reserved hash with its own tuning (see
// NeedsTuningRecord): it then records the creation-time values. A record over
// MaxTuningRecord (large literal env values) is an error; such a fleet keeps its tuning fixed.
func TuningRecord(f *v1.CelldFleet) (string, error) {
	c := v1.CelldFleet{Spec: *f.Spec.DeepCopy()}
	c.Default()
	s := &c.Spec
	b, err := json.Marshal(tuning{Execution: s.Execution, Lifecycle: s.Lifecycle, Env: s.Env, Telemetry: s.Telemetry})
	if err != nil {
		return "", fmt.Errorf("encode the reserved-tuning record: %w", err)
	}
	if len(b) > MaxTuningRecord {
		return "", fmt.Errorf("the reserved-tuning record is %d bytes, over the %d-byte bound", len(b), MaxTuningRecord)
	}
	return string(b), nil
}

// Matches reports whether fleet f may use reservation res, and why. The reservation must be
// permanent (no owner reference, not being deleted), reserved to this very fleet (UID,
// namespace, name; a fleet recreated under the same name has a new UID and never matches)
// and to its bucket scope, and the fleet must reproduce the frozen hash, in the layout of
// this release or of the release that wrote it (see frozenLayout): with its own spec, or
// with its execution, lifecycle, env and telemetry replaced by the reserved-tuning record.
// The record is trusted only because it must reproduce the frozen hash, so it can only
// restore creation-time values; a record describing anything else matches nothing.
func Matches(res *v1.CelldStorageReservation, f *v1.CelldFleet) (bool, string) {
	if why := identity(res, f); why != "" {
		return false, why
	}
	initial, frozen := res.Spec.InitialReplicas, res.Spec.SpecHash
	if l := frozenLayout(f, initial, frozen); l != "" {
		return true, matched(MatchCurrent, l)
	}
	raw, ok := res.Annotations[v1.AnnotationReservedTuning]
	if !ok || previewFleet(f) {
		// A preview fleet's tuning is never recorded, so a record on its reservation (written
		// by hand) is not trusted either.
		return false, "the fleet's storage-relevant spec differs from the one reserved at creation"
	}
	t, err := readRecord(raw)
	if err != nil {
		return false, "the fleet's storage-relevant spec differs from the one reserved at creation, and " + err.Error()
	}
	if l := frozenLayout(withTuning(f, t), initial, frozen); l != "" {
		return true, matched(MatchRecorded, l)
	}
	return false, "the fleet's storage-relevant spec differs from the one reserved at creation, even with the reserved-tuning record"
}

// matched is the reason for a match in layout l: the plain reason in this release's layout,
// naming the release that froze the hash otherwise.
func matched(reason string, l layout) string {
	if l == layoutCurrent {
		return reason
	}
	return reason + ", as " + string(l) + " hashed it"
}

// NeedsTuningRecord reports whether the reconciler should write TuningRecord(f) to res. It
// should when the fleet reproduces the frozen hash with its own tuning (in any layout), so its
// tuning is the creation-time tuning, and the reservation has no record that verifies: none (a
// reservation written before records existed, or created without one), or an invalid one (not
// strictly one bounded object, or not reproducing the hash). It never should when the fleet's
// record does not fit in MaxTuningRecord, nor for a preview fleet, whose tuning is never
// recorded: both keep their tuning fixed. A record that
// verifies is never rewritten, whatever its spelling, so a settled fleet writes nothing.
func NeedsTuningRecord(res *v1.CelldStorageReservation, f *v1.CelldFleet) bool {
	initial, frozen := res.Spec.InitialReplicas, res.Spec.SpecHash
	if previewFleet(f) || identity(res, f) != "" || frozenLayout(f, initial, frozen) == "" {
		return false
	}
	if raw, ok := res.Annotations[v1.AnnotationReservedTuning]; ok {
		if t, err := readRecord(raw); err == nil && frozenLayout(withTuning(f, t), initial, frozen) != "" {
			return false
		}
	}
	_, err := TuningRecord(f)
	return err == nil
}

// identity checks everything but the hash; it returns why the fleet may not use res, or "".
func identity(res *v1.CelldStorageReservation, f *v1.CelldFleet) string {
	s, st := &res.Spec, &f.Spec.Storage
	switch {
	case len(res.OwnerReferences) > 0:
		return "the reservation has owner references, so garbage collection could delete it"
	case res.DeletionTimestamp != nil:
		return "the reservation is being deleted"
	case s.OwnerKind != "":
		return "the bucket is reserved to " + Holder(res)
	case f.UID == "":
		return "the fleet has no UID yet"
	case s.FleetUID != string(f.UID):
		return "the bucket is reserved to fleet UID " + s.FleetUID
	case s.FleetNamespace != f.Namespace || s.FleetName != f.Name:
		return "the bucket is reserved to fleet " + s.FleetNamespace + "/" + s.FleetName
	case s.Bucket != st.Bucket || s.Prefix != st.Prefix || s.Endpoint != endpoint(f):
		return "the reservation is for another bucket scope"
	}
	return ""
}

// readRecord decodes a reserved-tuning record strictly: bounded size, exactly one JSON object,
// no field the record does not define.
func readRecord(raw string) (tuning, error) {
	var t tuning
	if len(raw) > MaxTuningRecord {
		return t, fmt.Errorf("the reserved-tuning record is over %d bytes", MaxTuningRecord)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return tuning{}, fmt.Errorf("the reserved-tuning record is invalid: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return tuning{}, errors.New("the reserved-tuning record is invalid: data after the object")
	}
	return t, nil
}

// withTuning is a copy of f with its tuning replaced by t.
func withTuning(f *v1.CelldFleet, t tuning) *v1.CelldFleet {
	c := &v1.CelldFleet{ObjectMeta: f.ObjectMeta, Spec: f.Spec}
	c.Spec.Execution, c.Spec.Lifecycle, c.Spec.Env, c.Spec.Telemetry = t.Execution, t.Lifecycle, t.Env, t.Telemetry
	return c
}
