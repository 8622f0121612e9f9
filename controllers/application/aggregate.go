package application

import (
	"cmp"
	"errors"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/celld"
)

// Per-Pod reasons of status.application.nodes that have no condition reason of the same name.
const (
	NodeUnavailable        = "Unavailable"
	NodeCellsTransitioning = "CellsTransitioning"
)

// Member is one Pod of the opening membership and what reading it returned.
type Member struct {
	Name, UID string
	// Ready, Identity, IP, Deleting and Started come from the opening inventory. Identity is
	// "<podUID>/<containerID>/<restartCount>" of the running celld container, "" when it does
	// not run; Started is when that container started.
	Ready    bool
	Identity string
	IP       string
	Deleting bool
	Started  time.Time
	// Read says whether /state was requested (an ineligible Pod, or one still queued when the
	// deadline passed, is not); Reading and Err are the answer.
	Read    bool
	Reading celld.Reading
	Err     error
}

// Facts are everything one observation of a fleet decides on.
type Facts struct {
	// Now is when the collection finished; freshness is judged against it.
	Now time.Time
	// Generation is the fleet generation the observation started from.
	Generation int64
	// MaxAge is the oldest reading still fresh.
	MaxAge time.Duration
	// Verdict, when set, is an Unknown reason decided before any member was read:
	// InvalidConfiguration, FleetDeleting, WorkloadUnavailable or MembershipUnavailable.
	Verdict string
	// Expected is max(workload replicas, status.desiredReplicas).
	Expected int32
	// Members is the opening membership in name order.
	Members []Member
	// MembershipChanged says the closing inventory differed from the opening one.
	MembershipChanged bool
}

// Result is what an observation publishes.
type Result struct {
	Status      metav1.ConditionStatus
	Reason      string
	Generation  int64
	Application v1.ApplicationStatus
	// Capacity is the capacity policy's observation from the same collection; nil for a fleet
	// without spec.capacity or an observer that feeds no policy. It is not published here.
	Capacity *capacity.Observation
}

// Aggregate computes status.application and the ApplicationConverged verdict (reference §2
// steps 5–10). It has no clock and no client: Facts carries both.
func Aggregate(f Facts) Result {
	r := Result{Status: metav1.ConditionUnknown, Generation: f.Generation}
	app := &r.Application
	app.ObservedAt = &metav1.Time{Time: f.Now}
	app.ExpectedNodes = f.Expected
	if f.Verdict != "" {
		r.Reason = f.Verdict
		app.UnavailableNodes = f.Expected
		return r
	}

	type key struct{ version, prefix string }
	counts := map[key]int32{}
	var stale int32
	seen := map[string]bool{} // node reasons present, for the Unknown reason below
	for _, m := range f.Members {
		reason := nodeReason(m, f.Now, f.MaxAge)
		seen[reason] = true
		node := v1.ApplicationNode{Name: m.Name, UID: m.UID, Reason: reason}
		if fresh(reason) {
			d := m.Reading.Deployment
			app.ObservedNodes++
			app.PendingCells += int64(d.PendingCells)
			app.SwappingCells += d.SwappingCells
			counts[key{d.Version, d.Prefix}]++
			node.Version, node.RuntimeGeneration = d.Version, m.Reading.RuntimeGeneration
		} else {
			stale++
		}
		if len(app.Nodes) < MaxMembers {
			app.Nodes = append(app.Nodes, node)
		}
	}
	app.UnavailableNodes = max(stale, f.Expected-app.ObservedNodes)
	for k, n := range counts {
		app.Versions = append(app.Versions, v1.ApplicationVersionCount{Version: k.version, Prefix: k.prefix, Nodes: n})
	}
	slices.SortFunc(app.Versions, func(a, b v1.ApplicationVersionCount) int {
		return cmp.Or(cmp.Compare(a.Version, b.Version), cmp.Compare(a.Prefix, b.Prefix))
	})
	app.Versions = app.Versions[:min(len(app.Versions), MaxVersions)]

	switch {
	case f.MembershipChanged:
		r.Reason = v1.ReasonMembershipChanged
	case len(f.Members) == 0 || len(f.Members) != int(f.Expected) || app.UnavailableNodes != 0:
		r.Reason = incompleteReason(seen)
	case len(counts) > 1:
		r.Status, r.Reason = metav1.ConditionFalse, v1.ReasonMixedVersions
	default:
		v := app.Versions[0]
		app.ObservedVersion = &v1.ApplicationVersion{Version: v.Version, Prefix: v.Prefix}
		r.Status, r.Reason = metav1.ConditionTrue, v1.ReasonConverged
		if seen[NodeCellsTransitioning] {
			r.Status, r.Reason = metav1.ConditionFalse, v1.ReasonConverging
		}
	}
	return r
}

// nodeReason judges one member (reference §2 step 5), re-checking freshness at now.
func nodeReason(m Member, now time.Time, maxAge time.Duration) string {
	switch {
	case !m.Ready || m.Identity == "" || m.IP == "" || m.Deleting || !m.Read:
		// a terminating member is draining: what it reports is on its way out
		return NodeUnavailable
	case errors.Is(m.Err, celld.ErrUnsupported):
		return v1.ReasonUnsupported
	case errors.Is(m.Err, celld.ErrMalformed), errors.Is(m.Err, celld.ErrTooLarge):
		// an oversized body is refused, not truncated: the node answered outside the contract
		return v1.ReasonMalformed
	case m.Err != nil:
		return NodeUnavailable
	case now.Sub(m.Reading.Received) > maxAge, m.Started.IsZero(), m.Reading.Sent.Before(m.Started):
		// an answer to a request sent before the container started may come from the previous
		// incarnation, whose code is gone
		return v1.ReasonStale
	case m.Reading.Deployment.PendingCells > 0 || m.Reading.Deployment.SwappingCells > 0:
		return NodeCellsTransitioning
	default:
		return v1.ReasonConverged
	}
}

func fresh(reason string) bool {
	return reason == v1.ReasonConverged || reason == NodeCellsTransitioning
}

// incompleteReason names why coverage is incomplete. A member that answered outside the
// contract is the most specific finding, then one without a deployment, then a stale answer;
// plain unavailability (not ready, unreachable, missing Pods) is IncompleteCoverage. Every
// member's own reason is in status.application.nodes.
func incompleteReason(seen map[string]bool) string {
	for _, r := range []string{v1.ReasonMalformed, v1.ReasonUnsupported, v1.ReasonStale} {
		if seen[r] {
			return r
		}
	}
	return v1.ReasonIncompleteCoverage
}
