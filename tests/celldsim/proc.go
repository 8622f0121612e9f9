package celldsim

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// proc is one incarnation of the simulated celld process: its listeners, its start-up
// timeline, its deployment and its drain. Every field is guarded by the member's mutex.
type proc struct {
	m           *member
	start       time.Time
	gen         string // shutdown.runtime_generation, new per incarnation
	servers     []*http.Server
	drainStart  time.Time
	drainWhy    string
	crash       *int32 // exit code requested through /__sim/crash or /__sim/fence
	preserveGen string // set by POST /shutdown?handoff=preserve
	gateForced  bool
	paused      bool
	deploy      deployment
	loaded      bool      // the pointer wait is over: generation 1 is built
	pointerAt   time.Time // when the pointer wait ended
	lastPoll    time.Time // the pointer file's last poll
	pointerErr  string    // the last pointer read error logged during the wait
	added       map[string]bool
	evicted     map[string]bool
	counters    map[string]int64
}

// newProc binds both listeners on the pod IP and starts serving. Requests that arrive before
// the phase that accepts them hang, as they do against celld (see handlers.go).
func newProc(m *member, now time.Time) (*proc, error) {
	p := &proc{m: m, start: now, gen: m.k.get(KnobRuntimeGen), added: map[string]bool{}, evicted: map[string]bool{}, counters: map[string]int64{}}
	if p.gen == "" && m.preserved != "" {
		p.gen, m.preserved = m.preserved, ""
	}
	if p.gen == "" {
		p.gen = randomHex(32)
	}
	p.startDeployment(now)
	for _, port := range []int{HealthPort, InternalPort} {
		l, err := net.Listen("tcp", net.JoinHostPort(m.ip, strconv.Itoa(port)))
		if err != nil {
			p.close()
			return nil, fmt.Errorf("listen %s:%d: %w", m.ip, port, err)
		}
		h := p.publicHandler()
		if port == InternalPort {
			h = p.internalHandler()
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
		p.servers = append(p.servers, srv)
		go func() { _ = srv.Serve(l) }()
	}
	return p, nil
}

// close drops the listeners and every open connection, like a process exit.
func (p *proc) close() {
	for _, s := range p.servers {
		_ = s.Close()
	}
}

func (p *proc) draining() bool { return !p.drainStart.IsZero() }

func (p *proc) beginDrain(now time.Time, why string) {
	if p.draining() {
		return // further signals are ignored
	}
	p.drainStart, p.drainWhy = now, why
	p.m.s.log.Printf("%s/%s draining: %s", p.m.ns, p.m.name, why)
}

// Start-up timeline (§5.2): pointer wait and load (nothing accepted), recovery (internal
// listener answers 503), lease (nothing accepted), then SERVING. The pointer wait lasts
// CELLD_SIM_POINTER_WAIT_MS, and with a pointer file until the file reads (startDeployment);
// until then every later phase lies in the far future.
func (p *proc) recoveryStart() time.Time {
	if !p.loaded {
		return farFuture
	}
	return p.pointerAt.Add(p.m.k.ms(KnobLoadMS, 0))
}

var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

func (p *proc) recoveryBlocked() bool { return p.m.k.str(KnobRecovery, "ok") == "block" }

func (p *proc) servingAt() time.Time {
	return p.recoveryStart().Add(p.m.k.recoveryDelay() + p.m.k.ms(KnobLeaseMS, 100))
}

func (p *proc) phase(now time.Time) string {
	k := p.m.k
	switch {
	case p.draining():
		return "DRAINING"
	case !p.loaded || now.Before(p.pointerAt):
		return "BOUND"
	case now.Before(p.recoveryStart()):
		return "LOADED"
	case p.recoveryBlocked() || now.Before(p.recoveryStart().Add(k.recoveryDelay())):
		return "RECOVERY"
	case now.Before(p.servingAt()):
		return "LEASE"
	}
	return "SERVING"
}

// fleetReady is the one-shot first-readiness gate: open at SERVING without a bucket or with
// the gate disabled, else CELLD_SIM_FLEET_GATE_MS after SERVING (or when forced).
func (p *proc) fleetReady(now time.Time) bool {
	k := p.m.k
	if p.phase(now) != "SERVING" && !p.draining() {
		return false
	}
	if p.gateForced || !k.has(KnobBucket) || k.int(KnobReadyGateMS, 120000) == 0 {
		return true
	}
	return !now.Before(p.servingAt().Add(k.ms(KnobFleetGateMS, 0)))
}

// healthy is the answer of the health route in auto mode.
func (p *proc) healthy(now time.Time) bool {
	return !p.draining() && p.phase(now) == "SERVING" && p.fleetReady(now)
}

// drainEnd is when a drain finishes: CELLD_SIM_DRAIN_MS if set, else 100 ms plus one
// handoff step per CELLD_RELEASES resident cells; a stalled drain ends at the shutdown
// budget; an ignoring one never (the grace period's SIGKILL ends it).
func (p *proc) drainEnd() (time.Time, bool) {
	k := p.m.k
	if k.bool(KnobDrainIgnore, false) {
		return time.Time{}, false
	}
	if k.bool(KnobDrainStall, false) {
		return p.drainStart.Add(k.ms(KnobShutdownTotal, defaultShutdownMS)), true
	}
	if k.has(KnobDrainMS) {
		return p.drainStart.Add(k.ms(KnobDrainMS, 0)), true
	}
	return p.drainStart.Add(100*time.Millisecond + time.Duration(p.handoffSteps())*k.ms(KnobHandoffStepMS, defaultHandoffStep)), true
}

func (p *proc) handoffSteps() int64 {
	n := int64(len(p.cells()))
	r := max(p.m.k.int(KnobReleases, defaultReleases), 1)
	return (n + r - 1) / r
}

// handedOff is how many resident cells the drain has moved by now.
func (p *proc) handedOff(now time.Time) int64 {
	if !p.draining() || p.m.k.bool(KnobDrainStall, false) {
		return 0
	}
	n := int64(len(p.cells()))
	end, ok := p.drainEnd()
	if !ok {
		return 0
	}
	total := end.Sub(p.drainStart)
	if total <= 0 || !now.Before(end) {
		return n
	}
	return n * int64(now.Sub(p.drainStart)) / int64(total)
}

// due reports whether the process exits at now, with its code and reason.
func (p *proc) due(now time.Time) (int32, string, bool) {
	k := p.m.k
	if p.crash != nil {
		return *p.crash, "crash requested through /__sim", true
	}
	if k.str(KnobRecovery, "ok") == "fail" && !now.Before(p.recoveryStart().Add(k.recoveryDelay())) {
		return 1, "refusing to install a lease over an unrecovered predecessor log", true
	}
	if d := k.ms(KnobCrashAfterMS, -1); d >= 0 && !now.Before(p.start.Add(d)) {
		return int32(k.int(KnobCrashCode, 1)), "crash after " + d.String(), true
	}
	if d := k.ms(KnobFenceAfterMS, -1); d >= 0 && !now.Before(p.servingAt().Add(d)) {
		return 3, "SELF-FENCE: node lease not renewed within TTL — halting", true
	}
	if p.draining() {
		if end, ok := p.drainEnd(); ok && !now.Before(end) {
			if k.bool(KnobDrainStall, false) {
				p.m.s.log.Printf("%s/%s shutdown_handoff_stalled", p.m.ns, p.m.name)
			}
			return 0, "drained (" + p.drainWhy + ")", true
		}
	}
	return 0, "", false
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
