package reservation

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSupersedeKeepsOnlyThisReleasesCapacityRecord(t *testing.T) {
	const uid = "fleet-uid"
	for _, c := range []struct {
		name      string
		value     string
		changed   bool
		remove    bool
		rewritten string
		operation string
	}{
		{"this release's record is kept", `{"version":1,"fleetUID":"fleet-uid","capacity":{"lastScaleOut":"2026-11-30T10:00:00Z"}}`, false, false, "", ""},
		{"this release's record without capacity is kept", `{"version":1,"fleetUID":"fleet-uid"}`, false, false, "", ""},
		{"another fleet's record is rewritten for this fleet", `{"version":1,"fleetUID":"other","capacity":{"x":1}}`, true, false, `{"version":1,"fleetUID":"fleet-uid","capacity":{"x":1}}`, ""},
		{"v0.0.5's strict operation in flight is dropped and named", `{"Version":1,"FleetUID":"fleet-uid","WorkloadUID":"w","Initial":3,"Applied":3,"RuntimeImage":"i","Claims":{"data-f-0":"uid-a"},"Operation":{"ID":"op-7","Kind":"Restart","Phase":"Requesting"}}`, true, true, "", "Restart operation op-7"},
		{"the one-disruption controller's record names no operation", `{"Version":1,"FleetUID":"fleet-uid","WorkloadUID":"w","Initial":3,"Applied":3,"RuntimeImage":"i","Claims":{},"RestartToken":"2","LastDisruption":"2026-11-30T10:04:05Z"}`, true, true, "", ""},
		{"an earlier release's Capacity is not this release's capacity state", `{"Version":1,"FleetUID":"fleet-uid","WorkloadUID":"w","Initial":3,"Applied":3,"RuntimeImage":"i","Claims":{},"Capacity":{"LastAction":"2026-11-30T10:00:00Z"}}`, true, true, "", ""},
		{"the inferred lowercase operation of older fixtures is still named", `{"operation":{"kind":"RollingRestart","id":"op-7","phase":"Draining"},"claims":{"data-f-0":"uid-a"},"disruptions":{"f-1":"2026-11-30T10:00:00Z"}}`, true, true, "", "RollingRestart operation op-7"},
		{"a list of operations, which no release wrote, names nothing", `{"operations":[{"type":"Upgrade","id":"u-1"},{"type":"Replace","id":"r-2"}],"capacity":{"x":1}}`, true, false, `{"version":1,"fleetUID":"fleet-uid","capacity":{"x":1}}`, ""},
		{"claim identities alone are dropped without an event", `{"claims":{"data-f-0":"uid-a"}}`, true, true, "", ""},
		{"a null capacity is no capacity", `{"operations":[],"capacity":null}`, true, true, "", ""},
		{"an unreadable record is removed", `not json`, true, true, "", ""},
		{"a version this release does not write is rewritten", `{"version":2,"fleetUID":"fleet-uid","capacity":{"x":1}}`, true, false, `{"version":1,"fleetUID":"fleet-uid","capacity":{"x":1}}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Supersede(c.value, uid)
			if got.Changed != c.changed || got.Remove != c.remove || got.Value != c.rewritten || got.Operation != c.operation {
				t.Fatalf("Supersede = %+v, want changed=%v remove=%v value=%q operation=%q", got, c.changed, c.remove, c.rewritten, c.operation)
			}
		})
	}
}

func TestCapacityStateRoundTripsOnlyForThisFleetsRecord(t *testing.T) {
	value, err := CapacityAnnotation("uid-a", json.RawMessage(`{"declared":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := CapacityState(value, "uid-a"); string(got) != `{"declared":3}` {
		t.Errorf("the fleet's own record must give its state back, got %q", got)
	}
	for name, v := range map[string]string{
		"another fleet's record":      value,
		"an earlier release's record": `{"operation":{"kind":"Replace","id":"x"}}`,
		// encoding/json matches keys case-insensitively: only the exact keys make a record this
		// release's, or a prior-art record of the same fleet would pass.
		"an earlier release's capitalized record of this fleet": `{"Version":1,"FleetUID":"uid-b","Capacity":{"declared":3}}`,
		"this release's keys beside an earlier release's":       `{"version":1,"fleetUID":"uid-b","capacity":{"declared":3},"LastDisruption":"2026-11-30T10:04:05Z"}`,
		"no capacity state": `{"version":1,"fleetUID":"uid-b"}`,
		"unreadable":        `{`,
	} {
		if got := CapacityState(v, "uid-b"); got != nil {
			t.Errorf("%s must give no capacity state, got %q", name, got)
		}
	}
}

func TestCapacityAnnotationRefusesMoreThanTheBound(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", MaxOperationBytes) + `"`)
	if _, err := CapacityAnnotation("uid", big); err == nil {
		t.Fatal("a record over MaxOperationBytes must be refused")
	}
	fits := json.RawMessage(`"` + strings.Repeat("x", MaxOperationBytes-100) + `"`)
	if v, err := CapacityAnnotation("uid", fits); err != nil || len(v) > MaxOperationBytes {
		t.Fatalf("a record within the bound must be written (%d bytes): %v", len(v), err)
	}
}
