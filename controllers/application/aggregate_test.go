package application

import (
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/celld"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

const (
	verA, preA = "0e1738ed65659e75", "deploy/app/0e1738ed65659e75"
	verB, preB = "854305e196452678", "deploy/app/854305e196452678"
)

// node is a ready member, read a second before the collection ended, running verA.
func node(name string, edits ...func(*Member)) Member {
	m := Member{Name: name, UID: "uid-" + name, Ready: true, Identity: "uid-" + name + "/containerd://c/0",
		IP: "10.0.0.1", Started: t0.Add(-time.Hour), Read: true,
		Reading: celld.Reading{Sent: t0.Add(-2 * time.Second), Received: t0.Add(-time.Second),
			State: celld.State{RuntimeGeneration: "gen-" + name,
				Deployment: celld.Deployment{Version: verA, Prefix: preA, Generation: 1}}}}
	for _, e := range edits {
		e(&m)
	}
	return m
}

func version(v, p string) func(*Member) {
	return func(m *Member) { m.Reading.Deployment.Version, m.Reading.Deployment.Prefix = v, p }
}
func pending(n int) func(*Member) { return func(m *Member) { m.Reading.Deployment.PendingCells = n } }
func swapping(n int64) func(*Member) {
	return func(m *Member) { m.Reading.Deployment.SwappingCells = n }
}
func failed(err error) func(*Member) {
	return func(m *Member) { m.Reading, m.Err = celld.Reading{}, err }
}
func notReady(m *Member)    { m.Ready = false }
func terminating(m *Member) { m.Deleting = true }
func notRead(m *Member)     { m.Read, m.Reading = false, celld.Reading{} }
func noContainer(m *Member) { m.Identity, m.Started = "", time.Time{} }
func received(d time.Duration) func(*Member) {
	return func(m *Member) { m.Reading.Sent, m.Reading.Received = t0.Add(-d-time.Second), t0.Add(-d) }
}

func facts(expected int32, members ...Member) Facts {
	return Facts{Now: t0, Generation: 7, MaxAge: 90 * time.Second, Expected: expected, Members: members}
}

type want struct {
	status              metav1.ConditionStatus
	reason              string
	observed, unavail   int32
	pendingC, swappingC int64
	version             *v1.ApplicationVersion
	versions            int
	nodeReasons         []string
}

var vA = &v1.ApplicationVersion{Version: verA, Prefix: preA}

func TestAggregate(t *testing.T) {
	U, F, T := metav1.ConditionUnknown, metav1.ConditionFalse, metav1.ConditionTrue
	conv, trans, unav := v1.ReasonConverged, NodeCellsTransitioning, NodeUnavailable
	rows := []struct {
		name  string
		facts Facts
		want  want
	}{
		{"every Pod ready, fresh, on one version and prefix, no cell moving: True/Converged with observedVersion",
			facts(3, node("f-0"), node("f-1"), node("f-2")),
			want{T, v1.ReasonConverged, 3, 0, 0, 0, vA, 1, []string{conv, conv, conv}}},
		{"complete coverage, one node on another version: False/MixedVersions without observedVersion",
			facts(3, node("f-0"), node("f-1", version(verB, preB)), node("f-2")),
			want{F, v1.ReasonMixedVersions, 3, 0, 0, 0, nil, 2, []string{conv, conv, conv}}},
		{"same version under another artifact prefix is a different release: MixedVersions",
			facts(2, node("f-0"), node("f-1", version(verA, "deploy/other/"+verA))),
			want{F, v1.ReasonMixedVersions, 2, 0, 0, 0, nil, 2, []string{conv, conv}}},
		{"agreement with pending resident cells: False/Converging, observedVersion set, pending summed",
			facts(3, node("f-0", pending(2)), node("f-1", pending(1)), node("f-2")),
			want{F, v1.ReasonConverging, 3, 0, 3, 0, vA, 1, []string{trans, trans, conv}}},
		{"agreement while cells swap: False/Converging",
			facts(2, node("f-0"), node("f-1", swapping(4))),
			want{F, v1.ReasonConverging, 2, 0, 0, 4, vA, 1, []string{conv, trans}}},
		{"a member not ready: Unknown/IncompleteCoverage, its version not counted",
			facts(3, node("f-0"), node("f-1", notReady, version(verB, preB)), node("f-2")),
			want{U, v1.ReasonIncompleteCoverage, 2, 1, 0, 0, nil, 1, []string{conv, unav, conv}}},
		{"a member whose read timed out (slow beyond the call timeout): IncompleteCoverage",
			facts(2, node("f-0"), node("f-1", failed(fmt.Errorf("GET: %w", celld.ErrTimeout)))),
			want{U, v1.ReasonIncompleteCoverage, 1, 1, 0, 0, nil, 1, []string{conv, unav}}},
		{"a member not read before the collection deadline: Unavailable",
			facts(2, node("f-0"), node("f-1", notRead)),
			want{U, v1.ReasonIncompleteCoverage, 1, 1, 0, 0, nil, 1, []string{conv, unav}}},
		{"a member without a running container identity: Unavailable",
			facts(2, node("f-0"), node("f-1", noContainer)),
			want{U, v1.ReasonIncompleteCoverage, 1, 1, 0, 0, nil, 1, []string{conv, unav}}},
		{"a terminating member is draining and not counted: Unavailable",
			facts(2, node("f-0"), node("f-1", terminating)),
			want{U, v1.ReasonIncompleteCoverage, 1, 1, 0, 0, nil, 1, []string{conv, unav}}},
		{"a member without a deployment object: Unknown/Unsupported",
			facts(2, node("f-0"), node("f-1", failed(fmt.Errorf("%w: no deployment", celld.ErrUnsupported)))),
			want{U, v1.ReasonUnsupported, 1, 1, 0, 0, nil, 1, []string{conv, v1.ReasonUnsupported}}},
		{"a member answering malformed JSON: Unknown/Malformed",
			facts(2, node("f-0"), node("f-1", failed(fmt.Errorf("x: %w", celld.ErrMalformed)))),
			want{U, v1.ReasonMalformed, 1, 1, 0, 0, nil, 1, []string{conv, v1.ReasonMalformed}}},
		{"a member answering more than 1 MiB: Unknown/Malformed",
			facts(2, node("f-0"), node("f-1", failed(celld.ErrTooLarge))),
			want{U, v1.ReasonMalformed, 1, 1, 0, 0, nil, 1, []string{conv, v1.ReasonMalformed}}},
		{"malformed outranks unsupported and unavailable members in the condition reason",
			facts(3, node("f-0", notReady), node("f-1", failed(celld.ErrUnsupported)), node("f-2", failed(celld.ErrMalformed))),
			want{U, v1.ReasonMalformed, 0, 3, 0, 0, nil, 0, []string{unav, v1.ReasonUnsupported, v1.ReasonMalformed}}},
		{"a reading received more than 90 s before the collection ended: Unknown/StaleOrIncomplete",
			facts(2, node("f-0"), node("f-1", received(91*time.Second))),
			want{U, v1.ReasonStale, 1, 1, 0, 0, nil, 1, []string{conv, v1.ReasonStale}}},
		{"a reading exactly 90 s old is still fresh",
			facts(1, node("f-0", received(90*time.Second))),
			want{T, v1.ReasonConverged, 1, 0, 0, 0, vA, 1, []string{conv}}},
		{"a request sent before the container started may describe the previous incarnation: StaleOrIncomplete",
			facts(1, node("f-0", func(m *Member) { m.Started = m.Reading.Sent.Add(time.Millisecond) })),
			want{U, v1.ReasonStale, 0, 1, 0, 0, nil, 0, []string{v1.ReasonStale}}},
		{"fewer Pods than the workload's replicas: IncompleteCoverage with the missing counted unavailable",
			facts(3, node("f-0"), node("f-1")),
			want{U, v1.ReasonIncompleteCoverage, 2, 1, 0, 0, nil, 1, []string{conv, conv}}},
		{"more Pods than expected while scaling in: IncompleteCoverage even though all agree",
			facts(2, node("f-0"), node("f-1"), node("f-2")),
			want{U, v1.ReasonIncompleteCoverage, 3, 0, 0, 0, nil, 1, []string{conv, conv, conv}}},
		{"no Pods at all: IncompleteCoverage",
			facts(0),
			want{U, v1.ReasonIncompleteCoverage, 0, 0, 0, 0, nil, 0, nil}},
		{"membership changed while sampling: Unknown/MembershipChanged even if every answer agreed",
			func() Facts { f := facts(2, node("f-0"), node("f-1")); f.MembershipChanged = true; return f }(),
			want{U, v1.ReasonMembershipChanged, 2, 0, 0, 0, nil, 1, []string{conv, conv}}},
		{"membership change outranks incomplete coverage",
			func() Facts { f := facts(2, node("f-0"), node("f-1", notReady)); f.MembershipChanged = true; return f }(),
			want{U, v1.ReasonMembershipChanged, 1, 1, 0, 0, nil, 1, []string{conv, unav}}},
	}
	for _, verdict := range []string{v1.ReasonFleetDeleting, v1.ReasonWorkloadUnavailable, v1.ReasonMembershipUnavailable, v1.ReasonInvalidConfiguration} {
		f := facts(3)
		f.Verdict = verdict
		rows = append(rows, struct {
			name  string
			facts Facts
			want  want
		}{"decided before sampling: Unknown/" + verdict + ", nobody observed", f, want{U, verdict, 0, 3, 0, 0, nil, 0, nil}})
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := Aggregate(row.facts)
			a, w := r.Application, row.want
			if r.Status != w.status || r.Reason != w.reason {
				t.Fatalf("condition %s/%s, want %s/%s", r.Status, r.Reason, w.status, w.reason)
			}
			if r.Generation != 7 {
				t.Errorf("observedGeneration %d, want the generation the observation started from (7)", r.Generation)
			}
			if a.ObservedAt == nil || !a.ObservedAt.Time.Equal(t0) || a.ExpectedNodes != row.facts.Expected {
				t.Errorf("observedAt %v expectedNodes %d, want %v and %d", a.ObservedAt, a.ExpectedNodes, t0, row.facts.Expected)
			}
			if a.ObservedNodes != w.observed || a.UnavailableNodes != w.unavail {
				t.Errorf("observed/unavailable %d/%d, want %d/%d", a.ObservedNodes, a.UnavailableNodes, w.observed, w.unavail)
			}
			if a.PendingCells != w.pendingC || a.SwappingCells != w.swappingC {
				t.Errorf("pending/swapping %d/%d, want %d/%d", a.PendingCells, a.SwappingCells, w.pendingC, w.swappingC)
			}
			if (a.ObservedVersion == nil) != (w.version == nil) || (w.version != nil && *a.ObservedVersion != *w.version) {
				t.Errorf("observedVersion %v, want %v (present only with complete fresh coverage and agreement)", a.ObservedVersion, w.version)
			}
			if len(a.Versions) != w.versions {
				t.Errorf("versions %v, want %d groups of fresh samples", a.Versions, w.versions)
			}
			var reasons []string
			for _, n := range a.Nodes {
				reasons = append(reasons, n.Reason)
				if fresh(n.Reason) != (n.Version != "") || fresh(n.Reason) != (n.RuntimeGeneration != "") {
					t.Errorf("node %s: version %q and runtimeGeneration %q belong to fresh samples only", n.Name, n.Version, n.RuntimeGeneration)
				}
			}
			if fmt.Sprint(reasons) != fmt.Sprint(w.nodeReasons) {
				t.Errorf("node reasons %v, want %v", reasons, w.nodeReasons)
			}
		})
	}
}

func TestAggregateSortsVersionsAndCountsNodes(t *testing.T) {
	r := Aggregate(facts(4, node("f-0", version(verB, preB)), node("f-1"), node("f-2", version(verB, preB)),
		node("f-3", version(verA, "deploy/zz/"+verA))))
	want := []v1.ApplicationVersionCount{{Version: verA, Prefix: preA, Nodes: 1}, {Version: verA, Prefix: "deploy/zz/" + verA, Nodes: 1},
		{Version: verB, Prefix: preB, Nodes: 2}}
	if fmt.Sprint(r.Application.Versions) != fmt.Sprint(want) {
		t.Fatalf("versions %v, want sorted by version then prefix: %v", r.Application.Versions, want)
	}
}

func TestAggregateCapsDiagnosticsAt100(t *testing.T) {
	var ms []Member
	for i := range 130 {
		ms = append(ms, node(fmt.Sprintf("f-%03d", i), version(fmt.Sprintf("v%03d", i), fmt.Sprintf("p%03d", i))))
	}
	r := Aggregate(facts(130, ms...))
	if len(r.Application.Nodes) != MaxMembers || len(r.Application.Versions) != MaxVersions {
		t.Fatalf("nodes %d versions %d, want both capped at 100 (the CRD's MaxItems)", len(r.Application.Nodes), len(r.Application.Versions))
	}
	if r.Application.ObservedNodes != 130 || r.Reason != v1.ReasonMixedVersions {
		t.Fatalf("the caps bound diagnostics, not counts: observed %d reason %s", r.Application.ObservedNodes, r.Reason)
	}
}

func TestTransportFailuresAreUnavailableNotMalformed(t *testing.T) {
	for _, err := range []error{celld.ErrTimeout, celld.ErrTransport, celld.ErrStatus, celld.ErrRedirect, errors.New("other")} {
		if got := nodeReason(node("f-0", failed(err)), t0, 90*time.Second); got != NodeUnavailable {
			t.Errorf("%v: reason %s, want Unavailable: the node did not answer with a document", err, got)
		}
	}
}
