package reservation

import (
	"encoding/json"
	"fmt"
)

// The current-operation records earlier releases left on a reservation, as their code wrote them
// (the prior art, ewhauser/celld-operator; see docs/versioning.md "Records earlier releases left
// on the reservation"). Both are one Go struct marshalled by encoding/json without tags, so every
// key is a capitalized Go field name, never a lowercase one:
//
//   - v0.0.5, the strict executor (internal/controller/state.go before ADR 0023):
//     {"Version":1,"FleetUID":…,"WorkloadUID":…,"Initial":3,"Applied":3,"RuntimeImage":…,
//     "Claims":{"data-f-0":"<claim uid>",…},"Operation":{"ID":…,"Kind":"Restart"|"Upgrade"|
//     "Scale"|"Delete","Phase":…,"StartedAt":…,"Deadline":…,…,"Targets":[…]},"RestartToken":…,
//     "Completion":{…},"Capacity":{…}}. "Operation" is present while an operation is in flight.
//   - The one-disruption controller (ADR 0023, never released; state.go and persistent.go of that
//     time): the same struct without an operation of its own, plus "LastDisruption":
//     {"Version":1,"FleetUID":…,"WorkloadUID":…,"Initial":3,"Applied":3,"RuntimeImage":…,
//     "Claims":{},"RestartToken":…,"Completion":{"ID":…,"Kind":…,"Outcome":"Superseded","At":…},
//     "Capacity":{…},"LastDisruption":"2026-…Z"}. It kept "Operation" only to read v0.0.5's
//     record and never wrote one: on reading a strict operation it recorded it as a Completion
//     with Outcome "Superseded" and wrote the record without it. Its own work in flight, a
//     rolling update it drove by deleting outdated Pods of an OnDelete StatefulSet one at a time,
//     is recorded nowhere but in the StatefulSet, its Pods and LastDisruption.
//
// So an operation in flight is named from "Operation" alone. A Completion is an operation the
// one-disruption controller already dropped (and reported in its status), not one in flight, and
// is not reported again. "Capacity" is the prior art's capacity-policy state (Load, Stamps,
// Addition, LastAction, …), which is not this release's capacity history and is never carried
// into this release's record: the policy starts from no history, which only delays its next step.
//
// The lowercase "operation" object ({"kind":…,"id":…}) is not a format any release wrote: it was
// inferred before the prior art's code was read, and fixtures of this repository still use it
// (tests/e2e/upgrade_test.go, controllers/fleet). It is still named, harmlessly: the record is
// rewritten or removed whatever its shape. The list "operations" that was once inferred for the
// one-disruption controller never existed, and is not read.
const (
	strictOperationKey   = "Operation" // v0.0.5's operation in flight
	inferredOperationKey = "operation" // the inferred shape of this repository's older fixtures
)

// earlierOperation names the operation in flight an earlier release's record holds, or "" when
// it holds none (the one-disruption controller's own record, claim identities alone, a record
// this release cannot read).
func earlierOperation(fields map[string]json.RawMessage) string {
	raw, ok := fields[strictOperationKey]
	if !ok {
		raw, ok = fields[inferredOperationKey]
	}
	if !ok || string(raw) == "null" {
		return ""
	}
	// Field names match case-insensitively: "ID"/"Kind" of v0.0.5, "id"/"kind" of the fixtures.
	var op struct{ ID, Kind string }
	if json.Unmarshal(raw, &op) != nil {
		return ""
	}
	kind, id := op.Kind, op.ID
	if kind == "" {
		kind = "unnamed"
	}
	if id == "" {
		id = "without an id"
	}
	return fmt.Sprintf("%s operation %s", kind, id)
}
