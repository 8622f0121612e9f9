package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// The order of the operator's writes, read from its request journal (every write it sent, in
// the order the API server answered), where the seeds prescribe one.
var _ = Describe("the order of the operator's writes", func() {
	It("creates the mesh's AuthorizationPolicy before the workload, and changes only policies on a controlPlaneNamespace or applicationAccess change", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "order-mesh")
		const name = "om"
		framework.StartInjector(ctx, ns, framework.NativeSidecar)
		f := persistentFleet(ns, name, 3)
		f.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{}}
		start := time.Now()
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)

		By("the AuthorizationPolicy exists before the workload (seed 004)")
		writes := operatorWrites(ns, start)
		policy := firstWrite(writes, "/authorizationpolicies/"+name+"-mesh")
		workload := firstWrite(writes, "/statefulsets/"+name)
		Expect(policy).To(BeNumerically(">=", 0), "the operator never wrote AuthorizationPolicy %s-mesh", name)
		Expect(workload).To(BeNumerically(">=", 0), "the operator never wrote StatefulSet %s", name)
		Expect(policy).To(BeNumerically("<", workload), "the StatefulSet was written before the AuthorizationPolicy: %v", writes)

		By("a controlPlaneNamespace and applicationAccess change rewrites the policies and rolls no member")
		uids := memberUIDs(ctx, ns, name, 3)
		sts := statefulSetOf(ctx, ns, name)
		nobodyDown := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 0)
		changed := time.Now()
		patchFleet(ctx, ns, name, `{"spec":{"mesh":{"istio":{"controlPlaneNamespace":"istio-canary","applicationAccess":"Policies"}}}}`)
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			live := getFleet(ctx, ns, name)
			g.Expect(live.Status.ObservedGeneration).To(Equal(live.Generation))
			ap := object(ctx, gvrAuthz, ns, name+"-mesh")
			g.Expect(ap).NotTo(BeNil())
			g.Expect(fmt.Sprint(ap.Object["spec"])).NotTo(ContainSubstring("8080"), "with applicationAccess Policies the policy no longer admits port 8080")
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		Consistently(ctx, func() map[int]types.UID { return memberUIDs(ctx, ns, name, 3) }).
			WithTimeout(5*time.Second).WithPolling(framework.Poll).Should(Equal(uids), "a policy-only change rolled a member")
		Expect(statefulSetOf(ctx, ns, name).Generation).To(Equal(sts.Generation), "a policy-only change wrote the StatefulSet's spec")
		Expect(firstWrite(operatorWrites(ns, changed), "/statefulsets/"+name)).To(Equal(-1), "the operator wrote the StatefulSet after a policy-only change")
		nobodyDown.Check("a controlPlaneNamespace and applicationAccess change")
		expectNoOperatorDeletes(ns, "mesh policy changes")
	})

	It("deletes the workload, then the claims, then the finalizer (seed 001)", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "order-del")
		const name = "od"
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)
		Expect(claims).To(HaveLen(3))
		start := time.Now()
		Expect(kube().Delete(ctx, getFleet(ctx, ns, name))).To(Succeed())
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			err := kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1.CelldFleet{})
			g.Expect(err).To(HaveOccurred(), "the fleet is gone once its workload and disks are")
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		}).Should(Succeed())

		writes := operatorWrites(ns, start)
		workload := firstWrite(writes, "DELETE /statefulsets/"+name)
		Expect(workload).To(BeNumerically(">=", 0), "the operator never deleted the StatefulSet: %v", writes)
		var claimDeletes []int
		for i, w := range writes {
			if w.Method == "DELETE" && strings.Contains(w.Path, "/persistentvolumeclaims/") {
				claimDeletes = append(claimDeletes, i)
			}
		}
		Expect(claimDeletes).To(HaveLen(len(claims)), "every claim is deleted once: %v", writes)
		finalizer := lastWrite(writes, "PATCH /celldfleets/"+name)
		Expect(finalizer).To(BeNumerically(">=", 0), "the operator never removed its finalizer: %v", writes)
		for _, c := range claimDeletes {
			Expect(c).To(BeNumerically(">", workload), "a claim was deleted before the workload: %v", writes)
			Expect(c).To(BeNumerically("<", finalizer), "the finalizer went before a claim: %v", writes)
		}
	})
})

// firstWrite is the index of the first write whose "METHOD path" ends with suffix (a path
// suffix alone matches any method), or -1.
func firstWrite(writes []writeRecord, suffix string) int {
	for i, w := range writes {
		if writeMatches(w, suffix) {
			return i
		}
	}
	return -1
}

// lastWrite is firstWrite from the end.
func lastWrite(writes []writeRecord, suffix string) int {
	for i := len(writes) - 1; i >= 0; i-- {
		if writeMatches(writes[i], suffix) {
			return i
		}
	}
	return -1
}

func writeMatches(w writeRecord, suffix string) bool {
	p := w.Path
	if w.Method == "POST" && w.Name != "" {
		p += "/" + w.Name // a create is sent to its collection and names the object in its body
	}
	method, path, ok := strings.Cut(suffix, " ")
	if !ok {
		return strings.HasSuffix(p, suffix)
	}
	return w.Method == method && strings.HasSuffix(p, path)
}
