// Package celldsim simulates celld's externally visible contract for the pods of a local
// cluster: it is the celld process of every fleet pod and the kubelet's readiness prober.
//
// For each pod labelled celld.eric.dev/fleet-uid that has a loopback pod IP on a node kwok
// manages, it serves the public listener (podIP:8080, GET /.well-known/celld/health) and the
// internal listener (podIP:8081, GET /state and the other operator routes of
// shared/spec/celld-runtime.md §2.3), probes the health route like a kubelet and patches the
// pod's Ready and ContainersReady conditions (not Ready after the probe's failureThreshold
// consecutive failures; a probe that failed while this process itself was starved counts for
// nothing: readiness.go), drains a deleted pod and then finishes its deletion, and restarts the
// simulated process after it exits (kill, crash, fence, or an env that celld's start-up
// validation refuses: validate.go).
//
// Behaviour is set per pod by CELLD_SIM_* knobs: plain env values of the pod's celld
// container, overridden by pod annotations sim.celld.eric.dev/CELLD_SIM_*, overridden by
// POST /__sim/config on the internal listener. See knobs.go for the list and defaults.
package celldsim
