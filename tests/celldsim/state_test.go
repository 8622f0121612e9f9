package celldsim

import (
	"bytes"
	"encoding/json"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/internal/testsupport/syncbuf"
)

func testProc(env map[string]string) *proc {
	m := &member{name: "f-0", ns: "ns", s: &Simulator{log: log.New(&syncbuf.Buffer{}, "", 0)}}
	m.k = knobs{env: env, overrides: map[string]string{}}
	p := &proc{m: m, start: time.Now(), gen: strings.Repeat("ab", 32), added: map[string]bool{}, evicted: map[string]bool{}}
	p.startDeployment(p.start)
	return p
}

// logOf is what the test process has logged so far.
func logOf(p *proc) string { return p.m.s.log.Writer().(*syncbuf.Buffer).String() }

func serve(t *testing.T, p *proc, mode string) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	p.serveState(rec, httptest.NewRequest("GET", "/state", nil), p.document(time.Now()), mode)
	return rec.Body.Bytes()
}

func TestStateDocumentCarriesTheFieldsTheOperatorRequires(t *testing.T) {
	p := testProc(map[string]string{KnobBucket: "s3://b", KnobResidentCells: "3", KnobPendingCells: "1"})
	var doc struct {
		Occupied   *uint64 `json:"occupied"`
		OwnedCells *uint64 `json:"owned_cells"`
		Deployment struct {
			Version    string            `json:"version"`
			Generation uint64            `json:"generation"`
			Cells      map[string]uint64 `json:"cells"`
		} `json:"deployment"`
		NodeLoad map[string]any `json:"node_load"`
		Shutdown struct {
			SchemaVersion     int    `json:"schema_version"`
			RuntimeGeneration string `json:"runtime_generation"`
		} `json:"shutdown"`
	}
	if err := json.Unmarshal(serve(t, p, "normal"), &doc); err != nil {
		t.Fatalf("the normal /state body must be valid JSON: %v", err)
	}
	if doc.Occupied == nil || *doc.Occupied != 3 || doc.OwnedCells == nil || *doc.OwnedCells != 3 {
		t.Errorf("occupied and owned_cells must count the 3 resident cells, got %v %v", doc.Occupied, doc.OwnedCells)
	}
	if doc.Deployment.Version != defaultAppVersion || doc.Deployment.Generation != 1 || len(doc.Deployment.Cells) != 3 {
		t.Errorf("deployment = %+v, want the default version at generation 1 with 3 cells", doc.Deployment)
	}
	pending := 0
	for _, g := range doc.Deployment.Cells {
		if g != doc.Deployment.Generation {
			pending++
		}
	}
	if pending != 1 {
		t.Errorf("CELLD_SIM_PENDING_CELLS=1 must leave exactly one cell behind, got %d", pending)
	}
	for _, k := range []string{"draining", "rebalance_paused", "sampled_ms", "resident_cells", "rss_bytes", "in_use_bytes", "pressured", "memory_headroom"} {
		if doc.NodeLoad[k] == nil {
			t.Errorf("node_load.%s must be present and non-null", k)
		}
	}
	if doc.Shutdown.SchemaVersion != 1 || doc.Shutdown.RuntimeGeneration != p.gen {
		t.Errorf("shutdown = %+v, want schema 1 and the process generation", doc.Shutdown)
	}
}

func TestStateFaultModesBreakTheDocumentAsDocumented(t *testing.T) {
	p := testProc(map[string]string{KnobBucket: "s3://b"})
	if b := serve(t, p, "duplicate-key"); bytes.Count(b, []byte(`"runtime_generation"`)) != 2 {
		t.Errorf("duplicate-key must repeat shutdown.runtime_generation: %s", b)
	}
	if b := serve(t, p, "oversized"); len(b) <= 1<<20 || !json.Valid(b) {
		t.Errorf("oversized must be valid JSON above 1 MiB, got %d bytes", len(b))
	}
	if b := serve(t, p, "malformed"); json.Valid(b) {
		t.Error("malformed must not be valid JSON")
	}
	if b := serve(t, p, "trailing"); json.Valid(b) || !bytes.HasSuffix(b, []byte("}{}")) {
		t.Errorf("trailing must append an object: %s", b[len(b)-10:])
	}
	var doc map[string]any
	if err := json.Unmarshal(serve(t, p, "missing:deployment,schema:2"), &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["deployment"]; ok {
		t.Error("missing:deployment must drop the deployment")
	}
	if doc["shutdown"].(map[string]any)["schema_version"].(float64) != 2 {
		t.Error("schema:2 must set shutdown.schema_version to 2")
	}
}

func TestAChangedPointerIsAdoptedAsTheNextGeneration(t *testing.T) {
	p := testProc(map[string]string{KnobBucket: "s3://b", KnobResidentCells: "8"})
	now := time.Now()
	p.m.k.overrides[KnobAppVersion] = "0e1738ed65659e75"
	if !p.pollPointer(now, false) || p.deploy.generation != 2 {
		t.Fatalf("a new version must be adopted as generation 2, got %d", p.deploy.generation)
	}
	gens, swapping := p.cellGenerations(p.cells(), now)
	if swapping != 4 {
		t.Errorf("right after adoption one batch of 4 swaps, got %d", swapping)
	}
	for c, g := range gens {
		if g.(int64) != 1 {
			t.Errorf("cell %s must still be on generation 1 right after adoption", c)
		}
	}
	if _, swapping := p.cellGenerations(p.cells(), now.Add(2*time.Second)); swapping != 0 {
		t.Errorf("8 cells in batches of 4 per second converge after 2 s, still swapping %d", swapping)
	}
}

func TestNodeLoadFollowsTheUsageAnnotations(t *testing.T) {
	p := testProc(map[string]string{KnobBucket: "s3://b"})
	load := func() map[string]float64 {
		t.Helper()
		var doc struct {
			NodeLoad map[string]any `json:"node_load"`
		}
		if err := json.Unmarshal(serve(t, p, "normal"), &doc); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, k := range []string{"cpu_percent_x100", "rss_bytes", "in_use_bytes"} {
			out[k], _ = doc.NodeLoad[k].(float64)
		}
		return out
	}
	want := func(got map[string]float64, cpu, rss, inUse float64, why string) {
		t.Helper()
		if got["cpu_percent_x100"] != cpu || got["rss_bytes"] != rss || got["in_use_bytes"] != inUse {
			t.Errorf("%s: node_load cpu_percent_x100/rss_bytes/in_use_bytes = %v/%v/%v, want %v/%v/%v", why,
				got["cpu_percent_x100"], got["rss_bytes"], got["in_use_bytes"], cpu, rss, inUse)
		}
	}
	want(load(), 10, 50<<20, 40<<20, "defaults (1m, 50Mi)")
	p.m.k.annotations = map[string]string{UsageCPUAnnotation: "300m", UsageMemoryAnnotation: "900Mi"}
	want(load(), 3000, 900<<20, 720<<20, "300m and 900Mi")
	p.m.k.annotations = map[string]string{UsageCPUAnnotation: "1.5", UsageMemoryAnnotation: "1Gi"}
	want(load(), 15000, 1<<30, (1<<30)*4/5, "1.5 cores and 1Gi")
	p.m.k.annotations[UsageMemoryAnnotation] = "lots"
	want(load(), 15000, 50<<20, 40<<20, "a memory value that does not parse counts as absent")
	p.m.k.annotations[AnnotationPrefix+KnobRSSBytes] = "123"
	if got := load(); got["rss_bytes"] != 123 {
		t.Errorf("an explicit %s wins over the usage, got rss_bytes %v", KnobRSSBytes, got["rss_bytes"])
	}
}

func TestUsageAnnotationsAreNotCelldEnv(t *testing.T) {
	m := &member{pod: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName}}}}}
	m.k = knobs{annotations: map[string]string{UsageCPUAnnotation: "300m", UsageMemoryAnnotation: "900Mi",
		AnnotationPrefix + KnobRSSBytes: "1"}}
	env, _, _ := m.startEnv()
	if _, ok := env["usage-cpu"]; ok {
		t.Errorf("the usage annotations must not reach celld's env, got %v", env)
	}
	if env[KnobRSSBytes] != "1" {
		t.Errorf("knob annotations still reach celld's env, got %v", env)
	}
}
