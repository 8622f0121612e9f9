package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/tests/celldsim"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// The capacity policy on the local cluster, fed by the real Metrics API (metrics-server
// scraping kwok's emulated kubelets) and the simulator's /state. Time is shortened with the
// policy's own fields: samples every 12 s (above metrics-server's 10 s resolution, so every
// counted sample is a new scrape), two samples per window.

// fastPolicy is a policy whose windows and cooldowns take seconds.
func fastPolicy(mode v1.CapacityMode, maxReplicas int32) *v1.CapacityPolicy {
	return &v1.CapacityPolicy{Mode: mode, MinReplicas: 3, MaxReplicas: maxReplicas, ScaleOutStep: 1,
		SampleIntervalSeconds: 12, MaxAgeSeconds: 40, MinWindowSeconds: 5, MaxWindowSeconds: 60, MinSamples: 2,
		ScaleOutStabilizationSeconds: 10, ScaleInStabilizationSeconds: 60, ScaleOutCooldownSeconds: 30,
		ScaleInCooldownSeconds: 60, ProvisioningTimeoutSeconds: 60, RedistributionObservationSeconds: 30,
		CPUHighMillicores: 200, CPULowMillicores: 80, MemoryHighMiB: 768, MemoryLowMiB: 384}
}

// capacityWait bounds a policy step: a window (two samples 12 s apart), the scrape that shows
// the load, and the new member becoming Ready, with room for a loaded machine.
const capacityWait = 3 * time.Minute

// loadDriver keeps the load of every member of a fleet at what the spec asks, new members
// included, as a fleet whose cells move would: it polls the fleet's Pods and writes the usage
// annotations of those whose load differs.
type loadDriver struct {
	mu sync.Mutex
	// load gives a member's load; nil leaves the member at the simulator's default.
	load func(pod string) (cpu, memory string, ok bool)
	set  map[types.UID]string
}

func driveLoad(ctx context.Context, ns string, f *v1.CelldFleet) *loadDriver {
	d := &loadDriver{set: map[types.UID]string{}}
	ctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			d.apply(ctx, ns, f)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return d
}

// to sets the load function.
func (d *loadDriver) to(load func(pod string) (cpu, memory string, ok bool)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.load = load
}

// everyone puts every member at one load.
func (d *loadDriver) everyone(cpu, memory string) {
	d.to(func(string) (string, string, bool) { return cpu, memory, true })
}

func (d *loadDriver) apply(ctx context.Context, ns string, f *v1.CelldFleet) {
	d.mu.Lock()
	load := d.load
	d.mu.Unlock()
	if load == nil {
		return
	}
	list := &corev1.PodList{}
	if kube().List(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1.LabelFleetUID: string(f.UID)}) != nil {
		return
	}
	for i := range list.Items {
		p := &list.Items[i]
		cpu, memory, ok := load(p.Name)
		if !ok || p.DeletionTimestamp != nil || d.set[p.UID] == cpu+"/"+memory {
			continue
		}
		if framework.Cluster.Faults.SetLoad(ctx, ns, p.Name, resource.MustParse(cpu), resource.MustParse(memory)) == nil {
			d.set[p.UID] = cpu + "/" + memory
		}
	}
}

func capacityStatus(ctx context.Context, ns, name string) v1.CapacityStatus {
	if c := getFleet(ctx, ns, name).Status.Capacity; c != nil {
		return *c
	}
	return v1.CapacityStatus{}
}

// capacityHistory is the capacity history on the fleet's reservation; ok is false without one.
func capacityHistory(ctx context.Context, f *v1.CelldFleet) (h capacity.History, ok bool) {
	GinkgoHelper()
	live := getFleet(ctx, f.Namespace, f.Name)
	res := &v1.CelldStorageReservation{}
	Expect(kube().Get(ctx, types.NamespacedName{Name: live.Status.Reservation}, res)).To(Succeed())
	value, ok := res.Annotations[v1.AnnotationCurrentOperation]
	if !ok {
		return h, false
	}
	Expect(json.Unmarshal(reservation.CapacityState(value, live.UID), &h)).To(Succeed(), "the record %s", value)
	return h, true
}

// recordedAddition waits for the reservation to record the policy addition that reached to
// members. The record follows the workload write in the same pass, so a test that has just seen
// the new replica count may still read the previous record.
func recordedAddition(ctx context.Context, f *v1.CelldFleet, to int32) capacity.History {
	GinkgoHelper()
	var h capacity.History
	framework.EventuallyWithin(ctx, time.Minute, func(g Gomega) {
		var ok bool
		h, ok = capacityHistory(ctx, f)
		g.Expect(ok).To(BeTrue(), "the step is recorded on the reservation")
		g.Expect(h.Baseline).NotTo(BeNil(), "a policy addition keeps its baseline: %+v", h)
		g.Expect(h.Baseline.To).To(Equal(to), "the record of the addition to %d: %+v", to, h)
	}).Should(Succeed())
	return h
}

// workloadWrites are the operator's writes of StatefulSets and Deployments in ns since a time.
func workloadWrites(ns string, since time.Time) []writeRecord {
	var out []writeRecord
	for _, w := range operatorWrites(ns, since) {
		if strings.Contains(w.Path, "/statefulsets/") || strings.Contains(w.Path, "/deployments/") {
			out = append(out, w)
		}
	}
	return out
}

// metricsDiagnosis describes what the Metrics API and the Pods show, for a failure message.
func metricsDiagnosis(ctx context.Context, ns string) string {
	var b strings.Builder
	mc, err := metricsclient.NewForConfig(framework.Cluster.Config)
	if err != nil {
		return err.Error()
	}
	list, err := mc.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "PodMetrics: " + err.Error()
	}
	for _, pm := range list.Items {
		fmt.Fprintf(&b, "PodMetrics %s at %s window %s containers %+v\n", pm.Name, pm.Timestamp.UTC().Format(time.RFC3339Nano), pm.Window.Duration, pm.Containers)
	}
	pods := &corev1.PodList{}
	if err := kube().List(ctx, pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					fmt.Fprintf(&b, "Pod %s container %s started %s\n", p.Name, cs.Name, cs.State.Running.StartedAt.UTC().Format(time.RFC3339Nano))
				}
			}
		}
	}
	return b.String()
}

// hpaDiagnosis describes the HorizontalPodAutoscalers of ns, for a failure message.
func hpaDiagnosis(ctx context.Context, ns string) string {
	list := &autoscalingv2.HorizontalPodAutoscalerList{}
	if err := kube().List(ctx, list, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, h := range list.Items {
		fmt.Fprintf(&b, "HPA %s: current %d desired %d metrics %+v\n", h.Name, h.Status.CurrentReplicas, h.Status.DesiredReplicas, h.Status.CurrentMetrics)
		for _, c := range h.Status.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return b.String() + metricsDiagnosis(ctx, ns)
}

func createPolicyFleet(ctx context.Context, ns, name string, p *v1.CapacityPolicy) *v1.CelldFleet {
	GinkgoHelper()
	f := persistentFleet(ns, name, 3)
	f.Spec.Capacity = p
	Expect(kube().Create(ctx, f)).To(Succeed())
	traceCapacity(ctx, ns, name)
	waitFleetReady(ctx, ns, name, 3)
	return getFleet(ctx, ns, name)
}

var _ = Describe("Capacity policy", func() {
	It("in Shadow recommends an addition under load and changes nothing", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "cap-shadow")
		f := createPolicyFleet(ctx, ns, "shadow", fastPolicy(v1.CapacityShadow, 5))
		since := time.Now()
		driveLoad(ctx, ns, f).everyone("400m", "300Mi")

		framework.EventuallyWithin(ctx, capacityWait, func(g Gomega) {
			c := capacityStatus(ctx, ns, f.Name)
			g.Expect(c.Reason).To(Equal(capacity.ReasonScaleOutRecommended), c.Message)
			g.Expect(c.DesiredReplicas).To(Equal(int32(4)), c.Message)
			g.Expect(c.CoveredReplicas).To(Equal(int32(3)), "every member sampled from the Metrics API and /state")
		}).Should(Succeed(), func() string { return metricsDiagnosis(ctx, ns) })
		Expect(workloadWrites(ns, since)).To(BeEmpty(), "Shadow never writes the workload")
		Expect(*statefulSetOf(ctx, ns, f.Name).Spec.Replicas).To(Equal(int32(3)))
		Expect(eventReasons(ctx, ns)).NotTo(ContainElement(v1.EventCapacityScaledOut))
		_, recorded := capacityHistory(ctx, f)
		Expect(recorded).To(BeFalse(), "no step was taken, so nothing is recorded")
	})

	It("in ScaleOut adds a member per window, waits out the cooldown and stops at maxReplicas", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "cap-out")
		f := createPolicyFleet(ctx, ns, "grow", fastPolicy(v1.CapacityScaleOut, 5))
		generation := f.Generation
		load := driveLoad(ctx, ns, f)
		load.everyone("400m", "300Mi") // newcomers take load too: the additions help

		framework.EventuallyWithin(ctx, capacityWait, func() int32 { return *statefulSetOf(ctx, ns, f.Name).Spec.Replicas }).
			Should(Equal(int32(4)), func() string { return "the first addition\n" + metricsDiagnosis(ctx, ns) })
		expectEvent(ctx, ns, v1.EventCapacityScaledOut)
		first := recordedAddition(ctx, f, 4)
		Expect(first.Baseline.From).To(Equal(int32(3)), "the addition grew from 3 to 4")

		framework.EventuallyWithin(ctx, 2*capacityWait, func() int32 { return *statefulSetOf(ctx, ns, f.Name).Spec.Replicas }).
			Should(Equal(int32(5)), func() string {
				return "the second addition, after the redistribution window and the cooldown\n" + metricsDiagnosis(ctx, ns)
			})
		second := recordedAddition(ctx, f, 5)
		Expect(second.LastScaleOut.Sub(first.LastScaleOut)).To(BeNumerically(">=", 30*time.Second),
			"scaleOutCooldownSeconds 30 separates the two additions")
		waitFleetReady(ctx, ns, f.Name, 5)

		framework.EventuallyWithin(ctx, capacityWait, func() string { return capacityStatus(ctx, ns, f.Name).Reason }).
			Should(Equal(capacity.ReasonAtMaximum))
		Expect(*statefulSetOf(ctx, ns, f.Name).Spec.Replicas).To(Equal(int32(5)), "never above maxReplicas")
		live := getFleet(ctx, ns, f.Name)
		Expect(live.Generation).To(Equal(generation), "the operator never writes spec.replicas")
		Expect(*live.Spec.Replicas).To(Equal(int32(3)))
		Expect(live.Status.DesiredReplicas).To(Equal(int32(5)))
	})

	It("in Automatic removes one member after the low window, stops at minReplicas, and heals a lost disk while it holds the fleet below spec.replicas", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "cap-in")
		f := persistentFleet(ns, "shrink", 4)
		f.Spec.Capacity = fastPolicy(v1.CapacityAutomatic, 5)
		Expect(kube().Create(ctx, f)).To(Succeed())
		traceCapacity(ctx, ns, f.Name)
		waitFleetReady(ctx, ns, f.Name, 4)
		f = getFleet(ctx, ns, f.Name)
		claims := claimUIDs(ctx, ns)
		driveLoad(ctx, ns, f).everyone("20m", "100Mi")
		downs := monitorDown(ctx, ns, f, 3, 0) // the three that stay never go down

		framework.EventuallyWithin(ctx, 2*capacityWait, func() int32 { return *statefulSetOf(ctx, ns, f.Name).Spec.Replicas }).
			Should(Equal(int32(3)), "one member removed after scaleInStabilizationSeconds")
		expectEvent(ctx, ns, v1.EventCapacityScaledIn)
		framework.EventuallyWithin(ctx, capacityWait, func() string { return capacityStatus(ctx, ns, f.Name).Reason }).
			Should(Equal(capacity.ReasonAtMinimum))
		Expect(*statefulSetOf(ctx, ns, f.Name).Spec.Replicas).To(Equal(int32(3)), "never below minReplicas")
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "the removed member keeps its disk")
		expectNoOperatorDeletes(ns, "an Automatic contraction")
		downs.Check("an Automatic contraction")

		// The healing plan and its confirmation once planned at different counts here (the
		// policy's 3 and spec.replicas' 4), disagreed, and a lost disk stayed Lost for good.
		By("held below spec.replicas by the policy (3 of 4), the fleet still heals a lost disk")
		Expect(*getFleet(ctx, ns, f.Name).Spec.Replicas).To(Equal(int32(4)))
		heal := monitorDown(ctx, ns, f, 3, 1)
		lost := "data-" + f.Name + "-1"
		Expect(framework.Cluster.Faults.LoseVolume(ctx, ns, lost)).To(Succeed())
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			uid, ok := claimUIDs(ctx, ns)[lost]
			g.Expect(ok).To(BeTrue(), "the member's fresh claim")
			g.Expect(uid).NotTo(Equal(claims[lost]), "the member must return on a fresh disk")
		}).Should(Succeed())
		expectEvent(ctx, ns, v1.EventMemberDiskLost)
		expectOnlyClaimDeletes(ns, lost)
		framework.EventuallyWithin(ctx, framework.Medium, func() int32 { return statefulSetOf(ctx, ns, f.Name).Status.ReadyReplicas }).
			Should(Equal(int32(3)))
		Expect(*statefulSetOf(ctx, ns, f.Name).Spec.Replicas).To(Equal(int32(3)), "the policy still holds the fleet at 3")
		heal.Check("a lost disk healed while the capacity policy holds the fleet below spec.replicas")
	})

	// The survivors' room is capped by their CPU request (90m here): with every member at 75m,
	// below cpuLowMillicores, the policy wants one member less, but each of the three that stay
	// would carry 100m, above its request. Once the load drops the evidence holds.
	It("in Automatic holds its own scale-in without survivor evidence, and removes the member once the evidence arrives", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "cap-hold")
		f := persistentFleet(ns, "hold", 4)
		f.Spec.Capacity = fastPolicy(v1.CapacityAutomatic, 5)
		f.Spec.Execution = &v1.ExecutionSpec{CPURequest: new(resource.MustParse("90m"))}
		Expect(kube().Create(ctx, f)).To(Succeed())
		traceCapacity(ctx, ns, f.Name)
		waitFleetReady(ctx, ns, f.Name, 4)
		f = getFleet(ctx, ns, f.Name)
		load := driveLoad(ctx, ns, f)
		load.everyone("75m", "100Mi")
		nobodyDown := monitorDown(ctx, ns, f, 4, 0)

		By("the policy wants one member less, and the removal waits for the evidence")
		framework.EventuallyWithin(ctx, 2*capacityWait, func() string { return condition(ctx, ns, f.Name, v1.ConditionReady) }).
			Should(Equal("True/"+v1.ReasonCapacityUncertain), "the fleet runs; only the removal waits")
		Expect(conditionMessage(getFleet(ctx, ns, f.Name), v1.ConditionReady)).To(ContainSubstring("above its request of 90m"))
		Expect(*statefulSetOf(ctx, ns, f.Name).Spec.Replicas).To(Equal(int32(4)), "no member leaves without the evidence")
		nobodyDown.Check("an Automatic scale-in held for evidence")

		By("the load drops: the survivors can take the member's share, and it goes")
		load.everyone("20m", "100Mi")
		framework.EventuallyWithin(ctx, capacityWait, func() int32 { return *statefulSetOf(ctx, ns, f.Name).Spec.Replicas }).
			Should(Equal(int32(3)))
		expectEvent(ctx, ns, v1.EventCapacityScaledIn)
		expectNoOperatorDeletes(ns, "an Automatic contraction held for evidence")
	})

	It("in External lets an HPA scale out through /scale and holds its scale-in without survivor evidence", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "cap-ext")
		f := createPolicyFleet(ctx, ns, "hpa", fastPolicy(v1.CapacityExternal, 5))
		load := driveLoad(ctx, ns, f)
		load.everyone("400m", "300Mi")
		zero := int32(0)
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hpa"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: v1.GroupVersion.String(), Kind: "CelldFleet", Name: f.Name},
				MinReplicas:    new(int32(3)), MaxReplicas: 4,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: new(resource.MustParse("200m"))}}}},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero},
					ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero}},
			},
		}
		Expect(kube().Create(ctx, hpa)).To(Succeed())

		framework.EventuallyWithin(ctx, capacityWait, func() int32 { return *getFleet(ctx, ns, f.Name).Spec.Replicas }).
			Should(Equal(int32(4)), func() string {
				return "the HPA, reading the Metrics API, writes spec.replicas through /scale\n" + hpaDiagnosis(ctx, ns)
			})
		waitFleetReady(ctx, ns, f.Name, 4)
		Expect(capacityStatus(ctx, ns, f.Name).Reason).To(Equal(capacity.ReasonExternalOwner))

		By("making a survivor's /state unreadable, then dropping the load so the HPA scales in")
		victimless := f.Name + "-0"
		Expect(framework.Cluster.Faults.SetKnob(ctx, ns, victimless, celldsim.KnobStateMode, "malformed")).To(Succeed())
		load.everyone("20m", "100Mi")
		framework.EventuallyWithin(ctx, capacityWait, func() int32 { return *getFleet(ctx, ns, f.Name).Spec.Replicas }).
			Should(Equal(int32(3)), func() string { return "the HPA asks for one member less\n" + hpaDiagnosis(ctx, ns) })
		framework.EventuallyWithin(ctx, capacityWait, func() string { return condition(ctx, ns, f.Name, v1.ConditionReady) }).
			Should(Equal("True/"+v1.ReasonCapacityUncertain), "the fleet runs; only the removal waits")
		Expect(*statefulSetOf(ctx, ns, f.Name).Spec.Replicas).To(Equal(int32(4)), "no member leaves without the evidence")

		By("restoring the survivor's /state: the evidence arrives and the member goes")
		Expect(framework.Cluster.Faults.SetKnob(ctx, ns, victimless, celldsim.KnobStateMode, "normal")).To(Succeed())
		framework.EventuallyWithin(ctx, capacityWait, func() int32 { return *statefulSetOf(ctx, ns, f.Name).Spec.Replicas }).
			Should(Equal(int32(3)))
		expectNoOperatorDeletes(ns, "an External contraction")
	})

	It("holds further additions with LoadNotRedistributed when two additions move no load", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "cap-stuck")
		f := createPolicyFleet(ctx, ns, "stuck", fastPolicy(v1.CapacityScaleOut, 8))
		incumbents := map[string]bool{f.Name + "-0": true, f.Name + "-1": true, f.Name + "-2": true}
		driveLoad(ctx, ns, f).to(func(pod string) (string, string, bool) {
			if incumbents[pod] {
				return "400m", "300Mi", true
			}
			return "5m", "50Mi", true // newcomers get nothing: the hot cells do not move
		})
		framework.EventuallyWithin(ctx, 4*capacityWait, func() string { return capacityStatus(ctx, ns, f.Name).Reason }).
			Should(Equal(capacity.ReasonLoadNotRedistributed))
		// two judged additions hold the third; an addition whose incumbents restarted meanwhile
		// is not judged (docs/capacity.md), so a loaded machine may see one more before the hold
		n := *statefulSetOf(ctx, ns, f.Name).Spec.Replicas
		AddReportEntry("additions before the hold", n-3)
		Expect(n).To(BeNumerically(">=", 5), "at least two additions before the hold")
		h, _ := capacityHistory(ctx, f)
		Expect(h.FailedBatches).To(BeNumerically(">=", 1), "the additions were judged as not moving load: %+v", h)
		expectEvent(ctx, ns, v1.EventLoadNotRedistributed)
	})

	It("reports IncompleteMetrics for a member whose /state cannot be read and never acts", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "cap-nometrics")
		f := createPolicyFleet(ctx, ns, "blind", fastPolicy(v1.CapacityAutomatic, 5))
		since := time.Now()
		Expect(framework.Cluster.Faults.SetKnob(ctx, ns, f.Name+"-1", celldsim.KnobStateMode, "malformed")).To(Succeed())
		framework.EventuallyWithin(ctx, capacityWait, func(g Gomega) {
			c := capacityStatus(ctx, ns, f.Name)
			g.Expect(c.Reason).To(Equal(capacity.ReasonIncompleteMetrics))
			g.Expect(c.Message).To(ContainSubstring(f.Name+"-1"), "the message names the member")
		}).Should(Succeed())
		Expect(workloadWrites(ns, since)).To(BeEmpty())
		waitFleetReady(ctx, ns, f.Name, 3)
	})
})

// capacityTrail is how a fleet's capacity decision went: status.capacity read every second
// until the spec ends, one line per change of reason, desired or covered members, or message.
type capacityTrail struct {
	mu    sync.Mutex
	lines []string
}

// traceCapacity starts the trail of fleet ns/name; it is reported when the spec fails, or in a
// verbose run.
func traceCapacity(ctx context.Context, ns, name string) {
	tr := &capacityTrail{}
	ctx, cancel := context.WithCancel(ctx)
	DeferCleanup(func() {
		cancel()
		AddReportEntry("capacity decisions of "+name, tr.String(), ReportEntryVisibilityFailureOrVerbose)
	})
	go func() {
		defer GinkgoRecover()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := ""
		for {
			f := &v1.CelldFleet{}
			if kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, f) == nil && f.Status.Capacity != nil {
				c := f.Status.Capacity
				line := fmt.Sprintf("%s desired %d covered %d: %s", c.Reason, c.DesiredReplicas, c.CoveredReplicas, c.Message)
				if line != last {
					last = line
					tr.mu.Lock()
					tr.lines = append(tr.lines, time.Now().UTC().Format("15:04:05.0")+" "+line)
					tr.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// String is the trail so far, one decision per line.
func (tr *capacityTrail) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return "capacity decisions:\n" + strings.Join(tr.lines, "\n")
}
