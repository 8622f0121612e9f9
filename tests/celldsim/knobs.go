package celldsim

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	// FleetLabel marks the pods the simulator runs celld for (and kwok leaves unready).
	FleetLabel = "celld.eric.dev/fleet-uid"
	// AnnotationPrefix prefixes knob overrides on a pod: sim.celld.eric.dev/CELLD_SIM_STATE_MODE.
	// Annotations work from any process with API access, so faults need no shared memory.
	AnnotationPrefix = "sim.celld.eric.dev/"
	// KillAnnotation: each new value kills the simulated process once (exit code from
	// CELLD_SIM_CRASH_CODE, default 1); it restarts after CELLD_SIM_RESTART_MS.
	KillAnnotation = AnnotationPrefix + "kill"
	// ContainerName is the container whose env holds the knobs; else the first container.
	ContainerName = "celld"

	// UsageCPUAnnotation and UsageMemoryAnnotation set what the celld container uses, as
	// resource quantities ("300m", "900Mi"). The local cluster's kubelet emulation (kwok)
	// reports them to metrics-server, so PodMetrics follow, and /state's node_load follows
	// them too (usage). Without them the container uses DefaultUsageCPU and
	// DefaultUsageMemory. A value that does not parse counts as absent here, and as zero usage
	// in kwok, which makes metrics-server drop the pod.
	UsageCPUAnnotation    = AnnotationPrefix + "usage-cpu"
	UsageMemoryAnnotation = AnnotationPrefix + "usage-memory"
	DefaultUsageCPU       = "1m"
	DefaultUsageMemory    = "50Mi"

	// HealthPort serves the public listener, InternalPort the operator API.
	HealthPort   = 8080
	InternalPort = 8081
	// HealthPath is celld's readiness route on the public listener.
	HealthPath = "/.well-known/celld/health"
)

// Knob names with their defaults. Durations are milliseconds. The defaults make a fresh pod
// Ready about 0.3 s after kwok starts it, and an idle pod exit 0.1 s after its deletion.
const (
	KnobPointerWaitMS  = "CELLD_SIM_POINTER_WAIT_MS"     // 0: before any listener accepts
	KnobLoadMS         = "CELLD_SIM_LOAD_MS"             // 0: runtime build, still not accepting
	KnobRecoveryMS     = "CELLD_SIM_RECOVERY_MS"         // 200 with a bucket and fleet durability, else 0; /state answers 503
	KnobRecovery       = "CELLD_SIM_RECOVERY"            // ok | fail (exit 1 after recovery) | block (never ends)
	KnobLeaseMS        = "CELLD_SIM_LEASE_MS"            // 100: authority, nothing accepts
	KnobFleetGateMS    = "CELLD_SIM_FLEET_GATE_MS"       // 0: health stays 503 this long after SERVING
	KnobHealthMode     = "CELLD_SIM_HEALTH_MODE"         // auto | ok | fail | hang | slow:<ms> | flap:<ms>
	KnobStateMode      = "CELLD_SIM_STATE_MODE"          // normal; see state.go for the fault modes
	KnobAppVersion     = "CELLD_SIM_APP_VERSION"         // 854305e196452678
	KnobAppPrefix      = "CELLD_SIM_APP_PREFIX"          // deploy/app/<version>
	KnobResidentCells  = "CELLD_SIM_RESIDENT_CELLS"      // 0
	KnobOwnedCells     = "CELLD_SIM_OWNED_CELLS"         // = resident; "absent" or "null" drop it
	KnobPendingCells   = "CELLD_SIM_PENDING_CELLS"       // 0: cells kept on generation-1
	KnobSwappingCells  = "CELLD_SIM_SWAPPING_CELLS"      // 0: deployment.swapping outside an adoption
	KnobSwapBatch      = "CELLD_SIM_SWAP_BATCH"          // 4 cells per swap step after an adoption
	KnobSwapMS         = "CELLD_SIM_SWAP_MS"             // 1000 per swap step
	KnobDrainGenMS     = "CELLD_SIM_DRAIN_GENERATION_MS" // 5000: superseded generation stays in deployment.draining
	KnobRestoring      = "CELLD_SIM_RESTORING"           // 0
	KnobActWaiting     = "CELLD_SIM_ACTIVATION_WAITING"  // 0
	KnobCapWaiting     = "CELLD_SIM_CAPACITY_WAITING"    // 0
	KnobPressured      = "CELLD_SIM_PRESSURED"           // false
	KnobHeadroom       = "CELLD_SIM_MEMORY_HEADROOM"     // true
	KnobRSSBytes       = "CELLD_SIM_RSS_BYTES"           // the memory usage (50 MiB); set, /state no longer follows it
	KnobInUseBytes     = "CELLD_SIM_IN_USE_BYTES"        // 4/5 of the memory usage (40 MiB)
	KnobSampleSkewMS   = "CELLD_SIM_SAMPLE_SKEW_MS"      // 0: node_load.sampled_ms offset (negative = stale)
	KnobDrainMS        = "CELLD_SIM_DRAIN_MS"            // unset: 100 + handoff steps; how long a drain lasts
	KnobHandoffStepMS  = "CELLD_SIM_HANDOFF_STEP_MS"     // 200 per batch of CELLD_RELEASES cells
	KnobDrainStall     = "CELLD_SIM_DRAIN_STALL"         // 0: 1 = no handoff progress, exit at CELLD_SHUTDOWN_TOTAL_MS
	KnobDrainIgnore    = "CELLD_SIM_DRAIN_IGNORE"        // 0: 1 = never exit (the pod's grace period ends it)
	KnobRestartMS      = "CELLD_SIM_RESTART_MS"          // 1000: container restart delay after an exit
	KnobCrashAfterMS   = "CELLD_SIM_CRASH_AFTER_MS"      // unset: exit with CELLD_SIM_CRASH_CODE this long after start
	KnobCrashCode      = "CELLD_SIM_CRASH_CODE"          // 1
	KnobFenceAfterMS   = "CELLD_SIM_FENCE_AFTER_MS"      // unset: SELF-FENCE, exit 3, this long after SERVING
	KnobRuntimeGen     = "CELLD_SIM_RUNTIME_GENERATION"  // unset: 64 random hex per process start
	KnobReload         = "CELLD_SIM_RELOAD"              // adopt | fail | unavailable
	KnobVersion        = "CELLD_SIM_VERSION"             // 0.6.0-ewhauser.2
	KnobScript         = "CELLD_SIM_SCRIPT"              // app
	KnobPointerFile    = "CELLD_SIM_POINTER_FILE"        // unset: JSON {"version","prefix"} as the pointer source (with a bucket)
	KnobAppView        = "CELLD_SIM_APPLICATION_VIEW"    // 0: 1 serves GET /state?view=application
	KnobFeatures       = "CELLD_SIM_FEATURES"            // export-kafka: build features of the emulated image (export-kafka, export-blob-stream, perf; none)
	KnobShutdownTotal  = "CELLD_SHUTDOWN_TOTAL_MS"       // 40000 (celld's own variable)
	KnobReleases       = "CELLD_RELEASES"                // 128 (celld's own variable)
	KnobReadyGateMS    = "CELLD_READY_FLEET_GATE_MS"     // 120000; 0 disables the gate (celld's own)
	KnobDeployPollS    = "CELLD_DEPLOY_POLL_S"           // 30: pointer file poll interval, seconds (celld's own variable)
	KnobBucket         = "CELLD_BUCKET"                  // unset: no recovery, no deployment, ownership memory
	KnobDurability     = "CELLD_DURABILITY"              // fleet
	KnobNode           = "CELLD_NODE"                    // pod name
	defaultAppVersion  = "854305e196452678"
	defaultSimVersion  = "0.6.0-ewhauser.2"
	defaultRestartMS   = 1000
	defaultShutdownMS  = 40000
	defaultReleases    = 128
	defaultHandoffStep = 200
)

// knobs resolves knob values: runtime overrides, then pod annotations, then container env.
type knobs struct {
	env         map[string]string
	annotations map[string]string
	overrides   map[string]string
}

func (k knobs) get(name string) string {
	if v, ok := k.overrides[name]; ok {
		return v
	}
	if v, ok := k.annotations[AnnotationPrefix+name]; ok {
		return v
	}
	return k.env[name]
}

func (k knobs) has(name string) bool { return k.get(name) != "" }

// usage is the celld container's CPU in millicores and memory in bytes: the usage
// annotations, else the defaults.
func (k knobs) usage() (cpuMilli, memBytes int64) {
	quantity := func(key, def string) resource.Quantity {
		if q, err := resource.ParseQuantity(k.annotations[key]); err == nil {
			return q
		}
		return resource.MustParse(def)
	}
	cpu, mem := quantity(UsageCPUAnnotation, DefaultUsageCPU), quantity(UsageMemoryAnnotation, DefaultUsageMemory)
	return cpu.MilliValue(), mem.Value()
}

func (k knobs) int(name string, def int64) int64 {
	v, err := strconv.ParseInt(strings.TrimSpace(k.get(name)), 10, 64)
	if err != nil {
		return def
	}
	return v
}

func (k knobs) ms(name string, def int64) time.Duration {
	return time.Duration(k.int(name, def)) * time.Millisecond
}

func (k knobs) bool(name string, def bool) bool {
	switch strings.ToLower(strings.TrimSpace(k.get(name))) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	return def
}

func (k knobs) str(name, def string) string {
	if v := k.get(name); v != "" {
		return v
	}
	return def
}

// recoveryDelay follows §5.9: recovery only exists with a bucket; a fleet-durability node
// spends 200 ms recovering its predecessor's log, a bucket node none.
func (k knobs) recoveryDelay() time.Duration {
	if !k.has(KnobBucket) {
		return 0
	}
	def := int64(200)
	if k.str(KnobDurability, "fleet") == "bucket" {
		def = 0
	}
	return k.ms(KnobRecoveryMS, def)
}

// podEnv reads the plain env of the celld container and resolves the downward-API fields a
// fleet uses (pod name, namespace, UID, IP), so CELLD_NODE means what it means in the pod.
func podEnv(pod *corev1.Pod) map[string]string {
	env, _ := containerEnv(pod)
	return env
}

// containerEnv resolves the celld container's env like the kubelet: plain values with $(VAR)
// references to earlier entries, and the downward-API fields of fieldValue. Names whose value
// the simulator cannot know (secretKeyRef, configMapKeyRef, resourceFieldRef, another field, or
// a plain value that references one of those) are returned as opaque instead.
func containerEnv(pod *corev1.Pod) (env map[string]string, opaque map[string]bool) {
	env, opaque = map[string]string{}, map[string]bool{}
	if len(pod.Spec.Containers) == 0 {
		return env, opaque
	}
	c := pod.Spec.Containers[0]
	for _, cc := range pod.Spec.Containers {
		if cc.Name == ContainerName {
			c = cc
		}
	}
	for _, e := range c.Env {
		delete(env, e.Name)
		delete(opaque, e.Name)
		switch {
		case e.ValueFrom == nil && !refersTo(e.Value, opaque):
			env[e.Name] = expandEnv(e.Value, env)
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && knownField(e.ValueFrom.FieldRef.FieldPath):
			env[e.Name] = fieldValue(pod, e.ValueFrom.FieldRef.FieldPath)
		default:
			opaque[e.Name] = true
		}
	}
	return env, opaque
}

// refersTo reports whether v references one of names as $(NAME).
func refersTo(v string, names map[string]bool) bool {
	for n := range names {
		if strings.Contains(v, "$("+n+")") {
			return true
		}
	}
	return false
}

// expandEnv resolves $(VAR) references to earlier entries, as the kubelet does.
func expandEnv(v string, env map[string]string) string {
	for k, val := range env {
		v = strings.ReplaceAll(v, "$("+k+")", val)
	}
	return v
}

func knownField(path string) bool {
	switch path {
	case "metadata.name", "metadata.namespace", "metadata.uid", "status.podIP", "spec.nodeName":
		return true
	}
	return false
}

func fieldValue(pod *corev1.Pod, path string) string {
	switch path {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	case "metadata.uid":
		return string(pod.UID)
	case "status.podIP":
		return pod.Status.PodIP
	case "spec.nodeName":
		return pod.Spec.NodeName
	}
	return ""
}
