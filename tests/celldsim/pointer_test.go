package celldsim

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func writePointer(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func pointerJSON(version string) string {
	return `{"version":"` + version + `","prefix":"deploy/shop/` + version + `"}`
}

// tick runs the member's lifecycle step for the pointer under the member's lock, as step does.
func tick(p *proc, now time.Time) {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	p.tickPointer(now)
}

func TestAMissingPointerFileKeepsStartUpInThePointerWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "current.json")
	p := servingProc(bare(KnobBucket+"=s3://b", KnobPointerFile+"="+path))
	srv := httptest.NewServer(p.internalHandler())
	defer srv.Close()
	client := &http.Client{Timeout: 300 * time.Millisecond}

	if ph := p.phase(time.Now().Add(time.Hour)); ph != "BOUND" || p.loaded {
		t.Fatalf("without a pointer the process must wait in BOUND, phase %s", ph)
	}
	_, err := client.Get(srv.URL + "/state")
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("a request during the pointer wait must hang, got %v", err)
	}
	for _, bad := range []string{"{", `{"prefix":"deploy/app/x"}`} {
		writePointer(t, path, bad)
		tick(p, time.Now())
		if p.loaded {
			t.Fatalf("an unreadable pointer %q must keep the wait", bad)
		}
	}
	if n := strings.Count(logOf(p), "waiting for the deployment pointer"); n != 3 {
		t.Errorf("each distinct read error is logged once, got %d:\n%s", n, logOf(p))
	}

	writePointer(t, path, pointerJSON("v1"))
	tick(p, time.Now())
	var doc struct {
		Deployment struct {
			Version, Prefix string
			Generation      int
		}
	}
	var lastErr error
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		resp, err := client.Get(srv.URL + "/state")
		if lastErr = err; err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		return true, json.NewDecoder(resp.Body).Decode(&doc)
	}); err != nil {
		t.Fatalf("/state did not answer once the pointer was readable: %v (last: %v)", err, lastErr)
	}
	if doc.Deployment.Version != "v1" || doc.Deployment.Prefix != "deploy/shop/v1" || doc.Deployment.Generation != 1 {
		t.Errorf("generation 1 must be the pointer file's deployment, got %+v", doc.Deployment)
	}
}

func TestThePointerFileIsPolledEveryDeployPollSeconds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "current.json")
	writePointer(t, path, pointerJSON("v1"))
	p := servingProc(bare(KnobBucket+"=s3://b", KnobPointerFile+"="+path, KnobDeployPollS+"=5", KnobResidentCells+"=3"))
	t0 := p.start
	if !p.loaded || p.deploy.version != "v1" || p.deploy.prefix != "deploy/shop/v1" {
		t.Fatalf("a readable pointer file loads at start, got %+v", p.deploy)
	}
	view := func(now time.Time) map[string]any {
		b, _ := json.Marshal(p.applicationDocument(now))
		var doc map[string]any
		_ = json.Unmarshal(b, &doc)
		return doc
	}

	writePointer(t, path, pointerJSON("v2"))
	tick(p, t0.Add(4999*time.Millisecond))
	if p.pollPointer(t0.Add(4999*time.Millisecond), false) || p.deploy.generation != 1 {
		t.Fatalf("the file is read on its poll schedule only, not on /state reads: generation %d", p.deploy.generation)
	}
	tick(p, t0.Add(5*time.Second))
	if p.deploy.generation != 2 || p.deploy.version != "v2" || len(p.deploy.draining) != 1 || p.deploy.draining[0].version != "v1" {
		t.Fatalf("a changed pointer must be adopted as generation 2 at the poll, got %+v", p.deploy)
	}
	if v := view(t0.Add(5 * time.Second)); v["adoption_status"] != "adopted" || v["pointer_status"] != "observed" || v["pending_cells"] != 3.0 ||
		v["target"].(map[string]any)["observed_at_ms"] != float64(t0.Add(5*time.Second).UnixMilli()) {
		t.Errorf("application view after the adoption: %v", v)
	}

	tick(p, t0.Add(10*time.Second))
	if p.deploy.generation != 2 || view(t0.Add(10 * time.Second))["adoption_status"] != "unchanged" {
		t.Errorf("an unchanged pointer builds nothing: generation %d", p.deploy.generation)
	}

	for i, breakIt := range []func(){
		func() { writePointer(t, path, "not json") },
		func() { _ = os.Remove(path) },
	} {
		breakIt()
		now := t0.Add(time.Duration(15+5*i) * time.Second)
		tick(p, now)
		v := view(now)
		if p.deploy.generation != 2 || p.deploy.version != "v2" || v["pointer_status"] != "unavailable" ||
			v["target"].(map[string]any)["version"] != "v2" || v["snapshot_valid"] != true {
			t.Errorf("a failed poll keeps generation 2 serving and reports the pointer unavailable: %+v %v", p.deploy, v)
		}
	}

	writePointer(t, path, pointerJSON("v3"))
	tick(p, t0.Add(25*time.Second))
	if p.deploy.generation != 3 || p.deploy.version != "v3" || view(t0.Add(25 * time.Second))["pointer_status"] != "observed" {
		t.Errorf("the next readable pointer is adopted again: %+v", p.deploy)
	}
}

func TestThePointerFileDefaultPollIsThirtySeconds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "current.json")
	writePointer(t, path, pointerJSON("v1"))
	p := servingProc(bare(KnobBucket+"=s3://b", KnobPointerFile+"="+path))
	writePointer(t, path, pointerJSON("v2"))
	tick(p, p.start.Add(29*time.Second))
	if p.deploy.generation != 1 {
		t.Fatal("polled before CELLD_DEPLOY_POLL_S (default 30)")
	}
	tick(p, p.start.Add(30*time.Second))
	if p.deploy.generation != 2 {
		t.Fatal("not polled at CELLD_DEPLOY_POLL_S (default 30)")
	}
}

func TestReloadRereadsThePointerFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "current.json")
	writePointer(t, path, pointerJSON("v1"))
	p := servingProc(bare(KnobBucket+"=s3://b", KnobPointerFile+"="+path))

	rec := request(p, "POST", "/reload")
	if rec.Code != http.StatusOK || rec.Body.String() != `{"generation":2,"ok":true,"outcome":"adopted","prefix":"deploy/shop/v1","version":"v1"}` {
		t.Errorf("/reload forces a rebuild of the unchanged pointer, got %d %s", rec.Code, rec.Body)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	rec = request(p, "POST", "/reload")
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != 422 || body["ok"] != false || body["outcome"] != "failed" || body["version"] != "" || body["prefix"] != "" || body["error"] == "" {
		t.Errorf("/reload of an unreadable pointer = %d %s, want 422 failed with empty version and prefix", rec.Code, rec.Body)
	}
	if p.deploy.generation != 2 || p.deploy.version != "v1" {
		t.Errorf("the old generation keeps serving, got %+v", p.deploy)
	}
}
