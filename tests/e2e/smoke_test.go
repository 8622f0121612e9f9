package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/tests/celldsim"
	"github.com/celld/celld-operator/tests/e2e/framework"
	"github.com/celld/celld-operator/tests/localcluster"
)

// readinessFlip is how soon the simulator must flip a fleet pod's Ready after its health
// changes. It probes every 300 ms; a kubelet with the operator's probe (period 2 s, failure
// threshold 3) may take up to 6 s, so the harness is never slower than production.
const readinessFlip = 2 * time.Second

// These specs prove the harness itself: what the lifecycle specs rely on must hold here.
var _ = Describe("local cluster", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = framework.NewNamespace(ctx, "smoke") })

	It("rolls a StatefulSet with claims highest ordinal first", func(ctx context.Context) {
		sts := statefulSet("roll", 3, false)
		sts.Spec.MinReadySeconds = 1 // spaces the steps so the order is observable
		create(ctx, ns, sts)
		waitReadyReplicas(ctx, ns, "roll", 3)

		oldRevision := framework.Pod(ctx, ns, "roll-0").Labels[appsv1.ControllerRevisionHashLabelKey]
		Expect(oldRevision).NotTo(BeEmpty())
		w, err := framework.Cluster.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=roll"})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"rollout":"1"}}}}}`)
		_, err = framework.Cluster.Client.AppsV1().StatefulSets(ns).Patch(ctx, "roll", "application/merge-patch+json", patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())

		// Only deletions of pods at the old revision are the rollout's steps: a pod at the new
		// revision that is deleted (for any reason) is recorded but is not one of them.
		var order, seen []string
		deadline := time.After(framework.Medium)
		for len(order) < 3 {
			select {
			case ev, open := <-w.ResultChan():
				Expect(open).To(BeTrue(), "the pod watch closed early; deletions so far: %v", seen)
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type != watch.Deleted {
					continue
				}
				rev := p.Labels[appsv1.ControllerRevisionHashLabelKey]
				seen = append(seen, p.Name+"@"+rev)
				if rev == oldRevision {
					order = append(order, p.Name)
				}
			case <-deadline:
				Fail(fmt.Sprintf("rollout did not delete three old pods in %s; deletions seen (name@revision): %v", framework.Medium, seen))
			}
		}
		Expect(order).To(Equal([]string{"roll-2", "roll-1", "roll-0"}),
			"a StatefulSet rollout replaces the highest ordinal first; deletions seen (name@revision): %v", seen)
		if len(seen) != len(order) {
			// a pod at the new revision was deleted too: not a rollout step, but worth a trace
			AddReportEntry("deletions seen during the rollout (name@revision)", fmt.Sprint(seen))
		}
	})

	It("reports a lost volume as a Lost claim", func(ctx context.Context) {
		create(ctx, ns, statefulSet("lose", 1, false))
		waitReadyReplicas(ctx, ns, "lose", 1)
		Expect(framework.Cluster.Faults.LoseVolume(ctx, ns, "data-lose-0")).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			pvc, err := framework.Cluster.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-lose-0", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimLost))
		}).Should(Succeed())
	})

	It("flips a fleet pod's readiness from the simulator's health within 2 s", func(ctx context.Context) {
		pod := create(ctx, ns, fleetPod("ready", nil)).(*corev1.Pod)
		framework.EventuallyWithin(ctx, framework.Short, func() bool { return framework.IsReady(framework.Pod(ctx, ns, pod.Name)) }).
			Should(BeTrue(), "the simulator makes a fleet pod Ready")
		Expect(framework.Cluster.Faults.Unhealthy(ctx, ns, pod.Name, true)).To(Succeed())
		framework.EventuallyWithin(ctx, readinessFlip, func() bool { return framework.IsReady(framework.Pod(ctx, ns, pod.Name)) }).
			Should(BeFalse(), "an unhealthy member turns not Ready within %s", readinessFlip)
		Expect(framework.Cluster.Faults.Unhealthy(ctx, ns, pod.Name, false)).To(Succeed())
		framework.EventuallyWithin(ctx, readinessFlip, func() bool { return framework.IsReady(framework.Pod(ctx, ns, pod.Name)) }).
			Should(BeTrue(), "a healthy member turns Ready again within %s", readinessFlip)
	})

	It("serves the documented /state at the pod IP, with a new runtime generation per process", func(ctx context.Context) {
		env := []corev1.EnvVar{{Name: "CELLD_SIM_RESIDENT_CELLS", Value: "2"}, {Name: "CELLD_SIM_APP_VERSION", Value: "0e1738ed65659e75"}}
		pod := create(ctx, ns, fleetPod("state", env)).(*corev1.Pod)
		var ip string
		framework.EventuallyWithin(ctx, framework.Short, func() bool {
			p := framework.Pod(ctx, ns, pod.Name)
			ip = p.Status.PodIP
			return framework.IsReady(p)
		}).Should(BeTrue())
		first := getState(ctx, ip)
		Expect(first.Shutdown.SchemaVersion).To(Equal(1))
		Expect(first.Shutdown.RuntimeGeneration).To(MatchRegexp(`^[0-9a-f]{64}$`))
		Expect(first.Deployment.Version).To(Equal("0e1738ed65659e75"))
		Expect(first.Deployment.Prefix).To(Equal("deploy/app/0e1738ed65659e75"))
		Expect(first.Deployment.Generation).To(BeEquivalentTo(1))
		Expect(first.Deployment.Cells).To(HaveLen(2))
		Expect(first.Occupied).To(BeEquivalentTo(2))
		Expect(first.NodeLoad.Draining).To(BeFalse())
		Expect(time.Since(time.UnixMilli(first.NodeLoad.SampledMS))).To(BeNumerically("<", 5*time.Second))

		Expect(framework.Cluster.Faults.KillMember(ctx, ns, pod.Name)).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			p := framework.Pod(ctx, ns, pod.Name)
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeEquivalentTo(1))
			g.Expect(framework.IsReady(p)).To(BeTrue())
		}).Should(Succeed(), "a killed member restarts and becomes Ready again")
		Expect(getState(ctx, ip).Shutdown.RuntimeGeneration).NotTo(Equal(first.Shutdown.RuntimeGeneration),
			"a new process reports a new runtime generation")
	})

	It("drains a deleted fleet pod before it disappears", func(ctx context.Context) {
		pod := create(ctx, ns, fleetPod("drain", []corev1.EnvVar{{Name: celldsim.KnobDrainMS, Value: "3000"}})).(*corev1.Pod)
		var ip string
		framework.EventuallyWithin(ctx, framework.Short, func() bool {
			p := framework.Pod(ctx, ns, pod.Name)
			ip = p.Status.PodIP
			return framework.IsReady(p)
		}).Should(BeTrue())
		Expect(framework.Cluster.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func() bool { return getState(ctx, ip).NodeLoad.Draining }).
			Should(BeTrue(), "/state reports the drain")
		Expect(framework.Pod(ctx, ns, pod.Name)).NotTo(BeNil(), "the pod still exists while it drains")
		framework.EventuallyWithin(ctx, framework.Short, func() *corev1.Pod { return framework.Pod(ctx, ns, pod.Name) }).
			Should(BeNil(), "the pod is gone once the drain ends")
	})
})

// Specs that change nodes run serially, after the parallel ones, so they disturb no other spec.
var _ = Describe("local cluster faults", Serial, func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = framework.NewNamespace(ctx, "faults") })

	It("reschedules a recreated pod into its volume's zone", func(ctx context.Context) {
		create(ctx, ns, statefulSet("zonal", 1, false))
		waitReadyReplicas(ctx, ns, "zonal", 1)
		first := framework.Pod(ctx, ns, "zonal-0")
		zone := framework.NodeZone(ctx, first.Spec.NodeName)
		// the old node is cordoned, so only the volume's zone affinity can bring it back there
		Expect(setUnschedulable(ctx, first.Spec.NodeName, true)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(setUnschedulable(ctx, first.Spec.NodeName, false)).To(Succeed()) })
		Expect(framework.Cluster.Client.CoreV1().Pods(ns).Delete(ctx, "zonal-0", metav1.DeleteOptions{})).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			p := framework.Pod(ctx, ns, "zonal-0")
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.UID).NotTo(Equal(first.UID))
			g.Expect(framework.IsReady(p)).To(BeTrue())
			g.Expect(p.Spec.NodeName).NotTo(Equal(first.Spec.NodeName))
			g.Expect(framework.NodeZone(ctx, p.Spec.NodeName)).To(Equal(zone), "the pod follows its volume's zone")
		}).Should(Succeed())
	})

	It("leaves pods unschedulable with the scheduler's message when their zone is cordoned", func(ctx context.Context) {
		zone := framework.Cluster.Zones[0]
		Expect(framework.Cluster.Faults.CordonZone(ctx, zone)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(framework.Cluster.Faults.UncordonZone(ctx, zone)).To(Succeed()) })
		pod := plainPod("pinned")
		pod.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: zone}
		create(ctx, ns, pod)
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			c := framework.Condition(framework.Pod(ctx, ns, "pinned"), corev1.PodScheduled)
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(corev1.PodReasonUnschedulable))
			g.Expect(c.Message).To(MatchRegexp(`0/\d+ nodes are available: .*node\(s\) were unschedulable`))
		}).Should(Succeed())
	})

	It("keeps a pod on a failed node Terminating until it is force-deleted", func(ctx context.Context) {
		node := framework.Cluster.Nodes[len(framework.Cluster.Nodes)-1]
		pod := plainPod("stuck")
		pod.Spec.NodeName = node
		pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(1))}}
		create(ctx, ns, pod)
		framework.EventuallyWithin(ctx, framework.Short, func() bool { return framework.IsReady(framework.Pod(ctx, ns, "stuck")) }).Should(BeTrue())

		Expect(framework.Cluster.Faults.FailNode(ctx, node)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(framework.Cluster.Faults.RecoverNode(ctx, node)).To(Succeed()) })
		framework.EventuallyWithin(ctx, framework.NodeLoss, func() *metav1.Time { return framework.Pod(ctx, ns, "stuck").DeletionTimestamp }).
			ShouldNot(BeNil(), "the taint manager evicts the pod of a NotReady node")
		Consistently(ctx, func() *corev1.Pod { return framework.Pod(ctx, ns, "stuck") }).WithTimeout(3*time.Second).WithPolling(time.Second).
			ShouldNot(BeNil(), "no kubelet confirms the deletion, so the pod stays Terminating")
		Expect(framework.Cluster.Client.CoreV1().Pods(ns).Delete(ctx, "stuck", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func() *corev1.Pod { return framework.Pod(ctx, ns, "stuck") }).Should(BeNil())
	})
})

// statefulSet builds a StatefulSet with one claim per member, spread over zones.
func statefulSet(name string, replicas int32, fleet bool) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	if fleet {
		labels[celldsim.FleetLabel] = "smoke"
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "celld", Image: "example.invalid/celld:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/work"}}}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
						WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: ptr(localcluster.StorageClassName),
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

func plainPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/plain:1"}}},
	}
}

// fleetPod is a pod the simulator runs celld for, with a bucket so /state has a deployment.
func fleetPod(name string, env []corev1.EnvVar) *corev1.Pod {
	p := plainPod(name)
	p.Labels = map[string]string{celldsim.FleetLabel: "smoke"}
	p.Spec.Containers[0].Name = "celld"
	p.Spec.Containers[0].Env = append([]corev1.EnvVar{{Name: "CELLD_BUCKET", Value: "s3://smoke"}}, env...)
	return p
}

func create(ctx context.Context, ns string, obj any) any {
	GinkgoHelper()
	var err error
	var out any
	c := framework.Cluster.Client
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		out, err = c.AppsV1().StatefulSets(ns).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Pod:
		out, err = c.CoreV1().Pods(ns).Create(ctx, o, metav1.CreateOptions{})
	default:
		Fail(fmt.Sprintf("create: unsupported %T", obj))
	}
	Expect(err).NotTo(HaveOccurred())
	return out
}

func waitReadyReplicas(ctx context.Context, ns, name string, n int32) {
	GinkgoHelper()
	framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
		s, err := framework.Cluster.Client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Status.ReadyReplicas).To(Equal(n))
		g.Expect(s.Status.UpdatedReplicas).To(Equal(n))
	}).Should(Succeed())
}

func setUnschedulable(ctx context.Context, node string, on bool) error {
	patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on))
	_, err := framework.Cluster.Client.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", patch, metav1.PatchOptions{})
	return err
}

// state is the part of the /state document the smoke spec checks.
type state struct {
	Occupied   int64 `json:"occupied"`
	Deployment struct {
		Version    string           `json:"version"`
		Prefix     string           `json:"prefix"`
		Generation int64            `json:"generation"`
		Swapping   int64            `json:"swapping"`
		Cells      map[string]int64 `json:"cells"`
	} `json:"deployment"`
	NodeLoad struct {
		Draining  bool  `json:"draining"`
		SampledMS int64 `json:"sampled_ms"`
	} `json:"node_load"`
	Shutdown struct {
		SchemaVersion     int    `json:"schema_version"`
		RuntimeGeneration string `json:"runtime_generation"`
	} `json:"shutdown"`
}

var hexGeneration = regexp.MustCompile(`^[0-9a-f]{64}$`)

// getState reads http://IP:8081/state the way the operator does: the pod IP, 2 s budget.
func getState(ctx context.Context, ip string) state {
	GinkgoHelper()
	var s state
	framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
		c := &http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(fmt.Sprintf("http://%s:%d/state", ip, celldsim.InternalPort))
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(json.NewDecoder(resp.Body).Decode(&s)).To(Succeed())
		g.Expect(s.Shutdown.RuntimeGeneration).To(MatchRegexp(hexGeneration.String()))
	}).Should(Succeed())
	return s
}

func ptr[T any](v T) *T { return &v }
