package reservation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The keys of the prior art's records (earlier.go), as its structs marshal them. required are
// the fields without omitempty: every record carries them.
var (
	stateRequired = []string{"Version", "FleetUID", "WorkloadUID", "Initial", "Applied", "RuntimeImage", "Claims"}
	// v0.0.5's fleetState; one version of it also had DiskCleanupPending.
	strictStateKeys = append(slices.Clone(stateRequired), "Operation", "RestartToken", "Completion", "Capacity", "DiskCleanupPending")
	// The one-disruption controller's fleetState: Operation only ever read, LastDisruption added.
	oneDisruptionStateKeys = append(slices.Clone(stateRequired), "Operation", "RestartToken", "Completion", "Capacity", "LastDisruption")
	// v0.0.5's currentOperation; Targets and Blocker are omitempty.
	strictOperationRequired = []string{"ID", "Kind", "Phase", "StartedAt", "Deadline", "FleetUID", "WorkloadUID", "From", "To",
		"SourceImage", "TargetImage", "RestartToken", "ManualBaseline", "Automatic", "PolicyHash", "PreviousEffect", "EffectVersion"}
	strictOperationKeys = append(slices.Clone(strictOperationRequired), "Targets", "Blocker")
	completionKeys      = []string{"ID", "Kind", "Outcome", "At"}
)

// earlierFixtureFleet is the fleet UID every record in testdata/earlier belongs to.
const earlierFixtureFleet types.UID = "2c6f0b9e-5d41-4a0b-8f3e-7a1d9c4b2e10"

func earlierRecord(t *testing.T, name string) (string, map[string]json.RawMessage) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "earlier", name))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return string(b), fields
}

// hasKeys fails unless every key of fields is one of allowed and every one of required is there.
// Keys are compared exactly: the records' keys are capitalized Go field names.
func hasKeys(t *testing.T, what string, fields map[string]json.RawMessage, allowed, required []string) {
	t.Helper()
	for k := range fields {
		if !slices.Contains(allowed, k) {
			t.Errorf("%s has key %q, which its format does not have", what, k)
		}
	}
	for _, k := range required {
		if _, ok := fields[k]; !ok {
			t.Errorf("%s lacks key %q, which its format always writes", what, k)
		}
	}
}

func object(t *testing.T, what string, raw json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not an object: %v", what, err)
	}
	return m
}

func timeAt(t *testing.T, what string, raw json.RawMessage) time.Time {
	t.Helper()
	var at time.Time // encoding/json of time.Time: RFC 3339 with nanoseconds
	if err := json.Unmarshal(raw, &at); err != nil {
		t.Fatalf("%s is not a time as encoding/json writes one: %v", what, err)
	}
	return at
}

// TestEarlierRecordFixturesHaveTheirFormatsKeys keeps the hand-written fixtures faithful to the
// formats earlier.go describes, so the tests below read what those releases wrote.
func TestEarlierRecordFixturesHaveTheirFormatsKeys(t *testing.T) {
	t.Run("v0.0.5, an operation in flight", func(t *testing.T) {
		_, f := earlierRecord(t, "strict-in-flight.json")
		hasKeys(t, "the record", f, strictStateKeys, append(slices.Clone(stateRequired), "Operation"))
		op := object(t, "Operation", f["Operation"])
		hasKeys(t, "the operation", op, strictOperationKeys, strictOperationRequired)
		if !timeAt(t, "Deadline", op["Deadline"]).After(timeAt(t, "StartedAt", op["StartedAt"])) {
			t.Error("an operation's deadline follows its start")
		}
		var targets []map[string]json.RawMessage
		if err := json.Unmarshal(op["Targets"], &targets); err != nil || len(targets) != 3 {
			t.Fatalf("a Restart of three members has one target each: %v", err)
		}
	})
	for _, name := range []string{"one-disruption-rolling.json", "one-disruption-after-strict.json"} {
		t.Run(name, func(t *testing.T) {
			_, f := earlierRecord(t, name)
			hasKeys(t, "the record", f, oneDisruptionStateKeys, append(slices.Clone(stateRequired), "LastDisruption"))
			if _, ok := f["Operation"]; ok {
				t.Error("the one-disruption controller never wrote an Operation")
			}
			timeAt(t, "LastDisruption", f["LastDisruption"])
			if raw, ok := f["Completion"]; ok {
				c := object(t, "Completion", raw)
				hasKeys(t, "the completion", c, completionKeys, completionKeys)
				timeAt(t, "Completion.At", c["At"])
			}
		})
	}
	for _, name := range []string{"strict-in-flight.json", "one-disruption-rolling.json", "one-disruption-after-strict.json"} {
		_, f := earlierRecord(t, name)
		var head struct {
			Version  int
			FleetUID types.UID
		}
		raw, _ := json.Marshal(f)
		if err := json.Unmarshal(raw, &head); err != nil || head.Version != 1 || head.FleetUID != earlierFixtureFleet {
			t.Errorf("%s: every earlier record is version 1 of fleet %s, got %+v (%v)", name, earlierFixtureFleet, head, err)
		}
	}
}

// TestSupersedeReadsTheRecordsEarlierReleasesWrote: each is removed (none holds this release's
// capacity history), and only v0.0.5's operation in flight is named for OperationSuperseded. The
// one-disruption controller's record holds no operation; the strict operation it had dropped
// (Completion) is not in flight and is not reported again.
func TestSupersedeReadsTheRecordsEarlierReleasesWrote(t *testing.T) {
	for name, operation := range map[string]string{
		"strict-in-flight.json":            "Restart operation op-1764496800-restart",
		"one-disruption-rolling.json":      "",
		"one-disruption-after-strict.json": "",
	} {
		t.Run(name, func(t *testing.T) {
			value, _ := earlierRecord(t, name)
			got := Supersede(value, earlierFixtureFleet)
			if !got.Changed || !got.Remove || got.Value != "" || got.Operation != operation {
				t.Fatalf("Supersede = %+v, want the record removed and operation %q named", got, operation)
			}
			// Version 1 and this fleet's UID, under capitalized keys: still not this release's record.
			if state := CapacityState(value, earlierFixtureFleet); state != nil {
				t.Fatalf("an earlier release's Capacity was read as this release's capacity history: %s", state)
			}
		})
	}
}

func TestEarlierOperationNamesOnlyAnOperationInFlight(t *testing.T) {
	for value, want := range map[string]string{
		`{"Operation":{"ID":"op-9","Kind":"Upgrade","Phase":"Observing"}}`: "Upgrade operation op-9",
		`{"Operation":{"Kind":"Scale"}}`:                                   "Scale operation without an id",
		`{"Operation":{}}`:                                                 "unnamed operation without an id",
		`{"Operation":null,"LastDisruption":"2026-11-30T10:04:05Z"}`:       "",
		`{"Operation":"Restart"}`:                                          "",
		`{"Completion":{"ID":"op-1","Kind":"Restart","Outcome":"Superseded","At":"2026-11-30T09:58:12Z"}}`: "",
		`{"operations":[{"type":"Upgrade","id":"u-1"}]}`:                                                   "",
		`{"operation":{"kind":"RollingRestart","id":"op-7"}}`:                                              "RollingRestart operation op-7",
	} {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(value), &fields); err != nil {
			t.Fatal(err)
		}
		if got := earlierOperation(fields); got != want {
			t.Errorf("%s: named %q, want %q", value, got, want)
		}
	}
}
