package reservation

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// OperationVersion is the version of the current-operation record this release writes: capacity
// policy state and nothing else.
const OperationVersion = 1

// record is the current-operation annotation of this release.
type record struct {
	Version  int             `json:"version"`
	FleetUID types.UID       `json:"fleetUID"`
	Capacity json.RawMessage `json:"capacity,omitempty"`
}

// Superseded is what to do with a current-operation annotation an earlier release may have
// left on the reservation.
type Superseded struct {
	// Changed: the annotation is not this release's record and must be rewritten (Value) or,
	// when Remove, deleted.
	Changed bool
	Remove  bool
	Value   string
	// Operation names the in-flight operation the earlier release recorded, for the
	// OperationSuperseded event; empty when it recorded none.
	Operation string
}

// Supersede reads the annotation value. This release's record (exactly the keys "version",
// "fleetUID" and "capacity": version 1, the fleet's UID, and capacity state only) is kept as it
// is. Anything else was written by an earlier release (v0.0.5's strict executor, the
// one-disruption controller; earlier.go describes their records), which kept claim identities,
// operations and disruption times there: the record is rewritten to this release's capacity
// state alone, or removed when it has none, and an operation it held in flight is named so the
// reconciler reports it superseded. Members then roll onto the current template; nothing of the
// old operation is carried out. An earlier release's "Capacity" is another state than this
// release's and is not carried over.
func Supersede(value string, fleetUID types.UID) Superseded {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(value), &fields); err != nil {
		return Superseded{Changed: true, Remove: true} // unreadable: nothing can be kept
	}
	if r, ok := ownRecord(fields, value); ok && r.Version == OperationVersion && r.FleetUID == fleetUID {
		return Superseded{}
	}
	out := Superseded{Changed: true, Operation: earlierOperation(fields)}
	if c := fields["capacity"]; len(c) > 0 && string(c) != "null" {
		raw, err := json.Marshal(record{Version: OperationVersion, FleetUID: fleetUID, Capacity: c})
		if err == nil {
			out.Value = string(raw)
			return out
		}
	}
	out.Remove = true
	return out
}

// ownRecord decodes value as this release's record when its keys are exactly this release's.
// encoding/json matches keys case-insensitively, so the key check is what keeps an earlier
// release's {"Version":1,"FleetUID":…,"Capacity":…} from passing for this release's record.
func ownRecord(fields map[string]json.RawMessage, value string) (record, bool) {
	for k := range fields {
		if k != "version" && k != "fleetUID" && k != "capacity" {
			return record{}, false
		}
	}
	var r record
	if json.Unmarshal([]byte(value), &r) != nil {
		return record{}, false
	}
	return r, true
}

// MaxOperationBytes bounds the current-operation annotation; above OperationWarningBytes (half
// of it) the fleet reports OperationSizeWarning. This release's record holds at most the
// history of one addition's 100 incumbents, a few tens of KiB.
const (
	MaxOperationBytes     = 180 << 10
	OperationWarningBytes = MaxOperationBytes / 2
)

// CapacityState returns the capacity state of this release's record for the fleet, or nil when
// the annotation is absent, another fleet's, or not this release's (Supersede rewrites those).
func CapacityState(value string, fleetUID types.UID) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(value), &fields) != nil {
		return nil
	}
	r, ok := ownRecord(fields, value)
	if !ok || r.Version != OperationVersion || r.FleetUID != fleetUID {
		return nil
	}
	if len(r.Capacity) == 0 || string(r.Capacity) == "null" {
		return nil
	}
	return r.Capacity
}

// CapacityAnnotation is the annotation value recording state for the fleet. A value over
// MaxOperationBytes is refused: the reservation never carries more.
func CapacityAnnotation(fleetUID types.UID, state json.RawMessage) (string, error) {
	raw, err := json.Marshal(record{Version: OperationVersion, FleetUID: fleetUID, Capacity: state})
	if err != nil {
		return "", err
	}
	if len(raw) > MaxOperationBytes {
		return "", fmt.Errorf("the capacity-policy state needs %d bytes, more than the %d the current-operation annotation may hold", len(raw), MaxOperationBytes)
	}
	return string(raw), nil
}
