package celldsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// waitAccepted blocks a request until its listener accepts in the current phase, like a
// connection in celld's backlog before start-up reaches the accept loop. It returns false
// if the client gave up or the process exited meanwhile.
func (p *proc) waitAccepted(r *http.Request, internal bool) (string, bool) {
	for {
		p.m.mu.Lock()
		current := p.m.proc == p
		phase := p.phase(time.Now())
		bucket := p.m.k.has(KnobBucket)
		p.m.mu.Unlock()
		if !current {
			return "", false
		}
		switch {
		case phase == "SERVING" || phase == "DRAINING":
			return phase, true
		case internal && phase == "RECOVERY" && bucket:
			return phase, true
		}
		select {
		case <-r.Context().Done():
			return "", false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *proc) publicHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := p.waitAccepted(r, false); !ok {
			return
		}
		p.m.mu.Lock()
		now := time.Now()
		healthy, draining := p.healthy(now), p.draining()
		mode := p.m.k.str(KnobHealthMode, "auto")
		node, version, bucket := p.m.k.str(KnobNode, p.m.name), p.deploy.version, p.m.k.has(KnobBucket)
		p.m.mu.Unlock()
		if draining {
			w.Header().Set("Connection", "close")
		}
		if r.URL.Path == HealthPath {
			p.serveHealth(w, r, mode, healthy)
			return
		}
		switch {
		case draining:
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, []byte(`{"ok":false,"draining":true}`))
		case !bucket:
			writeJSON(w, http.StatusNotFound, []byte(`{"error":"not_found"}`))
		default:
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "celld-sim node=%s version=%s", node, version)
		}
	})
}

// serveHealth answers the readiness route per CELLD_SIM_HEALTH_MODE.
func (p *proc) serveHealth(w http.ResponseWriter, r *http.Request, mode string, healthy bool) {
	name, arg, _ := strings.Cut(mode, ":")
	ms, _ := strconv.Atoi(arg)
	switch name {
	case "ok":
		healthy = true
	case "fail":
		healthy = false
	case "hang":
		<-r.Context().Done()
		return
	case "slow":
		if !sleepCtx(r, time.Duration(ms)*time.Millisecond) {
			return
		}
	case "flap":
		if ms > 0 && time.Now().UnixMilli()/int64(ms)%2 == 1 {
			healthy = false
		}
	}
	if healthy {
		writeJSON(w, http.StatusOK, []byte(`{"ok":true}`))
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, []byte(`{"ok":false}`))
}

func (p *proc) internalHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		phase, ok := p.waitAccepted(r, true)
		if !ok {
			return
		}
		if phase == "DRAINING" {
			w.Header().Set("Connection", "close")
		}
		path := r.URL.Path
		switch {
		case strings.HasPrefix(path, "/__sim/"):
			p.serveControl(w, r)
		case phase == "RECOVERY" && (path == "/peer/log/seal" || path == "/peer/log/tail"):
			http.Error(w, "unsigned peer request", http.StatusUnauthorized)
		case phase == "RECOVERY":
			writeJSON(w, http.StatusServiceUnavailable, []byte("predecessor recovery in progress"))
		case path == "/state" && r.URL.RawQuery == "view=application" && p.applicationView():
			p.serveApplicationView(w, r)
		case path == "/state" && r.URL.RawQuery != "view=application":
			p.m.mu.Lock()
			now := time.Now()
			p.pollPointer(now, false)
			doc := p.document(now)
			mode := p.m.k.str(KnobStateMode, "normal")
			p.m.mu.Unlock()
			p.serveState(w, r, doc, mode)
		default:
			p.serveOperatorAPI(w, r, phase)
		}
	})
}

// serveOperatorAPI answers the other internal routes of §5.4.
func (p *proc) serveOperatorAPI(w http.ResponseWriter, r *http.Request, phase string) {
	path := r.URL.Path
	post := r.Method == http.MethodPost
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	switch {
	case path == "/reload" && post:
		p.reload(w)
	case path == "/shutdown" && post:
		q := r.URL.Query()
		if q.Has("mode") {
			writeJSON(w, http.StatusBadRequest, []byte("unsupported shutdown mode"))
			return
		}
		if q.Get("handoff") == "preserve" {
			p.preserveGen = p.gen
		}
		p.beginDrain(time.Now(), "POST /shutdown")
		writeJSON(w, http.StatusOK, []byte(`{"ok":true}`))
	case (path == "/rebalance/pause" || path == "/rebalance/resume") && post:
		p.paused = path == "/rebalance/pause"
		writeJSON(w, http.StatusOK, []byte(`{"rebalance_paused":`+strconv.FormatBool(p.paused)+`}`))
	case path == "/reload" || path == "/shutdown" || strings.HasPrefix(path, "/rebalance/"):
		writeJSON(w, http.StatusMethodNotAllowed, []byte("method not allowed"))
	case path == "/debug/metrics":
		writeJSON(w, http.StatusOK, []byte(`{}`))
	case strings.HasPrefix(path, "/cell/"):
		scope := strings.TrimPrefix(path, "/cell/")
		p.added[scope], p.evicted[scope] = true, false
		b, _ := json.Marshal(map[string]any{"route": "local", "cell": scope})
		writeJSON(w, http.StatusOK, b)
	case strings.HasPrefix(path, "/evict/"):
		p.evicted[strings.TrimPrefix(path, "/evict/")] = true
		writeJSON(w, http.StatusOK, []byte(`{"ok":true}`))
	case path == "/peer/handoff" && phase == "DRAINING":
		writeJSON(w, http.StatusServiceUnavailable, []byte(`{"ok":false,"draining":true}`))
	case strings.HasPrefix(path, "/peer/") || strings.HasPrefix(path, "/runtime/") || strings.HasPrefix(path, "/do/"):
		writeJSON(w, http.StatusUnauthorized, []byte("unauthorized"))
	default:
		writeJSON(w, http.StatusNotFound, []byte(`{"error":"not_found"}`))
	}
}

func (p *proc) reload(w http.ResponseWriter) {
	d := &p.deploy
	switch {
	case !p.m.k.has(KnobBucket) || p.m.k.get(KnobReload) == "unavailable":
		writeJSON(w, http.StatusServiceUnavailable, []byte(`{"ok":false,"outcome":"unavailable","error":"this node has no deployment pointer to reload from"}`))
	case p.m.k.get(KnobReload) == "fail":
		d.adoption = "failed"
		b, _ := json.Marshal(map[string]any{"ok": false, "outcome": "failed", "version": d.version, "prefix": d.prefix, "error": "simulated build failure"})
		writeJSON(w, 422, b)
	default:
		if _, err := p.checkPointer(time.Now(), true); err != nil {
			// an unreadable pointer: the old generation keeps serving
			b, _ := json.Marshal(map[string]any{"ok": false, "outcome": "failed", "version": "", "prefix": "", "error": err.Error()})
			writeJSON(w, 422, b)
			return
		}
		b, _ := json.Marshal(map[string]any{"ok": true, "outcome": "adopted", "generation": d.generation, "version": d.version, "prefix": d.prefix})
		writeJSON(w, http.StatusOK, b)
	}
}

// applicationView reports whether GET /state?view=application is served (knob
// CELLD_SIM_APPLICATION_VIEW); without it the query is an unknown route, as on builds without it.
func (p *proc) applicationView() bool {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	return p.m.k.bool(KnobAppView, false)
}

// serveApplicationView answers GET /state?view=application with the document of §2.5; any
// other method is 405.
func (p *proc) serveApplicationView(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeJSON(w, http.StatusMethodNotAllowed, []byte("method not allowed"))
		return
	}
	p.m.mu.Lock()
	now := time.Now()
	p.pollPointer(now, false)
	doc := p.applicationDocument(now)
	p.m.mu.Unlock()
	writeJSON(w, http.StatusOK, encode(doc, "", ""))
}

// serveControl is the test-only runtime control of §5.8 under /__sim/.
func (p *proc) serveControl(w http.ResponseWriter, r *http.Request) {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	now := time.Now()
	switch r.URL.Path {
	case "/__sim/config":
		if r.Method == http.MethodPost {
			var set map[string]string
			if err := json.NewDecoder(r.Body).Decode(&set); err != nil {
				writeJSON(w, http.StatusBadRequest, []byte(`{"error":"body must be a JSON object of strings"}`))
				return
			}
			for k, v := range set {
				p.m.k.overrides[k] = v
			}
		}
		b, _ := json.Marshal(p.m.k.overrides)
		writeJSON(w, http.StatusOK, b)
	case "/__sim/fleet-ready":
		p.gateForced = true
		writeJSON(w, http.StatusOK, []byte(`{"ok":true}`))
	case "/__sim/fence", "/__sim/crash":
		code := int32(3)
		if r.URL.Path == "/__sim/crash" {
			n, err := strconv.Atoi(r.URL.Query().Get("code"))
			if err != nil {
				n = 1
			}
			code = int32(n)
		}
		p.crash = &code
		writeJSON(w, http.StatusOK, []byte(`{"ok":true}`))
	case "/__sim/pointer":
		var ptr struct{ Version, Prefix string }
		if err := json.NewDecoder(r.Body).Decode(&ptr); err != nil || ptr.Version == "" {
			writeJSON(w, http.StatusBadRequest, []byte(`{"error":"body must be {\"version\":…,\"prefix\":…}"}`))
			return
		}
		p.m.k.overrides[KnobAppVersion], p.m.k.overrides[KnobAppPrefix] = ptr.Version, ptr.Prefix
		writeJSON(w, http.StatusOK, []byte(`{"ok":true}`))
	case "/__sim/phase":
		b, _ := json.Marshal(map[string]any{"phase": p.phase(now), "node": p.m.k.str(KnobNode, p.m.name),
			"runtime_generation": p.gen, "draining": p.draining(), "fleet_ready": p.fleetReady(now)})
		writeJSON(w, http.StatusOK, b)
	default:
		writeJSON(w, http.StatusNotFound, []byte(`{"error":"not_found"}`))
	}
}
