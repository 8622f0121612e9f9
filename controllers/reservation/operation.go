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
