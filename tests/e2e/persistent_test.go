package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

var _ = Describe("PersistentFleet lifecycle", func() {
	var ns string
	const name = "pf"
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "pf") })

	It("creates a fleet that becomes Ready with one member per zone on retained disks, and then writes nothing", func(ctx context.Context) {
		f := persistentFleet(ns, name, 3)
		start := time.Now()
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		resName := reservation.Name(f.Spec.Storage.Bucket, "")
		writes := operatorWrites(ns, start, resName)
		AddReportEntry("writes from creation to Ready", len(writes))
		GinkgoWriter.Printf("operator writes from creation to Ready of a 3-member fleet: %d\n", len(writes))
		perObject := map[string]int{}
		for _, w := range writes {
			GinkgoWriter.Printf("  %s %s %s\n", w.Method, w.Path, w.Name)
			if !strings.HasSuffix(w.Path, "/status") {
				perObject[w.Path+"/"+w.Name]++ // a create is sent to its collection, and names the object in its body
			}
		}
		for path, n := range perObject {
			Expect(n).To(Equal(1), "creation writes %s once (the finalizer, the reservation, each child and the workload); a pass that runs before the cache delivers the creation must not write it again", path)
		}
		var dryRuns []string
		for _, r := range operatorReads(ns, start) {
			if r.Method != http.MethodGet {
				dryRuns = append(dryRuns, r.Method+" "+r.Path)
			}
		}
		Expect(dryRuns).To(BeEmpty(), "objects the operator created are compared with the answers to their creation, not by dry-run")
		// No read of what is not there: the creates are the API server's arbitration of the
		// names, so nothing is read before them, and no read is answered 404. (Lists are the
		// namespace cache's start, once per namespace, not per fleet.)
		var gets, missing []string
		for _, r := range operatorReads(ns, start) {
			if r.Method != http.MethodGet {
				continue
			}
			if r.Status == http.StatusNotFound {
				missing = append(missing, r.Path)
			}
			if _, rest, _ := strings.Cut(r.Path, "/namespaces/"+ns+"/"); strings.Count(rest, "/") >= 1 {
				gets = append(gets, r.Path)
			}
		}
		AddReportEntry("object reads from creation to Ready", len(gets))
		Expect(missing).To(BeEmpty(), "the operator read objects that did not exist")
		Expect(len(gets)).To(BeNumerically("<=", 3), "object reads from creation to Ready: %v", gets)

		zones := map[string]bool{}
		for i := range 3 {
			p := framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))
			zones[framework.NodeZone(ctx, p.Spec.NodeName)] = true
		}
		Expect(zones).To(HaveLen(3), "Strict placement puts one member in each zone")
		for i := range 3 {
			c := &corev1.PersistentVolumeClaim{}
			Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("data-%s-%d", name, i)}, c)).To(Succeed())
			Expect(c.Labels).To(HaveKeyWithValue(v1.LabelFleetUID, string(getFleet(ctx, ns, name).UID)))
		}
		for _, obj := range []client.Object{&corev1.Service{}, &networkingv1.NetworkPolicy{}, &policyv1.PodDisruptionBudget{}} {
			Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)).To(Succeed(), "%T %s", obj, name)
		}
		Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-peers"}, &corev1.Service{})).To(Succeed())
		res := &v1.CelldStorageReservation{}
		Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(f.Spec.Storage.Bucket, "")}, res)).To(Succeed())
		Expect(res.Spec.FleetUID).To(Equal(string(getFleet(ctx, ns, name).UID)))

		// A settled fleet costs the API server nothing: no write and no read (its children come
		// from the namespace's informers). The application observer publishes its first result
		// once the members are Ready; let it land first (it then writes once every 5 min to keep
		// observedAt fresh). An annotation change makes the operator reconcile the settled
		// fleet, which must still neither write nor read.
		framework.EventuallyWithin(ctx, framework.Medium, func() string {
			return condition(ctx, ns, name, v1.ConditionApplicationConverged)
		}).Should(Equal("True/" + v1.ReasonConverged))
		settled := time.Now()
		stsBefore := statefulSetOf(ctx, ns, name).ResourceVersion
		patchFleet(ctx, ns, name, `{"metadata":{"annotations":{"e2e.celld.eric.dev/poke":"1"}}}`)
		before := getFleet(ctx, ns, name).ResourceVersion
		Consistently(ctx, func(g Gomega) {
			g.Expect(getFleet(ctx, ns, name).ResourceVersion).To(Equal(before), "a settled fleet's status was rewritten")
			g.Expect(statefulSetOf(ctx, ns, name).ResourceVersion).To(Equal(stsBefore), "a settled fleet's StatefulSet was rewritten")
		}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(operatorWrites(ns, settled, resName)).To(BeEmpty(), "a settled fleet's reconcile must perform no API write")
		Expect(operatorReads(ns, settled)).To(BeEmpty(), "a settled fleet's reconcile must read its children from the cache")
		expectNoOperatorDeletes(ns, "creation")
	})

	It("rolls a new restartToken one member at a time, highest ordinal first, on the same disks", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)
		uids := map[int]types.UID{}
		for i := range 3 {
			uids[i] = podUID(ctx, ns, fmt.Sprintf("%s-%d", name, i))
		}

		mon := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 1) // a rollout takes down at most one member
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"restartToken":"r1"}}}`)
		var replaced []int
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			for i := 2; i >= 0; i-- {
				if !containsInt(replaced, i) && podUID(ctx, ns, fmt.Sprintf("%s-%d", name, i)) != uids[i] {
					replaced = append(replaced, i)
				}
			}
			g.Expect(replaced).To(HaveLen(3))
		}).Should(Succeed())
		Expect(replaced).To(Equal([]int{2, 1, 0}), "members restart highest ordinal first")
		waitFleetReady(ctx, ns, name, 3)
		mon.Check("a restartToken rollout")
		p := framework.Pod(ctx, ns, name+"-0")
		Expect(p.Annotations).To(HaveKeyWithValue(v1.AnnotationRestartToken, "r1"))
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "a restart keeps every disk")
		expectNoOperatorDeletes(ns, "a rolling restart")
	})

	It("scales in one member at a time keeping the claim, and grows back onto the kept disk", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)

		patchFleet(ctx, ns, name, `{"spec":{"replicas":3}}`)
		scale(ctx, ns, name, 4)
		waitFleetReady(ctx, ns, name, 4)
		scale(ctx, ns, name, 3)
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			g.Expect(*statefulSetOf(ctx, ns, name).Spec.Replicas).To(Equal(int32(3)))
			g.Expect(framework.Pod(ctx, ns, name+"-3")).To(BeNil())
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		kept := claimUIDs(ctx, ns)
		Expect(kept).To(HaveKey("data-"+name+"-3"), "scale-in keeps the removed member's claim")

		scale(ctx, ns, name, 4)
		waitFleetReady(ctx, ns, name, 4)
		Expect(claimUIDs(ctx, ns)).To(Equal(kept), "growth reattaches the kept claim")
		for k, uid := range claims {
			Expect(kept[k]).To(Equal(uid))
		}
		expectNoOperatorDeletes(ns, "scaling")
	})

	It("grows one run at a time: the kept disk reattaches before a fresh disk is added", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 4))).To(Succeed())
		waitFleetReady(ctx, ns, name, 4)
		scale(ctx, ns, name, 3)
		waitFleetReady(ctx, ns, name, 3)
		kept := claimUIDs(ctx, ns)["data-"+name+"-3"]
		Expect(kept).NotTo(BeEmpty())

		// every replicas value the StatefulSet holds, through a watch: the kept run may be
		// Ready, and the step to 5 written, within a second, which a poll can miss
		steps := recordReplicas(ctx, ns, name, false)
		scale(ctx, ns, name, 5)
		framework.EventuallyWithin(ctx, 2*framework.Medium, steps).Should(HaveExactElements(int32(3), int32(4), int32(5)),
			"the StatefulSet grows to 5, adding the kept run (member 3) alone before the fresh run (member 4)")
		waitFleetReady(ctx, ns, name, 5)
		claims := claimUIDs(ctx, ns)
		Expect(claims["data-"+name+"-3"]).To(Equal(kept), "member 3 reattached its kept disk")
		Expect(claims).To(HaveKey("data-" + name + "-4"))
		expectNoOperatorDeletes(ns, "growth")
	})

	It("refuses to grow onto a claim that does not belong to the fleet (StorageIdentityConflict)", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		foreign := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-" + name + "-3"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceGi(1)}}},
		}
		Expect(kube().Create(ctx, foreign)).To(Succeed())
		scale(ctx, ns, name, 4)
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			g.Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonStorageIdentityConflict))
		}).Should(Succeed())
		Expect(*statefulSetOf(ctx, ns, name).Spec.Replicas).To(Equal(int32(3)), "no member is added")
		Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionBlocked)).To(ContainSubstring("data-" + name + "-3"))
	})

	It("pauses workload changes and applies them in one step when resumed", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":true}}}`)
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			g.Expect(condition(ctx, ns, name, v1.ConditionMaintenancePaused)).To(Equal("True/" + v1.ReasonMaintenancePaused))
		}).Should(Succeed())
		// The StatefulSet controller keeps writing the StatefulSet's status, so its
		// resourceVersion proves nothing; its generation moves with any spec write, and the
		// journal has every write of the operator's. Once the fleet has observed the change,
		// a write the pass would make has been made.
		since, generation := time.Now(), statefulSetOf(ctx, ns, name).Generation
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":true,"restartToken":"while-paused"}}}`)
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			f := getFleet(ctx, ns, name)
			g.Expect(f.Status.ObservedGeneration).To(Equal(f.Generation), "the paused fleet observed the restart request")
		}).Should(Succeed())
		Expect(workloadWrites(ns, since)).To(BeEmpty(), "a paused fleet's workload was written")
		Expect(statefulSetOf(ctx, ns, name).Generation).To(Equal(generation), "a paused fleet's workload spec changed")

		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":false}}}`)
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			sts := statefulSetOf(ctx, ns, name)
			g.Expect(sts.Spec.Template.Annotations).To(HaveKeyWithValue(v1.AnnotationRestartToken, "while-paused"))
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		expectNoOperatorDeletes(ns, "pause and resume")
	})

	It("returns every member on its own disk at the declared count after a full stop", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":true}}}`)
		framework.EventuallyWithin(ctx, framework.Short, func() string {
			return condition(ctx, ns, name, v1.ConditionMaintenancePaused)
		}).Should(Equal("True/" + v1.ReasonMaintenancePaused))
		sts := statefulSetOf(ctx, ns, name)
		sts.Spec.Replicas = new(int32(0)) // the administrator stops every member by hand
		Expect(kube().Update(ctx, sts, client.FieldOwner("kubectl-scale"))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func() int { return len(fleetPods(ctx, ns, getFleet(ctx, ns, name))) }).Should(BeZero())

		newImage := strings.Replace(getFleet(ctx, ns, name).Spec.RuntimeImage, "@sha256:9", "@sha256:0", 1)
		patchFleet(ctx, ns, name, fmt.Sprintf(`{"spec":{"runtimeImage":%q,"maintenance":{"paused":false}}}`, newImage))
		waitFleetReady(ctx, ns, name, 3)
		for i := range 3 {
			Expect(framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i)).Spec.Containers[0].Image).To(Equal(newImage))
		}
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "every member returns on its own disk")
		expectNoOperatorDeletes(ns, "a full stop")
	})

	It("restores a hand-edited template and recreates a deleted StatefulSet on its disks", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)
		sts := statefulSetOf(ctx, ns, name)
		sts.Spec.Template.Annotations = map[string]string{"hand-edit": "1"}
		Expect(kube().Update(ctx, sts, client.FieldOwner("kubectl-edit"))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			g.Expect(statefulSetOf(ctx, ns, name).Spec.Template.Annotations).NotTo(HaveKey("hand-edit"))
		}).Should(Succeed())

		orphan := metav1.DeletePropagationOrphan
		Expect(kube().Delete(ctx, statefulSetOf(ctx, ns, name), &client.DeleteOptions{PropagationPolicy: &orphan})).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			s := &appsv1.StatefulSet{}
			g.Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)).To(Succeed())
			g.Expect(s.DeletionTimestamp).To(BeNil())
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "the recreated StatefulSet uses the existing claims")
	})

	It("deletes the workload, then every claim, then the finalizer; the reservation stays", func(ctx context.Context) {
		f := persistentFleet(ns, name, 4)
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 4)
		scale(ctx, ns, name, 3) // a removed member's claim must go too
		waitFleetReady(ctx, ns, name, 3)
		Expect(claimUIDs(ctx, ns)).To(HaveLen(4))
		Expect(kube().Delete(ctx, getFleet(ctx, ns, name))).To(Succeed())
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			err := kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1.CelldFleet{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred(), "the fleet is gone once its workload and disks are")
		}).Should(Succeed())
		Expect(claimUIDs(ctx, ns)).To(BeEmpty(), "fleet deletion removes every claim")
		Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &appsv1.StatefulSet{})).NotTo(Succeed())
		res := &v1.CelldStorageReservation{}
		Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(f.Spec.Storage.Bucket, "")}, res)).To(Succeed(), "the bucket reservation is permanent")
	})
})

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func scale(ctx context.Context, ns, name string, n int32) {
	GinkgoHelper()
	patchFleet(ctx, ns, name, fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
}

func conditionMessage(f *v1.CelldFleet, t string) string {
	for _, c := range f.Status.Conditions {
		if c.Type == t {
			return c.Message
		}
	}
	return ""
}
