package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
	"github.com/celld/celld-operator/tests/gitops"
)

// updateGitOpsTestdata, when set to 1, makes the spec also write the fleets it captures to
// tests/gitops/testdata, where the unit test evaluates the checks without a cluster.
const updateGitOpsTestdata = "CELLD_UPDATE_GITOPS_TESTDATA"

// The health checks docs/gitops.md gives to Argo CD and Flux are evaluated here on live fleets
// in each state a GitOps tool must tell apart, as each tool would read them.
var _ = Describe("GitOps health checks", func() {
	It("tell Ready, Provisioning, Blocked, paused and deleting fleets apart on live objects", func(ctx context.Context) {
		checks, err := gitops.Load(filepath.Join("..", ".."))
		Expect(err).NotTo(HaveOccurred())
		ns := fleetNamespace(ctx, "gitops")
		const name, unrunnable = "gh", "gh-nosa"
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())

		By("a fleet whose ServiceAccount does not exist is Blocked: Degraded for Argo CD, Failed for Flux")
		nosa := persistentFleet(ns, unrunnable, 3)
		nosa.Spec.ServiceAccountName = "no-such-account"
		Expect(kube().Create(ctx, nosa)).To(Succeed())
		captureHealth(ctx, checks, ns, unrunnable, "blocked", gitops.Degraded, gitops.Failed, func(g Gomega, f *v1.CelldFleet) {
			g.Expect(conditionOf(f, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonServiceAccountMissing))
		})

		By("a Ready fleet is Healthy and Current")
		waitFleetReady(ctx, ns, name, 3)
		captureHealth(ctx, checks, ns, name, "ready", gitops.Healthy, gitops.Current, func(g Gomega, f *v1.CelldFleet) {
			g.Expect(conditionOf(f, v1.ConditionReady)).To(Equal("True/" + v1.ReasonProvisioned))
		})

		By("a fleet whose members are all Ready but whose PodDisruptionBudget was taken from it is Blocked, not healthy")
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pdb)).To(Succeed())
		delete(pdb.Labels, v1.LabelFleetUID)
		Expect(kube().Update(ctx, pdb)).To(Succeed())
		captureHealth(ctx, checks, ns, name, "blocked-ready", gitops.Degraded, gitops.Failed, func(g Gomega, f *v1.CelldFleet) {
			g.Expect(conditionOf(f, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonInfrastructureBlocked))
			g.Expect(conditionOf(f, v1.ConditionReady)).To(HavePrefix("True/"), "every member is still Ready")
		})
		Expect(kube().Delete(ctx, pdb)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)

		By("a paused fleet is Suspended for Argo CD and Current for Flux")
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":true}}}`)
		captureHealth(ctx, checks, ns, name, "paused", gitops.Suspended, gitops.Current, func(g Gomega, f *v1.CelldFleet) {
			g.Expect(conditionOf(f, v1.ConditionMaintenancePaused)).To(Equal("True/" + v1.ReasonMaintenancePaused))
			g.Expect(conditionOf(f, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonMaintenancePaused))
		})
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":false}}}`)
		waitFleetReady(ctx, ns, name, 3)

		By("a fleet waiting for mesh sidecars no injector adds stays Provisioning: Progressing and InProgress")
		patchFleet(ctx, ns, name, `{"spec":{"mesh":{"istio":{}}}}`)
		captureHealth(ctx, checks, ns, name, "provisioning", gitops.Progressing, gitops.InProgress, func(g Gomega, f *v1.CelldFleet) {
			g.Expect(conditionOf(f, v1.ConditionProgressing)).To(Equal("True/" + v1.ReasonProvisioning))
			g.Expect(conditionMessage(f, v1.ConditionProgressing)).To(ContainSubstring("verify Istio injection"))
		})

		By("a fleet being deleted is Progressing and InProgress")
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			pods := livePods(ctx, ns, name)
			g.Expect(pods).To(HaveLen(3))
			for _, p := range pods {
				g.Expect(p.Labels).To(HaveKeyWithValue(framework.InjectLabel, "true"), "member %s is not on the meshed template yet", p.Name)
				g.Expect(framework.IsReady(&p)).To(BeTrue(), "member %s is not Ready", p.Name)
			}
		}).Should(Succeed())
		for i := range 3 {
			setKnob(ctx, ns, fmt.Sprintf("%s-%d", name, i), "CELLD_SIM_DRAIN_MS", "8000") // a drain slow enough to be seen
		}
		Expect(kube().Delete(ctx, getFleet(ctx, ns, name))).To(Succeed())
		captureHealth(ctx, checks, ns, name, "deleting", gitops.Progressing, gitops.InProgress, func(g Gomega, f *v1.CelldFleet) {
			g.Expect(f.DeletionTimestamp).NotTo(BeNil())
			g.Expect(conditionOf(f, v1.ConditionDeleting)).To(Equal("True/" + v1.ReasonDeleting))
		})
	})
})

// captureHealth waits until the fleet, as the API server serves it, is in the state inState
// describes and its status describes its current generation, then evaluates both published
// checks on that very object and requires the verdicts of that state. The object is kept as
// JSON (without managedFields) in the artifacts, and in tests/gitops/testdata when
// CELLD_UPDATE_GITOPS_TESTDATA=1.
func captureHealth(ctx context.Context, checks *gitops.Checks, ns, name, state, argo, flux string, inState func(Gomega, *v1.CelldFleet)) {
	GinkgoHelper()
	var raw []byte
	framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
		u, err := framework.Cluster.Dynamic.Resource(v1.GroupVersion.WithResource("celldfleets")).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		f := &v1.CelldFleet{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, f)).To(Succeed())
		g.Expect(f.Status.ObservedGeneration).To(Equal(f.Generation), "the status describes an earlier generation")
		inState(g, f)
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
		raw, err = json.MarshalIndent(u.Object, "", "  ")
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed(), "fleet %s/%s never reached the %s state", ns, name, state)

	obj, err := gitops.Decode(raw)
	Expect(err).NotTo(HaveOccurred())
	got, err := gitops.ArgoHealth(checks.ArgoScript, obj)
	Expect(err).NotTo(HaveOccurred(), "the Argo CD script failed on the %s fleet", state)
	Expect(got.Status).To(Equal(argo), "Argo CD health of the %s fleet (message %q):\n%s", state, got.Message, raw)
	Expect(got.Message).NotTo(BeEmpty(), "Argo CD shows no message for the %s fleet", state)
	status, err := gitops.FluxHealth(checks.Flux, obj)
	Expect(err).NotTo(HaveOccurred(), "the Flux expressions failed on the %s fleet", state)
	Expect(status).To(Equal(flux), "Flux health of the %s fleet:\n%s", state, raw)
	AddReportEntry("GitOps health of the "+state+" fleet", fmt.Sprintf("Argo CD %s (%s), Flux %s", got.Status, got.Message, status))

	raw = append(raw, '\n')
	dir := filepath.Join(artifactsDir(), "gitops")
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, state+".json"), raw, 0o644)).To(Succeed())
	if os.Getenv(updateGitOpsTestdata) == "1" {
		Expect(os.WriteFile(filepath.Join("..", "gitops", "testdata", state+".json"), raw, 0o644)).To(Succeed())
	}
}
