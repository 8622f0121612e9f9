package fleet

import "time"

// Options are the operator-wide settings of the reconciler, set from flags.
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
	// RequeuePeriod is how often a fleet is re-examined without an event.
	RequeuePeriod time.Duration
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

// DefaultOptions are the production defaults from the seeds.
func DefaultOptions() Options {
	return Options{
		MemberReplacementDelay: 10 * time.Minute,
		AbsorbWindow:           5 * time.Minute,
		TerminationMargin:      2 * time.Minute,
		RequeuePeriod:          5 * time.Second,
		OperatorNamespace:      "celld-system",
		OperatorServiceAccount: "celld-operator",
		StorageProvisioners:    []string{"ebs.csi.aws.com"},
	}
}
