package celld

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func readFixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/state.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edited returns the fixture after edit has changed its decoded form.
func edited(t testing.TB, edit func(doc, deployment map[string]any)) []byte {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(readFixture(t)))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	dep, _ := doc["deployment"].(map[string]any)
	edit(doc, dep)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeStateReadsTheFixture(t *testing.T) {
	st, err := DecodeState(readFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Deployment{Version: "9b7d21f0c4e8a365", Prefix: "deploy/shop/9b7d21f0c4e8a365", Generation: 3,
		SwappingCells: 1, ResidentCells: 3, PendingCells: 1}
	if st.Deployment != want {
		t.Errorf("deployment = %+v, want %+v", st.Deployment, want)
	}
	if len(st.RuntimeGeneration) != 64 {
		t.Errorf("runtime generation %q is not the 64-hex identity of the fixture", st.RuntimeGeneration)
	}
	if st.Load == nil {
		t.Fatalf("the fixture carries a complete load view, but it was not decoded: %v", st.LoadErr)
	}
	wantLoad := Load{Occupied: 3, OwnedCells: 3, MemoryHeadroom: true, SampledMS: 1795000000123,
		ResidentCells: 3, RSSBytes: 94371840, InUseBytes: 90177536}
	if *st.Load != wantLoad {
		t.Errorf("load = %+v, want %+v", *st.Load, wantLoad)
	}
}

func TestDecodeStateDeploymentRules(t *testing.T) {
	long := func(n int) string { return strings.Repeat("v", n) }
	for _, tc := range []struct {
		name string
		edit func(doc, dep map[string]any)
		want error // nil: accepted
		pend int
	}{
		{"unknown keys are ignored", func(doc, dep map[string]any) { doc["future"] = []any{1}; dep["extra"] = "x" }, nil, 1},
		{"all cells on the current generation", func(_, dep map[string]any) { dep["cells"] = map[string]any{"Cell:a": 3, "Cell:b": 3} }, nil, 0},
		{"no resident cells", func(_, dep map[string]any) { dep["cells"] = map[string]any{} }, nil, 0},
		{"version of 256 characters", func(_, dep map[string]any) { dep["version"] = strings.Repeat("é", 256) }, nil, 1},
		{"prefix of 1024 characters", func(_, dep map[string]any) { dep["prefix"] = long(1024) }, nil, 1},
		{"swapping at its bound", func(_, dep map[string]any) { dep["swapping"] = 1_000_000_000 }, nil, 1},
		{"no shutdown object", func(doc, _ map[string]any) { delete(doc, "shutdown") }, nil, 1},
		{"runtime generation of 128 characters", func(doc, _ map[string]any) { doc["shutdown"] = map[string]any{"runtime_generation": long(128)} }, nil, 1},

		{"missing deployment", func(doc, _ map[string]any) { delete(doc, "deployment") }, ErrUnsupported, 0},
		{"null deployment", func(doc, _ map[string]any) { doc["deployment"] = nil }, ErrUnsupported, 0},
		{"deployment is a string", func(doc, _ map[string]any) { doc["deployment"] = "v1" }, ErrInvalidDeployment, 0},
		{"cell beyond the current generation", func(_, dep map[string]any) { dep["cells"] = map[string]any{"Cell:a": 4} }, ErrInvalidDeployment, 0},
		{"cell generation negative", func(_, dep map[string]any) { dep["cells"] = map[string]any{"Cell:a": -1} }, ErrInvalidDeployment, 0},
		{"cell generation as a string", func(_, dep map[string]any) { dep["cells"] = map[string]any{"Cell:a": "3"} }, ErrInvalidDeployment, 0},
		{"cells is an array", func(_, dep map[string]any) { dep["cells"] = []any{} }, ErrInvalidDeployment, 0},
		{"cells missing", func(_, dep map[string]any) { delete(dep, "cells") }, ErrInvalidDeployment, 0},
		{"empty version", func(_, dep map[string]any) { dep["version"] = "" }, ErrInvalidDeployment, 0},
		{"version of 257 characters", func(_, dep map[string]any) { dep["version"] = long(257) }, ErrInvalidDeployment, 0},
		{"version is a number", func(_, dep map[string]any) { dep["version"] = 7 }, ErrInvalidDeployment, 0},
		{"null version", func(_, dep map[string]any) { dep["version"] = nil }, ErrInvalidDeployment, 0},
		{"empty prefix", func(_, dep map[string]any) { dep["prefix"] = "" }, ErrInvalidDeployment, 0},
		{"prefix of 1025 characters", func(_, dep map[string]any) { dep["prefix"] = long(1025) }, ErrInvalidDeployment, 0},
		{"generation 0", func(_, dep map[string]any) { dep["generation"] = 0; dep["cells"] = map[string]any{} }, ErrInvalidDeployment, 0},
		{"generation beyond uint64", func(_, dep map[string]any) { dep["generation"] = json.Number("18446744073709551616") }, ErrInvalidDeployment, 0},
		{"generation as a float", func(_, dep map[string]any) { dep["generation"] = json.Number("3.0") }, ErrInvalidDeployment, 0},
		{"generation missing", func(_, dep map[string]any) { delete(dep, "generation") }, ErrInvalidDeployment, 0},
		{"swapping negative", func(_, dep map[string]any) { dep["swapping"] = -1 }, ErrInvalidDeployment, 0},
		{"swapping beyond its bound", func(_, dep map[string]any) { dep["swapping"] = 1_000_000_001 }, ErrInvalidDeployment, 0},
		{"runtime generation of 129 characters", func(doc, _ map[string]any) { doc["shutdown"] = map[string]any{"runtime_generation": long(129)} }, ErrIdentity, 0},
		{"runtime generation is a number", func(doc, _ map[string]any) { doc["shutdown"] = map[string]any{"runtime_generation": 1} }, ErrIdentity, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := DecodeState(edited(t, tc.edit))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("a valid deployment was refused: %v", err)
				}
				if st.Deployment.PendingCells != tc.pend {
					t.Fatalf("pending cells = %d, want %d", st.Deployment.PendingCells, tc.pend)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("DecodeState = %v, want %v", err, tc.want)
			}
			if tc.want != ErrUnsupported && !errors.Is(err, ErrMalformed) {
				t.Fatalf("an invalid deployment must map to Malformed, got %v", err)
			}
			if tc.want == ErrUnsupported && errors.Is(err, ErrMalformed) {
				t.Fatalf("a missing deployment is unsupported, not malformed: %v", err)
			}
		})
	}
}

func TestDecodeStateMatchesKeysAfterUnescaping(t *testing.T) {
	doc := []byte(`{"\u0064eployment":{"cells":{},"generation":1,"pr\u0065fix":"p","swapping":0,"version":"v\u00e9"}}`)
	st, err := DecodeState(doc)
	if err != nil {
		t.Fatal(err)
	}
	if st.Deployment.Version != "vé" || st.Deployment.Prefix != "p" {
		t.Fatalf("escaped key spellings were not recognised: %+v", st.Deployment)
	}
	// differently cased keys are different keys, unlike encoding/json's struct matching
	if _, err := DecodeState([]byte(`{"Deployment":{"cells":{},"generation":1,"prefix":"p","swapping":0,"version":"v"}}`)); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("\"Deployment\" was taken for \"deployment\": %v", err)
	}
}

func TestDecodeStateKeepsTheApplicationViewWhenTheLoadViewIsIncomplete(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(doc, dep map[string]any)
	}{
		{"null owned_cells", func(doc, _ map[string]any) { doc["owned_cells"] = nil }},
		{"missing node_load.sampled_ms", func(doc, _ map[string]any) { delete(doc["node_load"].(map[string]any), "sampled_ms") }},
		{"pressured as a string", func(doc, _ map[string]any) { doc["node_load"].(map[string]any)["pressured"] = "no" }},
		{"schema version 2", func(doc, _ map[string]any) { doc["shutdown"].(map[string]any)["schema_version"] = 2 }},
		{"blank runtime generation", func(doc, _ map[string]any) { doc["shutdown"].(map[string]any)["runtime_generation"] = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := edited(t, tc.edit)
			st, err := DecodeState(b)
			if err != nil {
				t.Fatalf("the application view failed because of the load view: %v", err)
			}
			if st.Load != nil || !errors.Is(st.LoadErr, ErrInvalidLoad) {
				t.Fatalf("an incomplete load view was accepted: load %+v, err %v", st.Load, st.LoadErr)
			}
			if _, err := DecodeLoad(b); !errors.Is(err, ErrInvalidLoad) {
				t.Fatalf("DecodeLoad = %v, want ErrInvalidLoad", err)
			}
		})
	}
}
