package application

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/workload"
)

// The capacity policy's collection rides on the observation: the same opening inventory, the
// same /state readings (8 workers, 2 s per call, 1 MiB bodies, 10 s per collection) and the same
// closing inventory that re-checks every member's identity, IP and readiness. A fleet with
// spec.capacity adds one Metrics API list per collection and is observed at least every
// sampleIntervalSeconds; a fleet without it costs nothing more.

// PodMetricsLister lists the Metrics API's PodMetrics of the Pods of one namespace that match a
// label selector.
type PodMetricsLister interface {
	ListPodMetrics(ctx context.Context, namespace, selector string) ([]metricsv1beta1.PodMetrics, error)
}

// CapacitySink receives each capacity observation of a fleet with spec.capacity.
type CapacitySink func(fleet types.NamespacedName, uid types.UID, obs *capacity.Observation)

// MetricsAPI lists PodMetrics with the typed metrics.k8s.io client, whose fixed paths need no
// discovery: a cluster that does not serve the API answers 404 to the one request.
type MetricsAPI struct{ Client metricsclient.Interface }

// ListPodMetrics implements PodMetricsLister.
func (m MetricsAPI) ListPodMetrics(ctx context.Context, namespace, selector string) ([]metricsv1beta1.PodMetrics, error) {
	list, err := m.Client.MetricsV1beta1().PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// sampleInterval is how often a fleet is collected: the observation interval (15 s), which is
// also the least time between two reads of a fleet's /state (seed 000). A capacity policy
// samples on those collections: a sampleIntervalSeconds shorter than the interval takes a
// sample at every collection, so its samples come every interval, not faster (docs/capacity.md).
//
// A fleet without a capacity policy whose members are not all Ready by its own status (the
// reconciler's readyReplicas below desiredReplicas, or no Ready condition yet: a new fleet) is
// collected once per Options.Pace (1 min) instead. Until every member is Ready its verdict
// cannot be Converged, only which Unknown reason, and the counts a collection refreshes are
// written at most once per Pace anyway: reading more often would only load members that are
// starting (a new fleet's, a rollout's). Once the fleet's status says every member is Ready,
// the interval applies again, so the collection that can find it Converged comes at the next
// scan.
func (o *Observer) sampleInterval(f *v1.CelldFleet) time.Duration {
	if f.Spec.Capacity == nil && !membersReady(f) {
		return max(o.opts.Interval, o.opts.Pace)
	}
	return o.opts.Interval
}

// membersReady says whether the fleet's status reports every desired member Ready.
func membersReady(f *v1.CelldFleet) bool {
	return meta.FindStatusCondition(f.Status.Conditions, v1.ConditionReady) != nil &&
		f.Status.ReadyReplicas >= f.Status.DesiredReplicas
}

// podMetrics is the answer of one Metrics API list.
type podMetrics struct {
	byName map[string]*metricsv1beta1.PodMetrics
	err    error
}

// listPodMetrics starts the Metrics API read of a fleet with a capacity policy, alongside the
// /state readings; nil when the fleet has none.
func (o *Observer) listPodMetrics(ctx context.Context, f *v1.CelldFleet) <-chan podMetrics {
	if o.opts.Capacity == nil || f.Spec.Capacity == nil {
		return nil
	}
	out := make(chan podMetrics, 1)
	if o.opts.Metrics == nil {
		out <- podMetrics{err: fmt.Errorf("the operator has no Metrics API client")}
		return out
	}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, o.opts.Deadline)
		defer cancel()
		items, err := o.opts.Metrics.ListPodMetrics(ctx, f.Namespace, v1.LabelFleetUID+"="+string(f.UID))
		pm := podMetrics{byName: make(map[string]*metricsv1beta1.PodMetrics, len(items)), err: err}
		for i := range items {
			pm.byName[items[i].Name] = &items[i]
		}
		out <- pm
	}()
	return out
}

// capacityObservation builds the policy's observation from one collection: the opening
// inventory's members with their /state readings (read, in the same order) and PodMetrics.
// It is complete only when the membership was observable and did not change until the closing
// inventory.
func capacityObservation(at time.Time, opening inventory, read []Member, pm podMetrics, complete bool) *capacity.Observation {
	obs := &capacity.Observation{At: at, Complete: complete && opening.verdict == ""}
	if opening.verdict != "" {
		return obs
	}
	obs.Samples = make([]capacity.Sample, len(opening.members))
	for i, m := range opening.members {
		obs.Samples[i] = capacitySample(m, read[i], pm.byName[m.name])
	}
	return obs
}

// capacitySample is one member's sample. The /state load view counts only from an answer to a
// request sent after the container started, and the PodMetrics only when their window ended
// after it started: either could otherwise describe the previous incarnation.
func capacitySample(m member, got Member, pm *metricsv1beta1.PodMetrics) capacity.Sample {
	s := capacity.Sample{Name: m.name, Identity: m.identity, Ready: m.ready && !m.deleting,
		CPURequestMillicores: m.cpuRequest, MemoryRequestMiB: m.memoryRequest}
	if s.Identity == "" {
		s.Identity = m.uid + "/not-running" // a Pod without a running celld is still a member
	}
	if l := got.Reading.Load; got.Read && got.Err == nil && l != nil && !m.started.IsZero() && !got.Reading.Sent.Before(m.started) {
		s.RuntimeAt = time.UnixMilli(l.SampledMS)
		s.Pressured = l.Pressured || !l.MemoryHeadroom
		s.Backlog = l.Draining || l.RebalancePaused || l.CapacityWaiting > 0 || l.ActivationWaiting > 0 || l.Restoring > 0
	}
	if pm == nil || m.started.IsZero() || pm.Window.Duration <= 0 || !pm.Timestamp.After(m.started) {
		return s
	}
	for _, c := range pm.Containers {
		if c.Name == workload.ContainerName {
			s.MetricsAt, s.Window = pm.Timestamp.Time, pm.Window.Duration
			s.CPUMillicores = c.Usage.Cpu().MilliValue()
			s.MemoryMiB = c.Usage.Memory().Value() / (1 << 20)
		}
	}
	return s
}

// requests are the celld container's CPU (millicores) and memory (MiB) requests.
func requests(p *corev1.Pod) (cpu, memory int64) {
	for _, c := range p.Spec.Containers {
		if c.Name == workload.ContainerName {
			return c.Resources.Requests.Cpu().MilliValue(), c.Resources.Requests.Memory().Value() / (1 << 20)
		}
	}
	return 0, 0
}
