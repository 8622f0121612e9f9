package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/controllers/workload"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// renderedBy marks a Pod template as an earlier release's rendering, one this release never
// renders: its members must be replaced by the takeover. It stands for whatever that release's
// template differed in (the test cannot run the unreleased controller itself).
const renderedBy = "e2e.celld.eric.dev/rendered-by"

// The current-operation records of earlier releases, in the form their code wrote them: Go
// structs marshalled by encoding/json without tags, so the keys are these field names
// (controllers/reservation/earlier.go, testdata/earlier). Fields are in the prior art's order;
// fields a record never carries here (Capacity: the fleets set no capacity policy) are left out.

// oneDisruptionRecord is the one-disruption controller's bookkeeping: no operation of its own.
type oneDisruptionRecord struct {
	Version               int
	FleetUID, WorkloadUID types.UID
	Initial, Applied      int32
	RuntimeImage          string
	Claims                map[string]types.UID
	RestartToken          string             `json:",omitempty"`
	Completion            *earlierCompletion `json:",omitempty"`
	LastDisruption        time.Time          `json:",omitzero"`
}

// earlierCompletion is an operation the one-disruption controller dropped when it took a v0.0.5
// fleet over.
type earlierCompletion struct {
	ID, Kind, Outcome string
	At                time.Time
}

// strictRecord is v0.0.5's record with its operation in flight.
type strictRecord struct {
	Version               int
	FleetUID, WorkloadUID types.UID
	Initial, Applied      int32
	RuntimeImage          string
	Claims                map[string]types.UID
	Operation             *strictOperation `json:",omitempty"`
	RestartToken          string           `json:",omitempty"`
}

type strictOperation struct {
	ID, Kind, Phase                        string
	StartedAt, Deadline                    time.Time
	FleetUID, WorkloadUID                  types.UID
	From, To                               int32
	SourceImage, TargetImage, RestartToken string
	ManualBaseline                         int32
	Automatic                              bool
	PolicyHash                             string
	PreviousEffect, EffectVersion          string
	Targets                                []strictTarget `json:",omitempty"`
}

type strictTarget struct {
	Pod, IP, Container, HostUID string
	PodUID                      types.UID
	Identity                    strictIdentity
}

type strictIdentity struct {
	Node, Host, BootID, Invocation, Generation, DiskID string
	PID                                                int
}

// Upgrading from the one-disruption controller (seed 001 "Upgrading from earlier releases";
// ADR 0023's controller, never released). That controller kept its StatefulSet on OnDelete and
// drove every rollout itself: it wrote the new template, then deleted outdated Pods one at a
// time, a member already down first, the others highest ordinal first once the fleet had
// settled, recording the time of each deletion on the reservation. It held the
// PodDisruptionBudget at maxUnavailable 0 while the fleet was not settled. The fleets below are
// built as it left them, then the operator takes them over under continuous safety monitors.
var _ = Describe("upgrade from the one-disruption controller", func() {
	It("adopts a fleet it left mid-rollout with the member it just restarted down: its record removed and nothing reported superseded, members replaced one at a time on their own disks, Ready", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "upgrade-od")
		const name = "od"
		By("the fleet as the one-disruption controller left it, rolling restart token 2 out")
		f, sts := leftByOneDisruption(ctx, ns, name, "1")
		claims := claimUIDs(ctx, ns)
		Expect(claims).To(HaveLen(3))
		mon := monitorDown(ctx, ns, f, 3, 1)

		// Its last step: the highest outdated member deleted, then the record saved with the time.
		victim := framework.Pod(ctx, ns, name+"-2")
		Expect(victim).NotTo(BeNil())
		Expect(kube().Delete(ctx, victim, client.Preconditions{UID: &victim.UID})).To(Succeed())
		Expect(membersDown(ctx, ns, name, 3)).To(Equal(1), "the member the controller restarted is down")
		d := defaulted(f)
		// It had taken the fleet over from v0.0.5 earlier: the strict operation it dropped then
		// stays in its record as a Completion.
		writeEarlierRecord(ctx, d, oneDisruptionRecord{
			Version: 1, FleetUID: f.UID, WorkloadUID: sts.UID, Initial: 3, Applied: 3,
			RuntimeImage: d.Spec.RuntimeImage, Claims: map[string]types.UID{}, RestartToken: "2",
			Completion:     &earlierCompletion{ID: "op-strict-1", Kind: "Restart", Outcome: "Superseded", At: time.Now().Add(-time.Hour).UTC()},
			LastDisruption: time.Now().UTC(),
		})

		By("the operator takes over: RollingUpdate, highest ordinal first, one member down at a time")
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":false}}}`)
		waitFleetReady(ctx, ns, name, 3)
		mon.Check("the upgrade from the one-disruption controller")
		expectAdopted(ctx, ns, name, claims)

		By("its record is gone and nothing is reported superseded: it recorded no operation in flight")
		expectNoRecord(ctx, d)
		Consistently(ctx, func() []string { return eventReasons(ctx, ns) }).WithTimeout(5*time.Second).WithPolling(framework.Poll).
			ShouldNot(ContainElement(v1.EventOperationSuperseded), "the one-disruption controller's record names no operation in flight")
	})

	It("adopts a v0.0.5 fleet it took over but had not yet written to: the strict operation still in flight is reported superseded, members replaced one at a time on their own disks, Ready", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "upgrade-od-strict")
		const name = "ods"
		By("the fleet as the one-disruption controller left it: its template written, waiting to settle before the first restart")
		f, sts := leftByOneDisruption(ctx, ns, name, "v0.0.5")
		claims := claimUIDs(ctx, ns)
		Expect(claims).To(HaveLen(3))
		mon := monitorDown(ctx, ns, f, 3, 1)

		// It saves its record only when its bookkeeping changes, and it had changed nothing yet:
		// the reservation still holds v0.0.5's record, with the strict operation in flight.
		d := defaulted(f)
		now := time.Now().UTC()
		op := &strictOperation{ID: "op-e2e-restart", Kind: "Restart", Phase: "Requesting", StartedAt: now.Add(-5 * time.Minute), Deadline: now.Add(25 * time.Minute),
			FleetUID: f.UID, WorkloadUID: sts.UID, From: 3, To: 3, SourceImage: d.Spec.RuntimeImage, TargetImage: d.Spec.RuntimeImage, RestartToken: "2"}
		for i := range 3 {
			p := framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))
			Expect(p).NotTo(BeNil())
			container := ""
			if len(p.Status.ContainerStatuses) > 0 {
				container = p.Status.ContainerStatuses[0].ContainerID
			}
			op.Targets = append(op.Targets, strictTarget{Pod: p.Name, IP: p.Status.PodIP, Container: container, HostUID: p.Spec.NodeName, PodUID: p.UID,
				Identity: strictIdentity{Node: p.Name, Host: p.Spec.NodeName, BootID: "boot-" + p.Spec.NodeName, Invocation: "inv-" + string(p.UID), Generation: "gen-1", DiskID: "disk-" + p.Name, PID: 1}})
		}
		writeEarlierRecord(ctx, d, strictRecord{Version: 1, FleetUID: f.UID, WorkloadUID: sts.UID, Initial: 3, Applied: 3,
			RuntimeImage: d.Spec.RuntimeImage, Claims: claims, Operation: op, RestartToken: "1"})

		By("the operator takes over: RollingUpdate, highest ordinal first, one member down at a time")
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":false}}}`)
		waitFleetReady(ctx, ns, name, 3)
		mon.Check("the upgrade from the one-disruption controller over v0.0.5's record")
		expectAdopted(ctx, ns, name, claims)

		By("the record is gone and the strict operation is reported superseded, by name")
		expectNoRecord(ctx, d)
		framework.EventuallyWithin(ctx, framework.Short, func() []string { return eventNotes(ctx, ns, v1.EventOperationSuperseded) }).
			Should(ContainElement("Dropped Restart operation op-e2e-restart recorded by an earlier release; members roll onto the current template instead"))
	})
})

func defaulted(f *v1.CelldFleet) *v1.CelldFleet {
	d := f.DeepCopy()
	d.Default()
	return d
}

// leftByOneDisruption creates a paused fleet restarting to token 2 and its StatefulSet as the
// one-disruption controller left it: OnDelete, all three members Ready on an earlier template
// (restart token 1, rendered by ran), the controller's own template (restart token 2) written
// over it and observed, which OnDelete keeps from every running member, and the budget at
// maxUnavailable 0. The operator leaves a paused fleet's workload alone.
func leftByOneDisruption(ctx context.Context, ns, name, ran string) (*v1.CelldFleet, *appsv1.StatefulSet) {
	GinkgoHelper()
	f := persistentFleet(ns, name, 3)
	f.Spec.Maintenance = &v1.MaintenanceSpec{Paused: true, RestartToken: "2"}
	Expect(kube().Create(ctx, f)).To(Succeed())
	f = getFleet(ctx, ns, name)
	template := func(token, by string) corev1.PodTemplateSpec {
		d := defaulted(f)
		d.Spec.Maintenance.RestartToken = token
		t := workload.StatefulSet(d, workload.Options{ReservationName: reservation.Name(d.Spec.Storage.Bucket, d.Spec.Storage.Prefix),
			NodeLossTolerationSeconds: e2eOptions.NodeLossTolerationSeconds}, 3).Spec.Template
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[renderedBy] = by
		return t
	}
	d := defaulted(f)
	sts := workload.StatefulSet(d, workload.Options{ReservationName: reservation.Name(d.Spec.Storage.Bucket, d.Spec.Storage.Prefix),
		NodeLossTolerationSeconds: e2eOptions.NodeLossTolerationSeconds}, 3)
	sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	sts.Spec.Template = template("1", ran)
	Expect(kube().Create(ctx, sts, client.FieldOwner("celld-operator-one-disruption"))).To(Succeed())
	framework.EventuallyWithin(ctx, 2*framework.Medium, func() int32 { return statefulSetOf(ctx, ns, name).Status.ReadyReplicas }).Should(Equal(int32(3)))

	framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
		live := &appsv1.StatefulSet{}
		g.Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, live)).To(Succeed())
		live.Spec.Template = template("2", "one-disruption-controller")
		g.Expect(kube().Update(ctx, live, client.FieldOwner("celld-operator-one-disruption"))).To(Succeed())
	}).Should(Succeed())
	framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
		live := statefulSetOf(ctx, ns, name)
		g.Expect(live.Status.ObservedGeneration).To(Equal(live.Generation))
		g.Expect(live.Status.UpdateRevision).NotTo(Equal(live.Status.CurrentRevision), "the new template is written, not rolled")
	}).Should(Succeed())
	for i := range 3 {
		p := framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))
		Expect(p.Annotations).To(HaveKeyWithValue(v1.AnnotationRestartToken, "1"), "%s runs the earlier template", p.Name)
	}

	// The operator converges its budget as any drift, paused or not: the controller's 0 may not
	// last until the takeover, which only makes the fleet's state less adverse.
	framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
		pdb := &policyv1.PodDisruptionBudget{}
		g.Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pdb)).To(Succeed())
		pdb.Spec.MaxUnavailable = new(intstr.FromInt32(0))
		g.Expect(kube().Update(ctx, pdb, client.FieldOwner("celld-operator-one-disruption"))).To(Succeed())
	}).Should(Succeed())
	return f, statefulSetOf(ctx, ns, name)
}

// writeEarlierRecord puts record on the fleet's reservation as the earlier release's current-operation
// annotation. The operator writes the reservation too (its tuning record): each write is made on
// a fresh read until it does not conflict.
func writeEarlierRecord(ctx context.Context, d *v1.CelldFleet, record any) {
	GinkgoHelper()
	raw, err := json.Marshal(record)
	Expect(err).NotTo(HaveOccurred())
	Expect(string(raw)).To(HavePrefix(`{"Version":1,"FleetUID":`), "the earlier releases' keys are Go field names")
	framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
		res := &v1.CelldStorageReservation{}
		g.Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(d.Spec.Storage.Bucket, d.Spec.Storage.Prefix)}, res)).To(Succeed())
		if res.Annotations == nil {
			res.Annotations = map[string]string{}
		}
		res.Annotations[v1.AnnotationCurrentOperation] = string(raw)
		g.Expect(kube().Update(ctx, res)).To(Succeed())
	}).Should(Succeed())
}

// expectAdopted: the StatefulSet rolls, every member runs the current template (none the
// earlier one), every member keeps its disk, the budget is 1, and the operator deleted no claim
// and no Pod but a force-delete of a member stranded on a node, as the v0.0.5 upgrade allows.
func expectAdopted(ctx context.Context, ns, name string, claims map[string]types.UID) {
	GinkgoHelper()
	after := statefulSetOf(ctx, ns, name)
	Expect(after.Spec.UpdateStrategy.Type).To(Equal(appsv1.RollingUpdateStatefulSetStrategyType))
	Expect(after.Status.UpdateRevision).To(Equal(after.Status.CurrentRevision), "the rollout is complete")
	for i := range 3 {
		p := framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))
		Expect(p).NotTo(BeNil())
		Expect(p.Annotations).NotTo(HaveKey(renderedBy), "%s was not replaced", p.Name)
		Expect(p.Labels).To(HaveKeyWithValue(appsv1.ControllerRevisionHashLabelKey, after.Status.UpdateRevision), "%s is not on the current template", p.Name)
	}
	Expect(claimUIDs(ctx, ns)).To(Equal(claims), "every member keeps its disk")
	for _, d := range operatorDeletes(ns) {
		Expect(d.Kind).To(Equal("Pod"), "the upgrade deleted claim %s", d.Name)
		Expect(d.Force).To(BeTrue(), "the upgrade deleted Pod %s: the StatefulSet alone replaces members", d.Name)
	}
	pdb := &policyv1.PodDisruptionBudget{}
	Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pdb)).To(Succeed())
	Expect(pdb.Spec.MaxUnavailable).To(Equal(new(intstr.FromInt32(1))), "the budget lets one member go at a time")
}

func expectNoRecord(ctx context.Context, d *v1.CelldFleet) {
	GinkgoHelper()
	res := &v1.CelldStorageReservation{}
	Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(d.Spec.Storage.Bucket, d.Spec.Storage.Prefix)}, res)).To(Succeed())
	Expect(res.Annotations).NotTo(HaveKey(v1.AnnotationCurrentOperation), "a fleet without spec.capacity keeps no record")
}

// eventNotes returns the messages of the events with reason in ns.
func eventNotes(ctx context.Context, ns, reason string) []string {
	GinkgoHelper()
	list, err := framework.Cluster.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, strings.TrimSpace(e.Note))
		}
	}
	return out
}
