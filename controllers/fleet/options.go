package fleet

import (
	"time"

	"github.com/celld/celld-operator/controllers/watches"
)

// Options are the operator-wide settings of the reconciler, set from flags and from the
// CelldFleet entry of watches.yaml.
type Options struct {
	// NetworkPolicyEnforced is the administrator's attestation that the CNI enforces
	// NetworkPolicy; without it no fleet is provisioned (IsolationUnverified).
	NetworkPolicyEnforced bool
	// MemberReplacementDelay is the patience before a lone down member gets a fresh disk.
	MemberReplacementDelay time.Duration
	// AbsorbWindow is how long every other member must have been Ready before a replacement:
	// by then no session depends on the down member's disk.
	AbsorbWindow time.Duration
	// TerminationMargin is how long past its grace a terminating member is force-deleted.
	TerminationMargin time.Duration
	// RequeuePeriod is the resync of a settled fleet: how often it is re-examined without an
	// event. Zero takes watches.yaml's reconcilePeriod (default DefaultResyncPeriod); drift is
	// caught by events, not by this period.
	RequeuePeriod time.Duration
	// WaitingRequeue is how often a fleet that is not settled (blocked, provisioning, routing
	// not ready) is re-examined without an event: some of what it waits for is not watched (an
	// API installed later, a Role applied, a foreign object at the fleet's name removed).
	WaitingRequeue time.Duration
	// MaxConcurrentReconciles is how many fleets are reconciled at once; zero takes
	// watches.yaml's maxConcurrentReconciles (default DefaultMaxConcurrentReconciles).
	MaxConcurrentReconciles int
	// WatchDependentResources: every change of a cached child wakes its fleet. watches.yaml's
	// watchDependentResources: false turns it off; children are then re-examined at the resync
	// period only (and still read from the caches).
	WatchDependentResources bool
	// Namespaces are the namespaces this operator watches (WATCH_NAMESPACE); empty: all. The
	// cluster-scoped reservations of fleets elsewhere belong to another instance.
	Namespaces []string
	// OperatorNamespace and OperatorServiceAccount identify the operator's Pods to the fleet
	// NetworkPolicy and mesh policy.
	OperatorNamespace      string
	OperatorServiceAccount string
	// StorageProvisioners are the CSI provisioners accepted for PersistentFleet disks.
	StorageProvisioners []string
	// NodeLossTolerationSeconds shortens the unreachable/not-ready tolerations of members
	// (e2e only); nil keeps Kubernetes' default of 300 s.
	NodeLossTolerationSeconds *int64
}

// Defaults of the settings watches.yaml may set.
const (
	DefaultResyncPeriod            = 10 * time.Minute
	DefaultMaxConcurrentReconciles = 16
)

// DefaultOptions are the production defaults from the seeds.
func DefaultOptions() Options {
	return Options{
		MemberReplacementDelay:  10 * time.Minute,
		AbsorbWindow:            5 * time.Minute,
		TerminationMargin:       2 * time.Minute,
		WaitingRequeue:          30 * time.Second,
		WatchDependentResources: true,
		OperatorNamespace:       "celld-system",
		OperatorServiceAccount:  "celld-operator",
		StorageProvisioners:     []string{"ebs.csi.aws.com"},
	}
}

// withWatch fills what the options leave unset from the CelldFleet watch, then the defaults.
func (o Options) withWatch(w watches.Watch) Options {
	if o.RequeuePeriod == 0 && w.ReconcilePeriod != nil {
		o.RequeuePeriod = w.ReconcilePeriod.Duration
	}
	if o.RequeuePeriod == 0 {
		o.RequeuePeriod = DefaultResyncPeriod
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = w.MaxConcurrentReconciles
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if w.WatchDependentResources != nil && !*w.WatchDependentResources {
		o.WatchDependentResources = false
	}
	if o.WaitingRequeue <= 0 || o.WaitingRequeue > o.RequeuePeriod {
		o.WaitingRequeue = min(30*time.Second, o.RequeuePeriod)
	}
	return o
}
