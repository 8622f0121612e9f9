package celldsim

import (
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// member is one fleet pod: the container the kubelet would run, restarted whenever the
// simulated celld process exits, plus that kubelet's readiness prober.
type member struct {
	s         *Simulator
	uid       types.UID
	ns, name  string
	ip, node  string
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	mu        sync.Mutex
	pod       *corev1.Pod
	k         knobs
	proc      *proc // nil while the process is not running
	powered   bool  // the node's kubelet is alive
	killSeen  string
	exitedAt  time.Time
	preserved string                 // runtime generation handed over by a preserve shutdown
	status    corev1.ContainerStatus // our container's status, authoritative over the cache
	synced    bool                   // status and readiness have been written since the last change
	ready     bool                   // readiness last written
	patchedAt time.Time
	probeOK   bool // the probe's verdict: Ready while the process runs
	// probeFails counts consecutive failed probes of the running incarnation (readiness.go).
	probeFails int
	deleted    bool // the simulator already finished the pod's deletion
}

func newMember(s *Simulator, p *corev1.Pod, powered bool) *member {
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{
		s: s, uid: p.UID, ns: p.Namespace, name: p.Name, ip: p.Status.PodIP, node: p.Spec.NodeName,
		ctx: ctx, cancel: cancel, pod: p, killSeen: p.Annotations[KillAnnotation],
		powered: powered,
	}
	m.k = knobs{env: podEnv(p), annotations: p.Annotations, overrides: map[string]string{}}
	m.status = ourStatus(p)
	m.synced = true
	if m.powered && p.DeletionTimestamp == nil {
		m.startProc(time.Now(), false)
	}
	m.wg.Add(2)
	go m.lifecycle()
	go m.prober()
	return m
}

func (m *member) nodeName() string { return m.node }

// update takes a new version of the pod from the watch.
func (m *member) update(p *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pod = p
	m.k.annotations = p.Annotations
	if v := p.Annotations[KillAnnotation]; v != m.killSeen {
		m.killSeen = v
		if m.proc != nil && !m.proc.draining() {
			m.s.log.Printf("%s/%s killed through %s=%q", m.ns, m.name, KillAnnotation, v)
			m.exitLocked(int32(m.k.int(KnobCrashCode, 1)), "killed")
		}
	}
}

func (m *member) setPowered(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.powered = on
	if !on && m.proc != nil {
		// the machine is gone: the process vanishes without a word to the API
		m.proc.close()
		m.proc = nil
		m.exitedAt = time.Now()
	}
}

func (m *member) stop() {
	m.cancel()
	m.mu.Lock()
	if m.proc != nil {
		m.proc.close()
		m.proc = nil
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *member) phaseName() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return "EXITED"
	}
	return m.proc.phase(time.Now())
}

// lifecycle advances the time-driven transitions: start-up phases, crashes, drain, restart.
func (m *member) lifecycle() {
	defer m.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case now := <-tick.C:
			if del := m.step(now); del {
				m.finishDeletion()
			}
			m.writeStatus()
		}
	}
}

// step applies the transitions due at now. It reports whether the pod's deletion should be
// finished (the process exited while the pod was terminating on a live node).
func (m *member) step(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.powered || m.deleted {
		return false
	}
	deleting := m.pod.DeletionTimestamp != nil
	p := m.proc
	if p == nil {
		if deleting {
			return true
		}
		if now.Sub(m.exitedAt) >= m.k.ms(KnobRestartMS, defaultRestartMS) {
			m.startProc(now, true)
		}
		return false
	}
	if deleting && !p.draining() {
		p.beginDrain(now, "pod deleted")
	}
	p.tickPointer(now)
	if code, why, exit := p.due(now); exit {
		m.s.log.Printf("%s/%s exits %d: %s", m.ns, m.name, code, why)
		m.exitLocked(code, why)
		return deleting
	}
	return false
}

// startProc starts a new incarnation on the pod IP. A failed bind (the previous listener is
// still closing) is retried on the next tick. An env that celld refuses (validate.go) ends the
// incarnation at once, before it binds anything, like celld exiting 1 at start-up: the
// container turns Terminated and the next start follows the restart delay, like any other exit.
func (m *member) startProc(now time.Time, restart bool) {
	startErr := validateEnv(m.startEnv())
	p := &proc{m: m, start: now} // binds nothing
	if startErr == nil {
		var err error
		if p, err = newProc(m, now); err != nil {
			m.s.log.Printf("%s/%s start: %v", m.ns, m.name, err)
			return
		}
	}
	m.proc = p
	if restart {
		m.status.LastTerminationState = m.status.State
		m.status.RestartCount++
	}
	m.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
	m.status.Started = ptr(true)
	m.status.Ready = false
	m.probeOK, m.probeFails = false, 0
	m.synced = !restart
	if startErr != nil {
		m.s.log.Printf("%s/%s Error: %v", m.ns, m.name, startErr)
		m.exitLocked(1, "Error: "+startErr.Error())
		return
	}
	m.s.log.Printf("%s/%s celld started on %s (runtime_generation %s, restarts %d)", m.ns, m.name, m.ip, p.gen, m.status.RestartCount)
	// A process due to exit at once (CELLD_SIM_CRASH_AFTER_MS=0) exits before any probe can
	// reach it: under load the next tick came after a probe had seen it healthy, and that
	// member turned Ready for a moment, which restarted its replacement delay.
	if code, why, due := p.due(now); due {
		m.exitLocked(code, why)
	}
}

// startEnv is the environment celld validates at start: the container's env, with the knob
// annotations and runtime overrides of the same names applied on top (an empty one unsets the
// name), so a fault test can hand celld a bad value. The Kafka properties file is read from
// the local file system; where it does not exist its checks are skipped.
func (m *member) startEnv() (map[string]string, map[string]bool, func(string) ([]byte, error)) {
	env, opaque := containerEnv(m.pod)
	set := func(name, v string) {
		delete(opaque, name)
		if v == "" {
			delete(env, name)
		} else {
			env[name] = v
		}
	}
	for k, v := range m.k.annotations {
		if name, ok := strings.CutPrefix(k, AnnotationPrefix); ok && !notEnv[k] {
			set(name, v)
		}
	}
	for name, v := range m.k.overrides {
		set(name, v)
	}
	return env, opaque, os.ReadFile
}

// notEnv are the annotations under AnnotationPrefix that are not knobs (env names).
var notEnv = map[string]bool{KillAnnotation: true, UsageCPUAnnotation: true, UsageMemoryAnnotation: true}

// exitLocked ends the running process with code, like the container exiting.
func (m *member) exitLocked(code int32, why string) {
	p := m.proc
	if p == nil {
		return
	}
	p.close()
	m.proc = nil
	now := time.Now()
	m.exitedAt = now
	if p.preserveGen != "" {
		m.preserved = p.preserveGen
	}
	reason := "Error"
	if code == 0 {
		reason = "Completed"
	}
	started := metav1.NewTime(p.start)
	if m.status.State.Running != nil {
		started = m.status.State.Running.StartedAt
	}
	m.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: why, StartedAt: started, FinishedAt: metav1.NewTime(now),
	}}
	m.status.Started = ptr(false)
	m.status.Ready = false
	m.probeOK, m.probeFails = false, 0
	m.synced = false
}

// finishDeletion removes a pod whose process has exited, as the kubelet does once every
// container of a terminating pod has stopped (grace 0, UID precondition).
func (m *member) finishDeletion() {
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	err := m.s.o.Client.CoreV1().Pods(m.ns).Delete(ctx, m.name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr(int64(0)), Preconditions: &metav1.Preconditions{UID: &m.uid},
	})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		m.mu.Lock()
		m.deleted = true
		m.mu.Unlock()
		m.s.log.Printf("%s/%s deleted after drain", m.ns, m.name)
	}
}

// prober is the kubelet's readiness probe: GET the health route on the pod IP.
func (m *member) prober() {
	defer m.wg.Done()
	tick := time.NewTicker(m.s.o.ProbePeriod)
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-tick.C:
		}
		m.probeOnce()
		m.writeStatus()
	}
}

// probeOnce probes the running incarnation once and records the answer (probed).
func (m *member) probeOnce() {
	m.mu.Lock()
	p := m.proc
	running := p != nil && m.powered
	m.mu.Unlock()
	if !running {
		return
	}
	start := time.Now()
	ok := false
	if resp, err := m.s.probe.Get("http://" + net.JoinHostPort(m.ip, strconv.Itoa(HealthPort)) + HealthPath); err == nil {
		ok = resp.StatusCode == http.StatusOK
		resp.Body.Close()
	}
	m.probed(p, ok, start)
}

func ptr[T any](v T) *T { return &v }
