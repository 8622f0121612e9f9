package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/preview"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// Previews on the local cluster (issue 14, item 7): a parent fleet with spec.previews, the
// CelldPreviews developers create, the child fleets the operator generates for them, and the
// preview bucket that nobody else may hold. Every spec runs a continuous monitor
// (watchPreviewSafety) that fails on the first member deleted while its fleet was not being
// deleted, the first child fleet deleted before its preview expired or was deleted, and the
// first preview released while its child fleet still existed; the operator's own journals then
// confirm the same from its side.

const previewDomain = "previews.example.com"

var (
	gvrFleet   = schema.GroupVersionResource{Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version, Resource: "celldfleets"}
	gvrPreview = schema.GroupVersionResource{Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version, Resource: "celldpreviews"}
)

var _ = Describe("Previews", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "pv") })

	It("gives three previews disjoint prefixes, their own Ready fleets, URLs and routes; intruders in either bucket get StorageScopeConflict; an unauthorized seed creates nothing", func(ctx context.Context) {
		mon := watchPreviewSafety(ctx, ns)
		parent := previewParent(ctx, ns, "dev")
		bucket := parent.Spec.Previews.Storage.Bucket

		var previews []*v1.CelldPreview
		for _, name := range []string{"pr-1", "pr-2", "pr-3"} {
			previews = append(previews, createPreview(ctx, ns, name, "dev", 0, nil))
		}
		fleets := map[string]bool{}
		var scopes []reservation.Scope
		for _, p := range previews {
			st := awaitPreviewReady(ctx, ns, p.Name)
			fleet := preview.FleetName(p)
			Expect(st.FleetName).To(Equal(fleet), "the fleet is named from the preview's full UID")
			Expect(st.ParentFleetName).To(Equal("dev"))
			Expect(st.StorageURL).To(Equal("s3://" + bucket + "/" + fleet))
			Expect(st.URL).To(Equal("https://" + fleet + "." + previewDomain))
			Expect(st.ExpiresAt.Time).To(BeTemporally("==", p.CreationTimestamp.Add(86400*time.Second)), "the default TTL is a day from creation")
			fleets[fleet] = true

			child := getFleet(ctx, ns, fleet)
			Expect(child.Labels).To(HaveKeyWithValue(v1.LabelPreviewUID, string(p.UID)))
			Expect(metav1.IsControlledBy(child, p)).To(BeTrue(), "the child fleet is controlled by its preview")
			Expect(child.Spec.Profile).To(Equal(v1.ProfileBucket))
			Expect(child.Spec.BucketWorkload).To(Equal(v1.BucketWorkloadOrdered))
			Expect(*child.Spec.Replicas).To(Equal(int32(1)))
			Expect(child.Spec.Placement.Mode).To(Equal(v1.PlacementRelaxed))
			Expect(child.Spec.Placement.Zones).To(Equal([]string{parent.Spec.Placement.Zones[0]}), "the pool's zone defaults to the parent's first")
			Expect(child.Spec.Storage.Bucket).To(Equal(bucket))
			Expect(child.Spec.Storage.Prefix).To(Equal(fleet))
			Expect(child.Spec.Storage.PreviewFleetRef).To(Equal(&v1.FleetReference{Name: "dev", UID: string(parent.UID)}))
			Expect(child.Spec.Execution.CPURequest.String()).To(Equal("25m"))
			Expect(child.Spec.Execution.MemoryRequest.String()).To(Equal("64Mi"))
			Expect(child.Spec.Execution.MemoryLimit.String()).To(Equal("256Mi"))
			waitFleetReady(ctx, ns, fleet, 1)
			pod := framework.Pod(ctx, ns, fleet+"-0")
			Expect(pod).NotTo(BeNil())
			Expect(framework.NodeZone(ctx, pod.Spec.NodeName)).To(Equal(parent.Spec.Placement.Zones[0]))

			By("the child's own prefix reservation is bound to the child's UID: " + fleet)
			res := &v1.CelldStorageReservation{}
			Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(bucket, fleet)}, res)).To(Succeed())
			Expect(res.Spec.Prefix).To(Equal(fleet))
			Expect(res.Spec.FleetUID).To(Equal(string(child.UID)))
			Expect(child.Status.Reservation).To(Equal(res.Name))
			scopes = append(scopes, reservation.ScopeOf(res))

			By("the child's own route: an Ingress for FLEET." + previewDomain + " to the child's Service")
			ing := &networkingv1.Ingress{}
			Expect(kube().Get(ctx, key(ns, fleet+"-routing"), ing)).To(Succeed())
			expectOperatorOwned(ing, child)
			Expect(*ing.Spec.IngressClassName).To(Equal("nginx"))
			Expect(ing.Spec.Rules).To(ConsistOf(HaveField("Host", fleet+"."+previewDomain)))
			Expect(ing.Spec.Rules[0].HTTP.Paths).To(ConsistOf(HaveField("Backend.Service", Equal(&networkingv1.IngressServiceBackend{
				Name: fleet, Port: networkingv1.ServiceBackendPort{Number: 8080}}))))
		}
		Expect(fleets).To(HaveLen(3), "three previews, three fleets")
		for i := range scopes {
			for j := range scopes {
				Expect(i == j || !reservation.Overlaps(scopes[i], scopes[j])).To(BeTrue(), "the %s and the %s overlap", scopes[i], scopes[j])
			}
		}
		pool := &v1.CelldStorageReservation{}
		Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(bucket, "")}, pool)).To(Succeed())
		Expect(pool.Spec.OwnerKind).To(Equal(v1.ReservationOwnerFleetPreviews))
		Expect(pool.Spec.FleetUID).To(Equal(string(parent.UID)), "the preview bucket is reserved whole to the parent's UID")
		Expect(pool.OwnerReferences).To(BeEmpty(), "the pool outlives its parent")

		By("a dedicated fleet that asks for the preview bucket gets StorageScopeConflict and creates nothing")
		thief := bucketFleet(ns, "thief", 3, v1.BucketWorkloadOrdered)
		thief.Spec.Storage.Bucket = bucket
		Expect(kube().Create(ctx, thief)).To(Succeed())
		expectCondition(ctx, ns, "thief", v1.ConditionBlocked, "True/"+v1.ReasonStorageScopeConflict)
		Expect(conditionMessage(getFleet(ctx, ns, "thief"), v1.ConditionBlocked)).To(ContainSubstring("the previews of fleet %s/dev", ns))

		By("a prefix fleet that asks for the parent's own bucket gets StorageScopeConflict naming the parent and creates nothing")
		squatter := bucketFleet(ns, "squatter", 3, v1.BucketWorkloadOrdered)
		squatter.Spec.Storage.Bucket = parent.Spec.Storage.Bucket
		squatter.Spec.Storage.Prefix = "squat"
		squatter.Spec.Storage.PreviewFleetRef = &v1.FleetReference{Name: "dev", UID: string(parent.UID)}
		Expect(kube().Create(ctx, squatter)).To(Succeed())
		expectCondition(ctx, ns, "squatter", v1.ConditionBlocked, "True/"+v1.ReasonStorageScopeConflict)
		Expect(conditionMessage(getFleet(ctx, ns, "squatter"), v1.ConditionBlocked)).To(And(
			ContainSubstring("parent fleet %s/dev (UID %s)", ns, parent.UID), ContainSubstring("create a CelldPreview")))

		By("a seeded preview of a parent that authorizes no seeds is Blocked (SeedNotAuthorized) and creates nothing")
		seeded := createPreview(ctx, ns, "seeded", "dev", 0, &v1.PreviewSeed{Source: "staging", Objects: []v1.SeedObject{{Class: "Cart", ID: "c-1"}}})
		framework.EventuallyWithin(ctx, framework.Medium, func() string { return previewState(ctx, ns, "seeded") }).
			Should(Equal(string(v1.PreviewBlocked) + "/" + v1.ReasonSeedNotAuthorized))

		intruders := []*v1.CelldFleet{getFleet(ctx, ns, "thief"), getFleet(ctx, ns, "squatter")}
		Consistently(ctx, func(g Gomega) {
			for _, f := range intruders {
				expectNothingFor(ctx, g, ns, f.Name, f.UID)
			}
			g.Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(parent.Spec.Storage.Bucket, "squat")}, &v1.CelldStorageReservation{})).
				To(MatchError(ContainSubstring("not found")), "no prefix is reserved in the parent's bucket")
			live := &v1.CelldStorageReservation{}
			g.Expect(kube().Get(ctx, types.NamespacedName{Name: pool.Name}, live)).To(Succeed())
			g.Expect(live.ResourceVersion).To(Equal(pool.ResourceVersion), "the pool reservation was rewritten")

			p := getPreview(ctx, ns, "seeded")
			g.Expect(p.Status.FleetName).To(BeEmpty())
			g.Expect(p.Annotations).NotTo(HaveKey(v1.AnnotationPreviewFleet), "no creation is recorded")
			g.Expect(kube().Get(ctx, key(ns, preview.FleetName(seeded)), &v1.CelldFleet{})).To(MatchError(ContainSubstring("not found")), "an unauthorized seed creates no fleet")
			g.Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(bucket, preview.FleetName(seeded))}, &v1.CelldStorageReservation{})).
				To(MatchError(ContainSubstring("not found")))
		}).WithTimeout(4 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(conditionOfPreview(getPreview(ctx, ns, "seeded")).Message).To(ContainSubstring("does not authorize seeds"))

		for _, p := range previews {
			Expect(previewState(ctx, ns, p.Name)).To(Equal(string(v1.PreviewReady)+"/"+v1.ReasonPreviewReady), "intruders never disturb running previews")
		}
		mon.Check("three previews and two intruders")
		expectDeletesByPreviewRules(ns, mon)
	})

	It("expires a preview after its 60 s TTL: the child goes through its finalizer, routing first, and the preview stays Expired", func(ctx context.Context) {
		mon := watchPreviewSafety(ctx, ns)
		parent := previewParent(ctx, ns, "dev")
		short := createPreview(ctx, ns, "short", "dev", 60, nil)
		long := createPreview(ctx, ns, "long", "dev", 0, nil)
		awaitPreviewReady(ctx, ns, "short")
		awaitPreviewReady(ctx, ns, "long")
		fleet := preview.FleetName(short)
		rec := record(ctx, ns, gvrIngress, gvrPod, gvrFleet)
		expires := short.CreationTimestamp.Add(60 * time.Second)
		Expect(getPreview(ctx, ns, "short").Status.ExpiresAt.Time).To(BeTemporally("==", expires))

		framework.EventuallyWithin(ctx, time.Until(expires)+2*framework.Medium, func() string { return previewState(ctx, ns, "short") }).
			Should(Equal(string(v1.PreviewExpired)+"/"+v1.ReasonPreviewExpired), "the preview expires 60 s after its creation")
		framework.EventuallyWithin(ctx, 2*framework.Medium, func() error { return kube().Get(ctx, key(ns, fleet), &v1.CelldFleet{}) }).
			Should(MatchError(ContainSubstring("not found")), "the expired preview's fleet is deleted")
		Expect(time.Now()).To(BeTemporally(">=", expires))
		framework.EventuallyWithin(ctx, framework.Short, func() string { return conditionOfPreview(getPreview(ctx, ns, "short")).Message }).
			Should(ContainSubstring("is deleted; its prefix data and reservations are retained"))

		By("routing went before the member: the Ingress was deleted before the child's Pod began to stop")
		ingressGone := rec.await(ctx, "the child's Ingress deleted", func(e seen) bool { return e.Kind == "Ingress" && e.Name == fleet+"-routing" && e.Type == watch.Deleted })
		podStopping := rec.await(ctx, "the child's Pod stopping", func(e seen) bool { return e.Kind == "Pod" && e.Name == fleet+"-0" && e.Deleting })
		Expect(podStopping).To(BeNumerically(">", ingressGone), "the member stopped while its route still sent it traffic")

		By("the preview stays, the sibling with a day's TTL runs on, and nothing in the bucket is released")
		Consistently(ctx, func(g Gomega) {
			p := getPreview(ctx, ns, "short")
			g.Expect(p.DeletionTimestamp).To(BeNil())
			g.Expect(p.Status.Phase).To(Equal(v1.PreviewExpired))
			g.Expect(previewState(ctx, ns, "long")).To(Equal(string(v1.PreviewReady) + "/" + v1.ReasonPreviewReady))
		}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		bucket := parent.Spec.Previews.Storage.Bucket
		Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(bucket, fleet)}, &v1.CelldStorageReservation{})).To(Succeed(), "the prefix reservation is retained")
		Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(bucket, "")}, &v1.CelldStorageReservation{})).To(Succeed(), "the pool is retained")
		Expect(getFleet(ctx, ns, preview.FleetName(long)).DeletionTimestamp).To(BeNil())

		By("an expired preview is deleted at once: its fleet is already gone")
		Expect(kube().Delete(ctx, getPreview(ctx, ns, "short"))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func() error { return kube().Get(ctx, key(ns, "short"), &v1.CelldPreview{}) }).
			Should(MatchError(ContainSubstring("not found")))
		mon.Check("a TTL expiry")
		expectDeletesByPreviewRules(ns, mon)
	})

	It("deletes a preview only after its child's finalizer; deleting the parent blocks new previews and cascades to none", func(ctx context.Context) {
		mon := watchPreviewSafety(ctx, ns)
		parent := previewParent(ctx, ns, "dev")
		a := createPreview(ctx, ns, "pr-a", "dev", 0, nil)
		b := createPreview(ctx, ns, "pr-b", "dev", 0, nil)
		awaitPreviewReady(ctx, ns, "pr-a")
		awaitPreviewReady(ctx, ns, "pr-b")
		fleetA, fleetB := preview.FleetName(a), preview.FleetName(b)

		By("deleting a preview deletes its fleet and holds the preview (Deleting) until the fleet is gone")
		holdFleet(ctx, ns, fleetA, true) // as a slow finalizer of somebody else would
		rec := record(ctx, ns, gvrFleet, gvrPreview, gvrIngress, gvrPod)
		Expect(kube().Delete(ctx, getPreview(ctx, ns, "pr-a"))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			g.Expect(terminating(ctx, gvrFleet, ns, fleetA)).To(BeTrue(), "the child fleet is being deleted")
			g.Expect(previewState(ctx, ns, "pr-a")).To(Equal(string(v1.PreviewDeleting) + "/" + v1.ReasonPreviewDeleting))
		}).Should(Succeed())
		// The operator's own finalizer closes the route and stops the member; the test's hold
		// keeps the fleet after that.
		framework.EventuallyWithin(ctx, 2*framework.Medium, func() []string {
			return getFleet(ctx, ns, fleetA).Finalizers
		}).Should(Equal([]string{previewHold}), "the operator's finalizer finished")
		Consistently(ctx, func(g Gomega) {
			g.Expect(getPreview(ctx, ns, "pr-a").Finalizers).To(ContainElement(v1.FinalizerPreviewProtection))
		}).WithTimeout(3*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "the preview is released only once its fleet is gone")
		holdFleet(ctx, ns, fleetA, false)
		framework.EventuallyWithin(ctx, framework.Medium, func() error { return kube().Get(ctx, key(ns, "pr-a"), &v1.CelldPreview{}) }).
			Should(MatchError(ContainSubstring("not found")))
		fleetGone := rec.await(ctx, "the child fleet deleted", func(e seen) bool { return e.Kind == "CelldFleet" && e.Name == fleetA && e.Type == watch.Deleted })
		previewGone := rec.await(ctx, "the preview deleted", func(e seen) bool { return e.Kind == "CelldPreview" && e.Name == "pr-a" && e.Type == watch.Deleted })
		Expect(previewGone).To(BeNumerically(">", fleetGone), "the preview went before its fleet")
		ingressGone := rec.await(ctx, "the child's Ingress deleted", func(e seen) bool {
			return e.Kind == "Ingress" && e.Name == fleetA+"-routing" && e.Type == watch.Deleted
		})
		podStopping := rec.await(ctx, "the child's Pod stopping", func(e seen) bool { return e.Kind == "Pod" && e.Name == fleetA+"-0" && e.Deleting })
		Expect(podStopping).To(BeNumerically(">", ingressGone), "routing goes first")

		By("deleting the parent: no new preview is admitted while it is being deleted, and the running one is untouched")
		holdFleet(ctx, ns, "dev", true)
		Expect(kube().Delete(ctx, getFleet(ctx, ns, "dev"))).To(Succeed())
		c := createPreview(ctx, ns, "pr-c", "dev", 0, nil)
		framework.EventuallyWithin(ctx, framework.Medium, func() string { return previewState(ctx, ns, "pr-c") }).
			Should(Equal(string(v1.PreviewBlocked) + "/" + v1.ReasonParentDeleting))
		Consistently(ctx, func(g Gomega) {
			g.Expect(kube().Get(ctx, key(ns, preview.FleetName(c)), &v1.CelldFleet{})).To(MatchError(ContainSubstring("not found")), "a blocked preview creates nothing")
			g.Expect(previewState(ctx, ns, "pr-b")).To(Equal(string(v1.PreviewReady) + "/" + v1.ReasonPreviewReady))
			g.Expect(getFleet(ctx, ns, fleetB).DeletionTimestamp).To(BeNil(), "the parent's deletion cascades to no preview")
		}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		holdFleet(ctx, ns, "dev", false)
		framework.EventuallyWithin(ctx, 2*framework.Medium, func() error { return kube().Get(ctx, key(ns, "dev"), &v1.CelldFleet{}) }).
			Should(MatchError(ContainSubstring("not found")), "the parent is deleted")
		framework.EventuallyWithin(ctx, framework.Medium, func() string { return previewState(ctx, ns, "pr-c") }).
			Should(Equal(string(v1.PreviewBlocked) + "/" + v1.ReasonParentMissing))
		createPreview(ctx, ns, "pr-d", "dev", 0, nil)
		framework.EventuallyWithin(ctx, framework.Medium, func() string { return previewState(ctx, ns, "pr-d") }).
			Should(Equal(string(v1.PreviewBlocked) + "/" + v1.ReasonParentMissing))
		framework.EventuallyWithin(ctx, framework.Medium, func() string { return conditionOfPreview(getPreview(ctx, ns, "pr-b")).Message }).
			Should(ContainSubstring("is gone or was replaced"), "the surviving preview says its parent is gone")
		Expect(previewState(ctx, ns, "pr-b")).To(Equal(string(v1.PreviewReady) + "/" + v1.ReasonPreviewReady))
		waitFleetReady(ctx, ns, fleetB, 1)

		By("the surviving preview is deleted on its own; the pool stays reserved to the old parent's UID")
		Expect(kube().Delete(ctx, getPreview(ctx, ns, "pr-b"))).To(Succeed())
		framework.EventuallyWithin(ctx, 2*framework.Medium, func() error { return kube().Get(ctx, key(ns, "pr-b"), &v1.CelldPreview{}) }).
			Should(MatchError(ContainSubstring("not found")))
		Expect(kube().Get(ctx, key(ns, fleetB), &v1.CelldFleet{})).To(MatchError(ContainSubstring("not found")))
		pool := &v1.CelldStorageReservation{}
		Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(parent.Spec.Previews.Storage.Bucket, "")}, pool)).To(Succeed())
		Expect(pool.Spec.FleetUID).To(Equal(string(parent.UID)))
		mon.Check("preview and parent deletion")
		expectDeletesByPreviewRules(ns, mon)
	})
})

// previewParent creates a three-member PersistentFleet, waits for it to be Ready, then adds
// spec.previews (a preview bucket of its own, Ingress routing under previewDomain) and proves
// that adding it restarts nothing.
func previewParent(ctx context.Context, ns, name string) *v1.CelldFleet {
	GinkgoHelper()
	return previewParentWith(ctx, ns, name, func(*v1.CelldFleet) string { return "" })
}

// previewParentWith is previewParent with more of spec.previews: extra returns JSON members
// to add to it (each starting with a comma), given the Ready parent.
func previewParentWith(ctx context.Context, ns, name string, extra func(*v1.CelldFleet) string) *v1.CelldFleet {
	GinkgoHelper()
	Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
	waitFleetReady(ctx, ns, name, 3)
	uids, stsGen := memberUIDs(ctx, ns, name, 3), statefulSetOf(ctx, ns, name).Generation
	patchFleet(ctx, ns, name, fmt.Sprintf(`{"spec":{"previews":{"storage":{"bucket":%q},"routing":{"baseDomain":%q,`+
		`"source":{"namespace":"ingress-edge","podLabels":{"app":"edge"}},"ingress":{"className":"nginx"}}%s}}}`, ns+"-previews", previewDomain, extra(getFleet(ctx, ns, name))))
	waitFleetReady(ctx, ns, name, 3)
	Expect(memberUIDs(ctx, ns, name, 3)).To(Equal(uids), "adding spec.previews restarts no member")
	Expect(statefulSetOf(ctx, ns, name).Generation).To(Equal(stsGen), "adding spec.previews leaves the workload alone")
	return getFleet(ctx, ns, name)
}

// previewHold is the test's finalizer, standing for somebody else's slow one.
const previewHold = "e2e.celld.eric.dev/hold"

// holdFleet adds the test's finalizer to a fleet, or removes it, keeping the operator's.
func holdFleet(ctx context.Context, ns, name string, on bool) {
	GinkgoHelper()
	framework.EventuallyWithin(ctx, framework.Short, func() error {
		f := getFleet(ctx, ns, name)
		var finalizers []string
		for _, x := range f.Finalizers {
			if x != previewHold {
				finalizers = append(finalizers, x)
			}
		}
		if on {
			finalizers = append(finalizers, previewHold)
		}
		f.Finalizers = finalizers
		return kube().Update(ctx, f)
	}).Should(Succeed())
}

// createPreview creates a CelldPreview of parent; ttl 0 keeps the API default.
func createPreview(ctx context.Context, ns, name, parent string, ttl int32, seed *v1.PreviewSeed) *v1.CelldPreview {
	GinkgoHelper()
	p := &v1.CelldPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.CelldPreviewSpec{FleetRef: v1.PreviewFleetRef{Name: parent}, Source: "feature/" + name, Revision: "0e1738ed", TTLSeconds: ttl, Seed: seed},
	}
	Expect(kube().Create(ctx, p)).To(Succeed())
	return p
}

func getPreview(ctx context.Context, ns, name string) *v1.CelldPreview {
	GinkgoHelper()
	p := &v1.CelldPreview{}
	Expect(kube().Get(ctx, key(ns, name), p)).To(Succeed())
	return p
}

func conditionOfPreview(p *v1.CelldPreview) metav1.Condition {
	if c := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// previewState is "PHASE/READY-REASON".
func previewState(ctx context.Context, ns, name string) string {
	GinkgoHelper()
	p := getPreview(ctx, ns, name)
	return string(p.Status.Phase) + "/" + conditionOfPreview(p).Reason
}

// awaitPreviewReady answers for the ingress controller once the child's Ingress exists (an
// address on its status, as a controller publishes it) and waits for the preview to be Ready.
func awaitPreviewReady(ctx context.Context, ns, name string) v1.CelldPreviewStatus {
	GinkgoHelper()
	return awaitPreviewReadyWithin(ctx, ns, name, 3*framework.Medium)
}

func awaitPreviewReadyWithin(ctx context.Context, ns, name string, d time.Duration) v1.CelldPreviewStatus {
	GinkgoHelper()
	var st v1.CelldPreviewStatus
	framework.EventuallyWithin(ctx, d, func(g Gomega) {
		p := getPreview(ctx, ns, name)
		st = p.Status
		if p.Status.Phase != v1.PreviewReady {
			answerIngress(ctx, g, ns, preview.FleetName(p)+"-routing")
		}
		g.Expect(string(p.Status.Phase)+"/"+conditionOfPreview(p).Reason).To(Equal(string(v1.PreviewReady)+"/"+v1.ReasonPreviewReady), conditionOfPreview(p).Message)
	}).Should(Succeed())
	return st
}

// answerIngress publishes an address on an Ingress that has none.
func answerIngress(ctx context.Context, g Gomega, ns, name string) {
	ing := &networkingv1.Ingress{}
	if err := kube().Get(ctx, key(ns, name), ing); err != nil {
		return
	}
	if len(ing.Status.LoadBalancer.Ingress) == 0 {
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
		g.Expect(client.IgnoreNotFound(kube().Status().Update(ctx, ing))).To(Succeed())
	}
}

// expectNothingFor: fleet name (UID uid) provisioned nothing: no workload, Service, policy or
// Pod, and no reservation bound to it.
func expectNothingFor(ctx context.Context, g Gomega, ns, name string, uid types.UID) {
	expectNoResourcesFor(ctx, g, ns, name, uid)
	list := &v1.CelldStorageReservationList{}
	g.Expect(kube().List(ctx, list)).To(Succeed())
	for _, r := range list.Items {
		g.Expect(r.Spec.FleetUID).NotTo(Equal(string(uid)), "CelldStorageReservation %s is bound to fleet %s/%s", r.Name, ns, name)
	}
}

// expectNoResourcesFor: fleet ns/name (UID uid) has no workload, Service, NetworkPolicy or Pod.
func expectNoResourcesFor(ctx context.Context, g Gomega, ns, name string, uid types.UID) {
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &appsv1.Deployment{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}} {
		g.Expect(kube().Get(ctx, key(ns, name), obj)).To(MatchError(ContainSubstring("not found")), "%T %s/%s exists", obj, ns, name)
	}
	pods := &corev1.PodList{}
	g.Expect(kube().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{v1.LabelFleetUID: string(uid)})).To(Succeed())
	g.Expect(pods.Items).To(BeEmpty(), "fleet %s/%s has Pods", ns, name)
}

// previewSafety is a continuous monitor of one namespace's fleets, previews and members,
// following every change through watches and recording the first violation of:
//   - a member Pod starts to stop while its fleet is not being deleted (nothing in these specs
//     restarts or replaces a member, so only a fleet's deletion may stop one);
//   - a generated fleet is deleted before its preview expired or was deleted;
//   - a preview is released (gone) while its generated fleet still exists.
type previewSafety struct {
	mu        sync.Mutex
	ns        string
	violation string
	events    int
	// previews are what the preview watch saw last of each preview, by UID.
	previews map[types.UID]previewSeen
	// children are the generated fleets' deletions (fleet name, preview UID, when) not yet
	// judged because their preview could no longer be read.
	children []childDeletion
	stopping map[types.UID]bool
	// fleetDeleting is when each fleet's deletion began (the API server's time), by name.
	fleetDeleting map[string]time.Time
	// judged counts the deletions the monitor judged.
	judged int
}

type previewSeen struct {
	name     string
	expires  time.Time
	deleting *metav1.Time
}

type childDeletion struct {
	fleet   string
	preview types.UID
	at      time.Time
}

func (s previewSeen) allows(at time.Time) bool {
	return !at.Before(s.expires) || (s.deleting != nil && !s.deleting.After(at))
}

func seenOf(p *v1.CelldPreview) previewSeen {
	ttl := p.Spec.TTLSeconds
	if ttl == 0 {
		ttl = 86400
	}
	return previewSeen{name: p.Name, expires: p.CreationTimestamp.Add(time.Duration(ttl) * time.Second), deleting: p.DeletionTimestamp}
}

func watchPreviewSafety(ctx context.Context, ns string) *previewSafety {
	GinkgoHelper()
	m := &previewSafety{ns: ns, previews: map[types.UID]previewSeen{}, stopping: map[types.UID]bool{}, fleetDeleting: map[string]time.Time{}}
	for _, gvr := range []schema.GroupVersionResource{gvrPod, gvrFleet, gvrPreview} {
		res := framework.Cluster.Dynamic.Resource(gvr).Namespace(ns)
		list, err := res.List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(BeEmpty(), "the monitor starts before anything exists in %s", ns)
		w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					m.observe(ctx, ev.Type, u)
				}
			}
		}()
	}
	return m
}

func (m *previewSafety) fail(format string, args ...any) {
	if m.violation == "" {
		m.violation = time.Now().Format(time.RFC3339Nano) + ": " + fmt.Sprintf(format, args...)
	}
}

func (m *previewSafety) observe(ctx context.Context, t watch.EventType, u *unstructured.Unstructured) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	switch u.GetKind() {
	case "Pod":
		if u.GetDeletionTimestamp() == nil && t != watch.Deleted || m.stopping[u.GetUID()] {
			return
		}
		m.stopping[u.GetUID()] = true
		m.judgePod(ctx, u)
	case "CelldFleet":
		if u.GetDeletionTimestamp() == nil || m.stopping[u.GetUID()] {
			return
		}
		m.stopping[u.GetUID()] = true
		m.fleetDeleting[u.GetName()] = u.GetDeletionTimestamp().Time
		if u.GetLabels()[v1.LabelPreviewUID] == "" {
			return // the spec deletes a parent or an intruder itself
		}
		m.judgeChild(ctx, childDeletion{fleet: u.GetName(), preview: types.UID(u.GetLabels()[v1.LabelPreviewUID]), at: u.GetDeletionTimestamp().Time})
	case "CelldPreview":
		p := &v1.CelldPreview{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p) != nil {
			m.fail("cannot read CelldPreview %s/%s from its watch", m.ns, u.GetName())
			return
		}
		m.previews[p.UID] = seenOf(p)
		if t == watch.Deleted {
			f := &v1.CelldFleet{}
			err := kube().Get(ctx, key(m.ns, preview.FleetName(p)), f)
			if err == nil && f.Labels[v1.LabelPreviewUID] == string(p.UID) {
				m.fail("CelldPreview %s/%s was released while its CelldFleet %s still existed", m.ns, p.Name, f.Name)
			}
		}
	}
}

// judgePod: the fleet of a stopping member must be being deleted since no later than the
// member's deletion was asked for (both are the API server's times, in whole seconds). A
// fleet that is gone was deleted before.
func (m *previewSafety) judgePod(ctx context.Context, u *unstructured.Unstructured) {
	uid := u.GetLabels()[v1.LabelFleetUID]
	if uid == "" {
		return
	}
	asked := time.Now() // a Deleted event without a deletionTimestamp: the stop was asked before now
	if u.GetDeletionTimestamp() != nil {
		asked = u.GetDeletionTimestamp().Time
	}
	if g := u.GetDeletionGracePeriodSeconds(); g != nil {
		asked = asked.Add(-time.Duration(*g) * time.Second)
	}
	list := &v1.CelldFleetList{}
	if err := kube().List(ctx, list, client.InNamespace(m.ns)); err != nil {
		if ctx.Err() == nil {
			m.fail("cannot judge the stop of member %s/%s: %v", m.ns, u.GetName(), err)
		}
		return
	}
	m.judged++
	for _, f := range list.Items {
		if string(f.UID) != uid {
			continue
		}
		if f.DeletionTimestamp == nil || f.DeletionTimestamp.After(asked) {
			m.fail("member %s/%s began to stop (deletion asked at %s) while its CelldFleet %s was not being deleted (deletionTimestamp %v)",
				m.ns, u.GetName(), asked.UTC().Format(time.RFC3339), f.Name, f.DeletionTimestamp)
		}
	}
}

// judgeChild: a generated fleet is deleted only once its preview expired or was deleted.
func (m *previewSafety) judgeChild(ctx context.Context, d childDeletion) {
	list := &v1.CelldPreviewList{}
	if err := kube().List(ctx, list, client.InNamespace(m.ns)); err != nil {
		if ctx.Err() == nil {
			m.fail("cannot judge the deletion of CelldFleet %s/%s: %v", m.ns, d.fleet, err)
		}
		return
	}
	for i := range list.Items {
		if list.Items[i].UID == d.preview {
			m.previews[d.preview] = seenOf(&list.Items[i])
		}
	}
	s, ok := m.previews[d.preview]
	if !ok {
		m.children = append(m.children, d) // judged by Check, once the preview watch caught up
		return
	}
	m.judged++
	if !s.allows(d.at) {
		m.fail("CelldFleet %s/%s was deleted at %s while its preview %s was neither expired (at %s) nor being deleted",
			m.ns, d.fleet, d.at.UTC().Format(time.RFC3339), s.name, s.expires.UTC().Format(time.RFC3339))
	}
}

// Check fails the spec on the first violation the monitor saw.
func (m *previewSafety) Check(during string) {
	GinkgoHelper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.children {
		s, ok := m.previews[d.preview]
		Expect(ok).To(BeTrue(), "safety during %s: CelldFleet %s/%s was deleted and its preview (UID %s) was never seen", during, m.ns, d.fleet, d.preview)
		m.judged++
		if !s.allows(d.at) {
			m.fail("CelldFleet %s/%s was deleted at %s while its preview %s was neither expired nor being deleted", m.ns, d.fleet, d.at.UTC().Format(time.RFC3339), s.name)
		}
	}
	m.children = nil
	Expect(m.violation).To(BeEmpty(), "safety during %s: %s", during, m.violation)
	Expect(m.events).To(BeNumerically(">", 0), "the monitor saw no change during %s; it watched nothing", during)
	AddReportEntry("preview safety: changes followed, deletions judged during "+during, fmt.Sprintf("%d, %d", m.events, m.judged))
}

// expectDeletesByPreviewRules reads the operator's journals: every CelldFleet it deleted is a
// generated fleet whose preview had expired or was being deleted when the operator sent the
// delete, and every member or claim it deleted belonged to a fleet whose deletion had begun.
func expectDeletesByPreviewRules(ns string, m *previewSafety) {
	GinkgoHelper()
	m.mu.Lock()
	byFleet := map[string]previewSeen{}
	for uid, s := range m.previews {
		byFleet["p-"+strings.ReplaceAll(string(uid), "-", "")] = s
	}
	deleting := map[string]time.Time{}
	for name, at := range m.fleetDeleting {
		deleting[name] = at
	}
	m.mu.Unlock()
	children := 0
	for _, w := range operatorWrites(ns, time.Time{}) {
		if w.Method != "DELETE" || !strings.Contains(w.Path, "/celldfleets/") {
			continue
		}
		name := w.Path[strings.LastIndexByte(w.Path, '/')+1:]
		s, ok := byFleet[name]
		Expect(ok).To(BeTrue(), "safety: the operator deleted CelldFleet %s/%s, which no preview generated", ns, name)
		Expect(s.allows(w.At)).To(BeTrue(), "safety: the operator deleted CelldFleet %s/%s at %s while preview %s was neither expired (at %s) nor being deleted",
			ns, name, w.At.Format(time.RFC3339Nano), s.name, s.expires.Format(time.RFC3339))
		children++
	}
	for _, d := range operatorDeletes(ns) {
		member := strings.TrimPrefix(d.Name, "data-")
		fleet := member[:max(strings.LastIndexByte(member, '-'), 0)]
		at, ok := deleting[fleet]
		Expect(ok && !d.At.Before(at)).To(BeTrue(), "safety: the operator deleted %s %s/%s at %s, and fleet %s was not being deleted then (since %v)",
			d.Kind, ns, d.Name, d.At.Format(time.RFC3339Nano), fleet, at)
	}
	AddReportEntry("operator deletes of generated fleets in "+ns, children)
}
