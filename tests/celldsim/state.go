package celldsim

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"time"
)

// deployment is the loaded code of one incarnation (§5.5): generation counts local
// adoptions, and after an adoption resident cells move to it in batches.
type deployment struct {
	version, prefix string
	generation      int64
	adoptedAt       time.Time // zero until the first adoption after start
	draining        []drainedGeneration
}

type drainedGeneration struct {
	generation int64
	version    string
	until      time.Time
}

func newDeployment(k knobs, _ time.Time) deployment {
	v := k.str(KnobAppVersion, defaultAppVersion)
	return deployment{version: v, prefix: k.str(KnobAppPrefix, "deploy/app/"+v), generation: 1}
}

// pollPointer adopts a changed pointer (version or prefix knob), like celld's pointer
// watcher; force adopts even an unchanged one, like POST /reload.
func (p *proc) pollPointer(now time.Time, force bool) bool {
	v := p.m.k.str(KnobAppVersion, defaultAppVersion)
	prefix := p.m.k.str(KnobAppPrefix, "deploy/app/"+v)
	d := &p.deploy
	if !force && v == d.version && prefix == d.prefix {
		return false
	}
	d.draining = append(d.draining, drainedGeneration{generation: d.generation, version: d.version,
		until: now.Add(p.m.k.ms(KnobDrainGenMS, 5000))})
	d.version, d.prefix, d.generation, d.adoptedAt = v, prefix, d.generation+1, now
	p.m.s.log.Printf("%s/%s adopted %s as generation %d", p.m.ns, p.m.name, v, d.generation)
	return true
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
	cells := p.cells()
	handed := p.handedOff(now)
	resident := cells[min(int(handed), len(cells)):]
	n := int64(len(resident))
	releasing := int64(0)
	if p.draining() && n > 0 {
		releasing = min(n, k.int(KnobReleases, defaultReleases))
	}
	rss, inUse := k.int(KnobRSSBytes, defaultRSSBytes), k.int(KnobInUseBytes, defaultInUseBytes)
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
		"node_load": p.nodeLoad(now, n, owned, rss, inUse),
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

func (p *proc) nodeLoad(now time.Time, n int64, owned any, rss, inUse int64) map[string]any {
	k := p.m.k
	// sampled once per second, like celld's load sampler
	sampled := now.Truncate(time.Second).Add(k.ms(KnobSampleSkewMS, 0)).UnixMilli()
	return map[string]any{
		"bucket_format": 2, "cgroup_current_bytes": nil, "cgroup_working_set_bytes": nil, "cpu_percent_x100": 0,
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
