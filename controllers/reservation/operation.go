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

// Supersede reads the annotation value. This release's record (version 1, the fleet's UID, and
// capacity state only) is kept as it is. Anything else was written by an earlier release (the
// strict executor of v0.0.5, the one-disruption controller), which kept claim identities,
// operations and disruption times there: the record is rewritten to its capacity state alone,
// or removed when it has none, and an operation it held in flight is named so the reconciler
// reports it superseded. Members then roll onto the current template; nothing of the old
// operation is carried out.
func Supersede(value string, fleetUID types.UID) Superseded {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(value), &fields); err != nil {
		return Superseded{Changed: true, Remove: true} // unreadable: nothing can be kept
	}
	current := true
	for k := range fields {
		if k != "version" && k != "fleetUID" && k != "capacity" {
			current = false
		}
	}
	var r record
	if current && json.Unmarshal([]byte(value), &r) == nil && r.Version == OperationVersion && r.FleetUID == fleetUID {
		return Superseded{}
	}
	out := Superseded{Changed: true, Operation: legacyOperation(fields)}
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

// legacyOperation names the operation an earlier record held in flight: "operation" (one
// object) or the last entry of "operations", each with a kind and an id.
func legacyOperation(fields map[string]json.RawMessage) string {
	type op struct {
		Kind string `json:"kind"`
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	var found *op
	if raw, ok := fields["operation"]; ok {
		o := &op{}
		if json.Unmarshal(raw, o) == nil {
			found = o
		}
	}
	if raw, ok := fields["operations"]; ok && found == nil {
		var list []op
		if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
			found = &list[len(list)-1]
		}
	}
	if found == nil {
		return ""
	}
	kind := found.Kind
	if kind == "" {
		kind = found.Type
	}
	if kind == "" {
		kind = "unnamed"
	}
	id := found.ID
	if id == "" {
		id = "without an id"
	}
	return fmt.Sprintf("%s operation %s", kind, id)
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
	var r record
	if json.Unmarshal([]byte(value), &r) != nil || r.Version != OperationVersion || r.FleetUID != fleetUID {
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
