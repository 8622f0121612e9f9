package celldsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
)

// deployment is the loaded code of one incarnation (§5.5): generation counts local
// adoptions, and after an adoption resident cells move to it in batches. The pointer fields
// feed GET /state?view=application (§2.5).
type deployment struct {
	version, prefix string
	generation      int64
	adoptedAt       time.Time // zero until the first adoption after start
	draining        []drainedGeneration
	target          *pointer  // the last pointer read that succeeded
	observedAt      time.Time // when target was read
	pointerStatus   string    // unknown | observed | unavailable
	adoption        string    // unknown | adopted | unchanged | failed
}

type drainedGeneration struct {
	generation int64
	version    string
	until      time.Time
}

// pointer is a deployment pointer: deploy/current.json on celld, here the pointer file or the
// CELLD_SIM_APP_VERSION / CELLD_SIM_APP_PREFIX knobs (§5.6).
type pointer struct {
	Version string `json:"version"`
	Prefix  string `json:"prefix"`
}

func newDeployment(k knobs, _ time.Time) deployment {
	v := k.str(KnobAppVersion, defaultAppVersion)
	return deployment{version: v, prefix: k.str(KnobAppPrefix, "deploy/app/"+v), generation: 1,
		pointerStatus: "unknown", adoption: "unknown"}
}

// fileSource reports whether the pointer comes from CELLD_SIM_POINTER_FILE. It only matters
// with a bucket: without one celld loads no deployment.
func (p *proc) fileSource() bool { return p.m.k.has(KnobBucket) && p.m.k.has(KnobPointerFile) }

// readPointer reads the pointer source: the pointer file when one is set, else the knobs.
func (p *proc) readPointer() (pointer, error) {
	k := p.m.k
	if !p.fileSource() {
		v := k.str(KnobAppVersion, defaultAppVersion)
		return pointer{Version: v, Prefix: k.str(KnobAppPrefix, "deploy/app/"+v)}, nil
	}
	return readPointerFile(k.get(KnobPointerFile))
}

// readPointerFile reads a JSON pointer {"version":…,"prefix":…}; the prefix defaults to
// deploy/app/<version> like the knob's.
func readPointerFile(path string) (pointer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return pointer{}, err
	}
	var ptr pointer
	if err := json.Unmarshal(b, &ptr); err != nil {
		return pointer{}, fmt.Errorf("pointer file %s: %w", path, err)
	}
	if ptr.Version == "" {
		return pointer{}, fmt.Errorf("pointer file %s has no version", path)
	}
	if ptr.Prefix == "" {
		ptr.Prefix = "deploy/app/" + ptr.Version
	}
	return ptr, nil
}

// startDeployment loads generation 1 at start. With the knobs as the source it is there at
// once and the pointer wait lasts CELLD_SIM_POINTER_WAIT_MS; with the pointer file the process
// stays in the pointer wait until the file reads (tickPointer retries), like celld waiting
// for deploy/current.json.
func (p *proc) startDeployment(now time.Time) {
	k := p.m.k
	p.deploy = newDeployment(k, now)
	if !p.fileSource() {
		p.loaded, p.pointerAt = true, p.start.Add(k.ms(KnobPointerWaitMS, 0))
		if k.has(KnobBucket) {
			ptr, _ := p.readPointer()
			p.deploy.observe(ptr, now, "adopted")
		}
		return
	}
	p.deploy.version, p.deploy.prefix = "", ""
	p.tryLoad(now)
}

// tryLoad ends the pointer wait once the pointer file reads, not before
// CELLD_SIM_POINTER_WAIT_MS.
func (p *proc) tryLoad(now time.Time) {
	if p.loaded || now.Before(p.start.Add(p.m.k.ms(KnobPointerWaitMS, 0))) {
		return
	}
	ptr, err := p.readPointer()
	if err != nil {
		if msg := err.Error(); msg != p.pointerErr {
			p.pointerErr = msg
			p.m.s.log.Printf("%s/%s waiting for the deployment pointer: %v", p.m.ns, p.m.name, err)
		}
		return
	}
	p.deploy.version, p.deploy.prefix = ptr.Version, ptr.Prefix
	p.deploy.observe(ptr, now, "adopted")
	p.loaded, p.pointerAt, p.lastPoll, p.pointerErr = true, now, now, ""
	p.m.s.log.Printf("%s/%s loaded %s as generation 1", p.m.ns, p.m.name, ptr.Version)
}

// tickPointer drives the pointer file: the start-up wait, then after start-up (celld starts its
// pointer watcher when it serves) one poll every CELLD_DEPLOY_POLL_S seconds.
func (p *proc) tickPointer(now time.Time) {
	if !p.fileSource() {
		return
	}
	if !p.loaded {
		p.tryLoad(now)
		return
	}
	if ph := p.phase(now); ph != "SERVING" && ph != "DRAINING" {
		return
	}
	every := time.Duration(p.m.k.int(KnobDeployPollS, 30)) * time.Second
	if every <= 0 {
		every = 30 * time.Second
	}
	if now.Sub(p.lastPoll) < every {
		return
	}
	p.lastPoll = now
	_, _ = p.checkPointer(now, false)
}

// checkPointer reads the pointer and adopts it when it changed, like celld's pointer watcher;
// force adopts even an unchanged one, like POST /reload. An unreadable pointer is a failed
// poll: the old generation keeps serving.
func (p *proc) checkPointer(now time.Time, force bool) (bool, error) {
	d := &p.deploy
	ptr, err := p.readPointer()
	if err != nil {
		if d.pointerStatus != "unavailable" {
			p.m.s.log.Printf("%s/%s pointer poll failed: %v", p.m.ns, p.m.name, err)
		}
		d.pointerStatus = "unavailable"
		if force {
			d.adoption = "failed"
		}
		return false, err
	}
	if !force && ptr.Version == d.version && ptr.Prefix == d.prefix {
		d.observe(ptr, now, "unchanged")
		return false, nil
	}
	p.adopt(ptr, now)
	return true, nil
}

// adopt builds ptr as the next generation: the old one moves to deployment.draining and every
// resident cell becomes pending, converging in batches (cellGenerations).
func (p *proc) adopt(ptr pointer, now time.Time) {
	d := &p.deploy
	d.draining = append(d.draining, drainedGeneration{generation: d.generation, version: d.version,
		until: now.Add(p.m.k.ms(KnobDrainGenMS, 5000))})
	d.version, d.prefix, d.generation, d.adoptedAt = ptr.Version, ptr.Prefix, d.generation+1, now
	d.observe(ptr, now, "adopted")
	p.m.s.log.Printf("%s/%s adopted %s as generation %d", p.m.ns, p.m.name, ptr.Version, d.generation)
}

func (d *deployment) observe(ptr pointer, now time.Time, outcome string) {
	d.target, d.observedAt, d.pointerStatus, d.adoption = &ptr, now, "observed", outcome
}

// pollPointer adopts a changed pointer read from the knobs, as every /state read does (the
// pointer file is polled on its own schedule instead, see tickPointer); force adopts even an
// unchanged one. It reports whether a new generation was adopted.
func (p *proc) pollPointer(now time.Time, force bool) bool {
	if p.fileSource() && !force {
		return false
	}
	adopted, _ := p.checkPointer(now, force)
	return adopted
}

// cells lists the resident cell scopes: CELLD_SIM_RESIDENT_CELLS generated ones (stable per
// node name) plus those activated through /cell, minus those evicted through /evict.
func (p *proc) cells() []string {
	node := p.m.k.str(KnobNode, p.m.name)
	var out []string
	for i := range p.m.k.int(KnobResidentCells, 0) {
		sum := sha256.Sum256([]byte(node + "/" + strconv.FormatInt(i, 10)))
		c := "Cell:" + hex.EncodeToString(sum[:])
		if !p.evicted[c] {
			out = append(out, c)
		}
	}
	for c := range p.added {
		if !p.evicted[c] {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// cellGenerations maps each resident cell to its code generation and reports how many are
// swapping now. While an adoption converges, the first pending cells keep the old generation.
func (p *proc) cellGenerations(cells []string, now time.Time) (map[string]any, int64) {
	k, d := p.m.k, p.deploy
	pending := min(k.int(KnobPendingCells, 0), int64(len(cells)))
	swapping := k.int(KnobSwappingCells, 0)
	if !d.adoptedAt.IsZero() {
		batch := max(k.int(KnobSwapBatch, 4), 1)
		steps := int64(now.Sub(d.adoptedAt) / max(k.ms(KnobSwapMS, 1000), time.Millisecond))
		pending = max(int64(len(cells))-batch*steps, 0)
		swapping = min(pending, batch)
	}
	out := map[string]any{}
	for i, c := range cells {
		g := d.generation
		if int64(i) < pending {
			g--
		}
		out[c] = g
	}
	return out, swapping
}

// document builds the /state body of §2.4 (fork 0.6 shape). Keys are emitted sorted.
func (p *proc) document(now time.Time) map[string]any {
	k := p.m.k
	handed := p.handedOff(now)
	resident := p.residentCells(now)
	n := int64(len(resident))
	releasing := int64(0)
	if p.draining() && n > 0 {
		releasing = min(n, k.int(KnobReleases, defaultReleases))
	}
	// the process's memory is what the usage annotation says the container uses (kwok
	// reports the same to metrics-server), of which the allocator holds 4/5 in use
	cpuMilli, mem := k.usage()
	rss, inUse := k.int(KnobRSSBytes, mem), k.int(KnobInUseBytes, mem*4/5)
	phases := map[string]any{}
	if n > 0 {
		phases["resident"] = n
	}
	var owned any = n
	switch k.get(KnobOwnedCells) {
	case "absent":
		owned = nil
	case "null":
		owned = nil
	case "":
	default:
		owned = k.int(KnobOwnedCells, n)
	}
	doc := map[string]any{
		"activating": 0, "activation_waiting": k.int(KnobActWaiting, 0), "adopting": 0,
		"allocator": map[string]any{"active_bytes": inUse, "allocated_bytes": inUse, "mapped_bytes": rss,
			"resident_bytes": rss, "retained_bytes": 0},
		"capacity_waiting": k.int(KnobCapWaiting, 0), "cgroup_current_bytes": nil, "cgroup_working_set_bytes": nil,
		"evicting": 0, "handed_off": handed, "handoff_failed": 0, "in_use_bytes": inUse, "libc_malloc": nil,
		"node_load": p.nodeLoad(now, n, owned, rss, inUse, cpuMilli),
		"occupied":  n, "owned_cells": owned, "ownership": "memory", "phases": phases,
		"published": resident, "publishes": n, "quiescing": 0, "rebalance_failed": 0, "rebalanced": 0,
		"releasing": releasing, "remote_route_refreshes": 0, "residents": resident,
		"restoring": k.int(KnobRestoring, 0), "rss_bytes": rss, "shedding": nil, "stops": handed,
		"shutdown": map[string]any{"capabilities": map[string]any{"strict_disk_removal": false},
			"runtime_generation": p.gen, "schema_version": 1},
	}
	if k.get(KnobOwnedCells) == "absent" {
		delete(doc, "owned_cells")
	}
	if k.has(KnobBucket) {
		doc["ownership"] = "s3"
		doc["deployment"] = p.deploymentDoc(resident, now)
	}
	return doc
}

// residentCells are the cells still resident at now: a drain hands them off in order.
func (p *proc) residentCells(now time.Time) []string {
	cells := p.cells()
	return cells[min(int(p.handedOff(now)), len(cells)):]
}

// applicationDocument builds the GET /state?view=application body of §2.5 (keys emitted
// sorted, integers only). Without a runtime (no bucket) nothing is loaded and the snapshot is
// not valid.
func (p *proc) applicationDocument(now time.Time) map[string]any {
	d := &p.deploy
	runtime := p.m.k.has(KnobBucket) && p.loaded
	doc := map[string]any{
		"schema_version": 1, "runtime_generation": p.gen, "sampled_at_ms": now.UnixMilli(),
		"snapshot_valid": runtime, "loaded": nil, "local_generation": 0, "target": nil,
		"pointer_status": "unknown", "adoption_status": "unknown",
		"resident_cells": 0, "pending_cells": 0, "swapping_cells": 0,
	}
	if !runtime {
		return doc
	}
	resident := p.residentCells(now)
	gens, swapping := p.cellGenerations(resident, now)
	pending := 0
	for _, g := range gens {
		if g.(int64) != d.generation {
			pending++
		}
	}
	doc["loaded"] = map[string]any{"version": d.version, "prefix": d.prefix}
	doc["local_generation"] = d.generation
	if d.target != nil {
		doc["target"] = map[string]any{"version": d.target.Version, "prefix": d.target.Prefix, "observed_at_ms": d.observedAt.UnixMilli()}
	}
	doc["pointer_status"], doc["adoption_status"] = d.pointerStatus, d.adoption
	doc["resident_cells"], doc["pending_cells"], doc["swapping_cells"] = len(resident), pending, swapping
	return doc
}

// nodeLoad is /state's load view. cpu_percent_x100 is the CPU the usage annotation gives, in
// hundredths of a percent of one core: 1000m (one core busy) is 10000, 300m is 3000.
func (p *proc) nodeLoad(now time.Time, n int64, owned any, rss, inUse, cpuMilli int64) map[string]any {
	k := p.m.k
	// sampled once per second, like celld's load sampler
	sampled := now.Truncate(time.Second).Add(k.ms(KnobSampleSkewMS, 0)).UnixMilli()
	return map[string]any{
		"bucket_format": 2, "cgroup_current_bytes": nil, "cgroup_working_set_bytes": nil, "cpu_percent_x100": cpuMilli * 10,
		"draining": p.draining(), "fd_limit": 1048576, "host_websockets": 0, "in_use_bytes": inUse,
		"memory_headroom": k.bool(KnobHeadroom, true), "open_fds": 40, "owned_cells": owned,
		"placement_weight": 2, "pressured": k.bool(KnobPressured, false), "rebalance_paused": p.paused,
		"resident_cells": n, "restoring": k.int(KnobRestoring, 0), "rss_bytes": rss, "sampled_ms": sampled,
		"shed_cells": 0,
	}
}

func (p *proc) deploymentDoc(cells []string, now time.Time) map[string]any {
	d := &p.deploy
	live := d.draining[:0]
	for _, g := range d.draining {
		if now.Before(g.until) {
			live = append(live, g)
		}
	}
	d.draining = live
	draining := []any{}
	for _, g := range d.draining {
		draining = append(draining, map[string]any{"generation": g.generation, "version": g.version, "isolates": isolates(0)})
	}
	gens, swapping := p.cellGenerations(cells, now)
	return map[string]any{
		"cells": gens, "draining": draining, "generation": d.generation,
		"isolates": map[string]any{"cells": map[string]any{p.m.k.str(KnobScript, "app"): isolateStats(int64(len(cells)))},
			"services": map[string]any{}, "stateless": isolateStats(0)},
		"prefix": d.prefix, "swapping": swapping, "version": d.version,
	}
}

func isolates(n int64) map[string]any {
	return map[string]any{"cells": map[string]any{}, "services": map[string]any{}, "stateless": isolateStats(n)}
}

func isolateStats(n int64) map[string]any {
	return map[string]any{"cells": n, "external_bytes": 0, "freed": 0, "heap_bytes": 0, "live": n,
		"live_empty": 0, "requests": 0, "retiring": 0, "turns": 0}
}
