package celldsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// servingProc is a process that serves at once (bucket durability: no recovery; no lease wait)
// and is its member's current process, so its handlers answer.
func servingProc(env map[string]string) *proc {
	env = with(env, KnobDurability+"=bucket", KnobLeaseMS+"=0")
	p := testProc(env)
	p.m.proc = p
	return p
}

func request(p *proc, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	p.internalHandler().ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

// checkSortedIntegers fails unless every object in body has its keys in ascending order and
// every number is an integer.
func checkSortedIntegers(t *testing.T, body []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   []string
		expect bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("invalid JSON %s: %v", body, err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.object && top.expect
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.object {
					top.expect = true
				}
				stack = append(stack, &frame{object: v == '{', expect: v == '{'})
			default:
				f := stack[len(stack)-1]
				if f.object && !sort.StringsAreSorted(f.keys) {
					t.Errorf("keys not sorted: %v", f.keys)
				}
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if isKey {
				top.keys = append(top.keys, v)
				top.expect = false
				continue
			}
		case json.Number:
			if strings.ContainsAny(v.String(), ".eE") {
				t.Errorf("%s is not an integer", v)
			}
		}
		if top != nil && top.object {
			top.expect = true
		}
	}
}

func TestApplicationViewIsServedOnlyWithItsKnob(t *testing.T) {
	p := servingProc(bare(KnobBucket+"=s3://b", KnobResidentCells+"=3"))
	for _, method := range []string{"GET", "POST"} {
		rec := request(p, method, "/state?view=application")
		if rec.Code != http.StatusNotFound || rec.Body.String() != `{"error":"not_found"}` {
			t.Errorf("without %s, %s /state?view=application is an unknown route, got %d %s", KnobAppView, method, rec.Code, rec.Body)
		}
	}

	p.m.k.overrides[KnobAppView] = "1"
	before := time.Now().UnixMilli()
	rec := request(p, "GET", "/state?view=application")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /state?view=application = %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	checkSortedIntegers(t, rec.Body.Bytes())
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"adoption_status", "loaded", "local_generation", "pending_cells", "pointer_status", "resident_cells",
		"runtime_generation", "sampled_at_ms", "schema_version", "snapshot_valid", "swapping_cells", "target"}
	if !slices.Equal(keys, want) {
		t.Fatalf("fields %v, want the §2.5 schema %v", keys, want)
	}
	prefix := "deploy/app/" + defaultAppVersion
	if doc["schema_version"] != 1.0 || doc["runtime_generation"] != p.gen || doc["snapshot_valid"] != true ||
		doc["local_generation"] != 1.0 || doc["resident_cells"] != 3.0 || doc["pending_cells"] != 0.0 ||
		doc["pointer_status"] != "observed" || doc["adoption_status"] != "unchanged" {
		t.Errorf("unexpected application view %s", rec.Body)
	}
	if l := doc["loaded"].(map[string]any); l["version"] != defaultAppVersion || l["prefix"] != prefix {
		t.Errorf("loaded = %v", l)
	}
	target := doc["target"].(map[string]any)
	if target["version"] != defaultAppVersion || target["prefix"] != prefix || target["observed_at_ms"].(float64) < float64(before) {
		t.Errorf("target = %v, want the pointer just read", target)
	}
	if s := doc["sampled_at_ms"].(float64); s < float64(before) || s > float64(time.Now().UnixMilli()) {
		t.Errorf("sampled_at_ms %v is not now", s)
	}

	for _, method := range []string{"POST", "PUT", "DELETE", "HEAD"} {
		rec := request(p, method, "/state?view=application")
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Content-Type") != "application/json" ||
			(method != "HEAD" && rec.Body.String() != "method not allowed") {
			t.Errorf("%s /state?view=application = %d %q %q, want 405 method not allowed", method, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
	for _, target := range []string{"/state", "/state?view=application&x=1", "/state?view=Application", "/state?x=1&view=application"} {
		rec := request(p, "POST", target)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"occupied":3`) {
			t.Errorf("POST %s must be the /state document, got %d %.80s", target, rec.Code, rec.Body)
		}
	}

	// an adoption: every resident cell pending on the new generation, one batch swapping
	p.m.k.overrides[KnobAppVersion] = "0e1738ed65659e75"
	rec = request(p, "GET", "/state?view=application")
	doc = nil
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["adoption_status"] != "adopted" || doc["local_generation"] != 2.0 || doc["pending_cells"] != 3.0 ||
		doc["swapping_cells"] != 3.0 || doc["loaded"].(map[string]any)["version"] != "0e1738ed65659e75" {
		t.Errorf("after an adoption: %s", rec.Body)
	}
}

func TestApplicationViewWithoutARuntime(t *testing.T) {
	p := servingProc(bare(KnobAppView + "=1"))
	rec := request(p, "GET", "/state?view=application")
	checkSortedIntegers(t, rec.Body.Bytes())
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["snapshot_valid"] != false || doc["loaded"] != nil || doc["target"] != nil || doc["local_generation"] != 0.0 ||
		doc["pointer_status"] != "unknown" || doc["adoption_status"] != "unknown" {
		t.Errorf("a node without a bucket has no runtime: %s", rec.Body)
	}
}
