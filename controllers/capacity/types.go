package capacity

import (
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Sample is one member's load as one collection saw it: the Pod's readiness, the load view of
// celld's /state, and the Metrics Server's PodMetrics for the celld container.
type Sample struct {
	// Name is the member's Pod name; for a StatefulSet, FLEET-N.
	Name string
	// Identity names the process the sample came from (Pod UID, container ID, restart count).
	// A new identity is a new process: its windows and its redistribution baseline start over.
	Identity string
	// Ready is the Pod's Ready condition, re-checked after the reads.
	Ready bool

	// RuntimeAt is the /state load view's sampled time (node_load.sampled_ms); zero when the
	// member gave no load view.
	RuntimeAt time.Time
	// Pressured is celld's own signal: node_load.pressured, or no memory headroom.
	Pressured bool
	// Backlog: the member holds work it cannot serve now (draining, rebalance paused, cells
	// waiting for capacity or activation, cells restoring).
	Backlog bool

	// MetricsAt is the PodMetrics timestamp, the end of its window; zero when the Metrics API
	// gave no sample for the member.
	MetricsAt time.Time
	// Window is the PodMetrics averaging window.
	Window time.Duration
	// CPUMillicores and MemoryMiB are the celld container's usage over Window.
	CPUMillicores int64
	MemoryMiB     int64
	// CPURequestMillicores and MemoryRequestMiB are the container's requests, what the
	// scheduler reserved for it; zero means none. A survivor absorbs a removed member's load
	// only within them.
	CPURequestMillicores int64
	MemoryRequestMiB     int64
}

// Observation is one collection over the whole fleet.
type Observation struct {
	// At is when the collection finished, on the operator's clock.
	At time.Time
	// Complete: the member list was read whole (not cut at its limit) and did not change
	// between the start and the end of the collection.
	Complete bool
	// Samples has one entry per member Pod the collection found, Ready or not.
	Samples []Sample
}

// History is the policy's durable state, kept on the storage reservation's current-operation
// annotation so it survives operator restarts and leader changes: the times of the last steps
// (the cooldowns), the declared count the policy last accounted for (manual precedence), and
// the redistribution baseline with its failed-batch count. Record is its only writer; status is
// never read back into it.
type History struct {
	// Declared is spec.replicas as the policy last accounted for it. A spec.replicas that
	// differs from it, and from the applied count, is a manual edit not yet applied.
	Declared int32 `json:"declared,omitempty"`
	// LastScaleOut and LastScaleIn are the times of the last recorded steps up and down,
	// manual or policy. Both cooldowns count from the later of the two.
	LastScaleOut time.Time `json:"lastScaleOut,omitzero"`
	LastScaleIn  time.Time `json:"lastScaleIn,omitzero"`
	// Baseline is the load the policy's last addition grew from; nil when there is none to
	// judge.
	Baseline *Baseline `json:"baseline,omitempty"`
	// FailedBatches counts the consecutive policy additions judged not to have moved load,
	// not counting the one Baseline describes.
	FailedBatches int32 `json:"failedBatches,omitempty"`
}

// Baseline is what a policy addition is judged against: when it was recorded, the counts it
// went between, and the load of each member it grew from.
type Baseline struct {
	At         time.Time `json:"at"`
	From       int32     `json:"from"`
	To         int32     `json:"to"`
	Incumbents []Load    `json:"incumbents"` // sorted by Identity, at most v1.MaxMembers
}

// Load is one incumbent's load at the time of an addition.
type Load struct {
	Name          string `json:"name"`
	Identity      string `json:"identity"`
	CPUMillicores int64  `json:"cpuMillicores"`
	MemoryMiB     int64  `json:"memoryMiB"`
	// Pressured is celld's own pressure or backlog signal at the time.
	Pressured bool `json:"pressured,omitempty"`
}

// Trend is the run of counted observations the stabilization and redistribution windows are
// measured over. The reconciler keeps it in memory, per fleet, and hands back the one the last
// Decision returned; its zero value is a fresh start. It is not persisted: an operator restart
// restarts the windows, which only delays a step, while the cooldowns live in History.
type Trend struct {
	policy v1.CapacityPolicy // the policy the windows were measured under
	at     time.Time         // the last counted observation
	// sources are the members' source timestamps at the last counted observation, sorted by
	// identity: the next one must advance every one of them.
	sources []source

	highSince, lowSince, steadySince time.Time
	// high and low count the consecutive counted observations of high and of low demand;
	// steady counts consecutive complete ones whatever the demand (the redistribution window).
	high, low, steady int32
	// pendingSince is the first observation that found a member not Ready.
	pendingSince time.Time
}

type source struct {
	identity             string
	metricsAt, runtimeAt time.Time
}

// Input is everything one decision needs.
type Input struct {
	// Policy is spec.capacity after defaulting and validation.
	Policy v1.CapacityPolicy
	// Now is the reconcile's clock.
	Now time.Time
	// Declared is spec.replicas; Applied is the replica count on the owned workload.
	Declared, Applied int32
	// Victim is the member a contraction step removes: a StatefulSet's highest ordinal. Empty
	// means Kubernetes chooses (a Deployment), so the survivor check holds for every member.
	Victim string
	// Observation is the latest collection; nil when there is none.
	Observation *Observation
	// History is the durable state; Trend the one the previous Decision returned.
	History History
	Trend   Trend
}

// Decision is the capacity policy's answer for one reconcile.
type Decision struct {
	Mode v1.CapacityMode
	// Reason is one of Reasons; Message is a sentence naming the numbers and the next step.
	Reason, Message string
	// Desired is the count the policy asks for (status.capacity.desiredReplicas). In Shadow,
	// and for a removal outside Automatic, it is a recommendation only.
	Desired int32
	// Target is the count to hand the lifecycle planner this reconcile: Applied unless the
	// mode lets the decision act, a manual edit is pending, or the /scale writer asked. The
	// planner still grows in runs and removes one member per step.
	Target int32
	// Useful counts the members that are Ready; Pending the members the workload applies that
	// are not (Applied - Useful, never negative); Covered the Ready members with a fresh load
	// and resource sample inside the window bounds. All three are zero without a trusted
	// observation, and in External mode, where the policy computes nothing.
	Useful, Pending, Covered int32
	// CapacityUncertain: a contraction was asked for in an Automatic or External fleet, and
	// the survivors' capacity to take the removed member's load is not shown. Target is held
	// at Applied and UncertainMessage names what is missing; the reconciler reports it as the
	// lifecycle reason CapacityUncertain.
	CapacityUncertain bool
	UncertainMessage  string
	// RequeueAfter is when the decision can next change without a watched object changing
	// (the next sample, a cooldown's end, a deadline); zero when only a watch can change it.
	RequeueAfter time.Duration
	// Trend is the trend to hand the next Decide.
	Trend Trend

	declared  int32  // Input.Declared, for Record
	incumbent []Load // the members an addition grows from, for Record
	failed    int32  // the failed-batch count the next policy addition records
}

// Status projects the decision onto status.capacity.
func (d *Decision) Status() v1.CapacityStatus {
	return v1.CapacityStatus{Mode: d.Mode, Reason: d.Reason, Message: d.Message, DesiredReplicas: d.Desired,
		UsefulReplicas: d.Useful, PendingReplicas: d.Pending, CoveredReplicas: d.Covered}
}
