package e2e

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/application"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// The simulator's default deployment pointer (docs/development.md, knobs).
const (
	simVersion   = "854305e196452678"
	simPrefix    = "deploy/app/" + simVersion
	otherVersion = "0e1738ed65659e75"
)

// appState is a fleet's ApplicationConverged condition ("" when absent) and status.application.
func appState(ctx context.Context, ns, name string) (*v1.CelldFleet, *metav1.Condition, *v1.ApplicationStatus) {
	f := getFleet(ctx, ns, name)
	return f, meta.FindStatusCondition(f.Status.Conditions, v1.ConditionApplicationConverged), f.Status.Application
}

// waitApplication waits until ApplicationConverged has status/reason and returns the fleet.
func waitApplication(ctx context.Context, ns, name string, status metav1.ConditionStatus, reason string) *v1.CelldFleet {
	GinkgoHelper()
	var out *v1.CelldFleet
	framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
		f, c, app := appState(ctx, ns, name)
		g.Expect(c).NotTo(BeNil(), "no ApplicationConverged yet")
		g.Expect(app).NotTo(BeNil())
		g.Expect(string(c.Status)+"/"+c.Reason).To(Equal(string(status)+"/"+reason), "nodes: %+v", app.Nodes)
		g.Expect(c.ObservedGeneration).To(Equal(f.Generation))
		out = f
	}).Should(Succeed())
	return out
}

// expectLifecycleReady is the lifecycle's view, which observation must never move.
func expectLifecycleReady(ctx context.Context, ns, name string) {
	GinkgoHelper()
	Expect(condition(ctx, ns, name, v1.ConditionReady)).To(Equal("True/"+v1.ReasonProvisioned),
		"the lifecycle must keep its own verdict while application observation is degraded")
}

// memberPods lists the fleet's running members in name order (Deployment members have
// generated names).
func memberPods(ctx context.Context, ns, name string) []string {
	GinkgoHelper()
	pods := &corev1.PodList{}
	Expect(kube().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{v1.LabelFleetUID: string(getFleet(ctx, ns, name).UID)})).To(Succeed())
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

func setKnob(ctx context.Context, ns, pod, knob, value string) {
	GinkgoHelper()
	Expect(framework.Cluster.Faults.SetKnob(ctx, ns, pod, knob, value)).To(Succeed())
}

func nodeReasons(app *v1.ApplicationStatus) map[string]string {
	out := map[string]string{}
	for _, n := range app.Nodes {
		out[n.Name] = n.Reason
	}
	return out
}

var _ = Describe("application observation", func() {
	var ns string
	const name = "app"
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "app") })

	It("publishes True/Converged with observedVersion when every member runs one version", func(ctx context.Context) {
		Expect(kube().Create(ctx, bucketFleet(ns, name, 3, v1.BucketWorkloadDeployment))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		f := waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)

		c := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionApplicationConverged)
		Expect(c.Message).To(Equal(application.Message))
		app := f.Status.Application
		Expect(app.ObservedVersion).To(Equal(&v1.ApplicationVersion{Version: simVersion, Prefix: simPrefix}))
		Expect(app.ExpectedNodes).To(BeEquivalentTo(3))
		Expect(app.ObservedNodes).To(BeEquivalentTo(3))
		Expect(app.UnavailableNodes).To(BeZero())
		Expect(app.Versions).To(Equal([]v1.ApplicationVersionCount{{Version: simVersion, Prefix: simPrefix, Nodes: 3}}))
		Expect(app.ObservedAt.Time).To(BeTemporally("~", time.Now(), 2*time.Minute), "observedAt must be recent")
		Expect(app.Nodes).To(HaveLen(3))
		for _, n := range app.Nodes {
			Expect(n.RuntimeGeneration).To(HaveLen(64), "node %s carries celld's runtime generation", n.Name)
			Expect(n.Reason).To(Equal(v1.ReasonConverged))
		}
		expectLifecycleReady(ctx, ns, name)
		expectNoOperatorDeletes(ns, "application observation")
	})

	It("reports False/MixedVersions when one member loads another version, and Converged when it returns", func(ctx context.Context) {
		Expect(kube().Create(ctx, bucketFleet(ns, name, 3, v1.BucketWorkloadOrdered))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)

		setKnob(ctx, ns, name+"-1", "CELLD_SIM_APP_VERSION", otherVersion)
		f := waitApplication(ctx, ns, name, metav1.ConditionFalse, v1.ReasonMixedVersions)
		app := f.Status.Application
		Expect(app.ObservedVersion).To(BeNil(), "observedVersion only with agreement")
		Expect(app.Versions).To(ConsistOf(
			v1.ApplicationVersionCount{Version: otherVersion, Prefix: "deploy/app/" + otherVersion, Nodes: 1},
			v1.ApplicationVersionCount{Version: simVersion, Prefix: simPrefix, Nodes: 2}))
		expectLifecycleReady(ctx, ns, name)

		setKnob(ctx, ns, name+"-1", "CELLD_SIM_APP_VERSION", "")
		f = waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)
		Expect(f.Status.Application.ObservedVersion.Version).To(Equal(simVersion))
		expectNoOperatorDeletes(ns, "application observation")
	})

	It("reports False/Converging while resident cells are pending or swapping, with observedVersion", func(ctx context.Context) {
		Expect(kube().Create(ctx, bucketFleet(ns, name, 3, v1.BucketWorkloadDeployment))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)
		pods := memberPods(ctx, ns, name)

		setKnob(ctx, ns, pods[0], "CELLD_SIM_RESIDENT_CELLS", "4")
		setKnob(ctx, ns, pods[0], "CELLD_SIM_PENDING_CELLS", "2")
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			_, c, app := appState(ctx, ns, name)
			g.Expect(c.Reason).To(Equal(v1.ReasonConverging))
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(app.PendingCells).To(BeEquivalentTo(2))
			g.Expect(app.ObservedVersion).To(Equal(&v1.ApplicationVersion{Version: simVersion, Prefix: simPrefix}))
			g.Expect(nodeReasons(app)).To(HaveKeyWithValue(pods[0], application.NodeCellsTransitioning))
		}).Should(Succeed())

		setKnob(ctx, ns, pods[0], "CELLD_SIM_PENDING_CELLS", "")
		setKnob(ctx, ns, pods[1], "CELLD_SIM_SWAPPING_CELLS", "3")
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			_, c, app := appState(ctx, ns, name)
			g.Expect(c.Reason).To(Equal(v1.ReasonConverging))
			g.Expect(app.PendingCells).To(BeZero())
			g.Expect(app.SwappingCells).To(BeEquivalentTo(3))
		}).Should(Succeed())

		setKnob(ctx, ns, pods[1], "CELLD_SIM_SWAPPING_CELLS", "")
		waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)
		expectLifecycleReady(ctx, ns, name)
	})

	DescribeTable("reports Unknown when a member's /state cannot be trusted, while the lifecycle stays Ready",
		func(ctx context.Context, mode, reason, nodeReason string) {
			Expect(kube().Create(ctx, bucketFleet(ns, name, 3, v1.BucketWorkloadDeployment))).To(Succeed())
			waitFleetReady(ctx, ns, name, 3)
			waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)
			pod := memberPods(ctx, ns, name)[0]

			setKnob(ctx, ns, pod, "CELLD_SIM_STATE_MODE", mode)
			f := waitApplication(ctx, ns, name, metav1.ConditionUnknown, reason)
			app := f.Status.Application
			Expect(nodeReasons(app)).To(HaveKeyWithValue(pod, nodeReason))
			Expect(app.ObservedVersion).To(BeNil(), "observedVersion is omitted for every Unknown result")
			Expect(app.ObservedNodes).To(BeEquivalentTo(2))
			Expect(app.UnavailableNodes).To(BeEquivalentTo(1))
			expectLifecycleReady(ctx, ns, name)

			setKnob(ctx, ns, pod, "CELLD_SIM_STATE_MODE", "")
			waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)
			expectNoOperatorDeletes(ns, "application observation")
		},
		Entry("a member slower than the 2 s call timeout", "slow:3000", v1.ReasonIncompleteCoverage, application.NodeUnavailable),
		Entry("a member that accepts and never answers", "hang", v1.ReasonIncompleteCoverage, application.NodeUnavailable),
		Entry("a body over 1 MiB", "oversized", v1.ReasonMalformed, v1.ReasonMalformed),
		Entry("truncated JSON", "malformed", v1.ReasonMalformed, v1.ReasonMalformed),
		Entry("a document without deployment", "missing:deployment", v1.ReasonUnsupported, v1.ReasonUnsupported),
	)

	It("reports Unknown/FleetDeleting once the fleet is deleting, without reading members", func(ctx context.Context) {
		Expect(kube().Create(ctx, bucketFleet(ns, name, 3, v1.BucketWorkloadDeployment))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)

		// A finalizer of the test's own keeps the deleting fleet readable after the operator's
		// finalizer is gone, so the published verdict can be read.
		const hold = "e2e.celld.eric.dev/hold"
		f := getFleet(ctx, ns, name)
		f.Finalizers = append(f.Finalizers, hold)
		Expect(kube().Update(ctx, f)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			patch := client.MergeFrom(getFleet(ctx, ns, name))
			live := getFleet(ctx, ns, name)
			live.Finalizers = slices.DeleteFunc(live.Finalizers, func(s string) bool { return s == hold })
			Expect(kube().Patch(ctx, live, patch)).To(Succeed())
		})
		Expect(kube().Delete(ctx, f)).To(Succeed())

		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			f, c, app := appState(ctx, ns, name)
			g.Expect(f.DeletionTimestamp).NotTo(BeNil())
			g.Expect(c).NotTo(BeNil())
			g.Expect(string(c.Status) + "/" + c.Reason).To(Equal("Unknown/" + v1.ReasonFleetDeleting))
			g.Expect(app.ObservedVersion).To(BeNil(), "a deleting fleet names no version")
			g.Expect(app.ObservedNodes).To(BeZero(), "a deleting fleet's members are not read")
			g.Expect(app.Nodes).To(BeEmpty())
		}).Should(Succeed())
	})

	It("keeps scaling the fleet while observation is Unknown, and then covers the new member", func(ctx context.Context) {
		Expect(kube().Create(ctx, bucketFleet(ns, name, 3, v1.BucketWorkloadOrdered))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		setKnob(ctx, ns, name+"-0", "CELLD_SIM_STATE_MODE", "malformed")
		waitApplication(ctx, ns, name, metav1.ConditionUnknown, v1.ReasonMalformed)

		patchFleet(ctx, ns, name, `{"spec":{"replicas":4}}`)
		waitFleetReady(ctx, ns, name, 4)
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			_, c, app := appState(ctx, ns, name)
			g.Expect(app.ExpectedNodes).To(BeEquivalentTo(4))
			g.Expect(app.ObservedNodes).To(BeEquivalentTo(3))
			g.Expect(c.Reason).To(Equal(v1.ReasonMalformed))
		}).Should(Succeed())

		setKnob(ctx, ns, name+"-0", "CELLD_SIM_STATE_MODE", "")
		f := waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)
		Expect(f.Status.Application.ObservedNodes).To(BeEquivalentTo(4))
		expectNoOperatorDeletes(ns, "application observation")
	})

	// Whether a restart lands inside one collection (MembershipChanged) or between two (the
	// member is not ready: IncompleteCoverage) depends on timing this spec does not control;
	// the unit test TestARestartDuringSamplingIsMembershipChanged pins the first case against
	// a real API server. What is asserted here: no Converged observation finished well after the
	// kill names the old incarnation, and the fleet converges on the new one. Whether an Unknown
	// was published during the 25 s outage is reported (see below).
	It("never reports a restarted member's previous incarnation, and converges on the new one", func(ctx context.Context) {
		Expect(kube().Create(ctx, bucketFleet(ns, name, 3, v1.BucketWorkloadOrdered))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		f := waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)
		victim := name + "-1"
		var before string
		for _, n := range f.Status.Application.Nodes {
			if n.Name == victim {
				before = n.RuntimeGeneration
			}
		}
		Expect(before).NotTo(BeEmpty())

		// The outage outlasts several observer intervals even when the observer is busy with
		// other fleets' slow members (10 s deadlines), so one collection must fall inside it.
		setKnob(ctx, ns, victim, "CELLD_SIM_RESTART_MS", "25000")
		killed := time.Now()
		Expect(framework.Cluster.Faults.KillMember(ctx, ns, victim)).To(Succeed())
		seen := map[string]bool{}
		framework.EventuallyWithin(ctx, 3*framework.Medium, func(g Gomega) {
			_, c, app := appState(ctx, ns, name)
			seen[string(c.Status)+"/"+c.Reason] = true
			var gen string
			for _, n := range app.Nodes {
				if n.Name == victim {
					gen = n.RuntimeGeneration
				}
			}
			if c.Reason == v1.ReasonConverged && app.ObservedAt.After(killed.Add(3*time.Second)) {
				Expect(gen).NotTo(Equal(before), "a Converged observation finished after the restart names the dead incarnation")
			}
			g.Expect(c.Reason).To(Equal(v1.ReasonConverged))
			g.Expect(gen).NotTo(Equal(before))
		}).Should(Succeed())
		// Whether a collection fell inside the outage depends on the observer's load (other
		// fleets' hanging members hold its workers for up to 10 s each); under parallel load it
		// has gone straight from the old to the new incarnation. The invariants above hold either
		// way; what was seen is reported, not asserted.
		AddReportEntry("observations seen across the restart", fmt.Sprint(seen))
		expectNoOperatorDeletes(ns, "a member restart")
	})
})
