package application

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/celld"
)

// fakeMetrics answers PodMetrics lists from a fixed set and counts the lists.
type fakeMetrics struct {
	mu        sync.Mutex
	items     []metricsv1beta1.PodMetrics
	err       error
	calls     int
	selectors []string
}

func (m *fakeMetrics) ListPodMetrics(_ context.Context, _, selector string) ([]metricsv1beta1.PodMetrics, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	m.selectors = append(m.selectors, selector)
	return m.items, m.err
}

func podMetricsOf(name string, at time.Time, cpu, memory string) metricsv1beta1.PodMetrics {
	return metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name}, Timestamp: metav1.NewTime(at),
		Window: metav1.Duration{Duration: 10 * time.Second},
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "celld", Usage: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}
}

// loadReader answers /state with a load view sampled at the time of the call.
type loadReader struct{ pressured map[string]bool }

func (r loadReader) ReadState(_ context.Context, ip string) (celld.Reading, error) {
	now := time.Now()
	rd := reading("v1", now)
	rd.Load = &celld.Load{SampledMS: now.UnixMilli(), MemoryHeadroom: true, Pressured: r.pressured[ip]}
	return rd, nil
}

// sink keeps the observations it is handed.
type sink struct {
	mu  sync.Mutex
	got []*capacity.Observation
}

func (s *sink) observed(_ types.NamespacedName, _ types.UID, obs *capacity.Observation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, obs)
}

func withPolicy(t *testing.T, c client.Client, f *v1.CelldFleet) *v1.CelldFleet {
	t.Helper()
	live := fleetNow(t, c, f)
	live.Spec.Capacity = &v1.CapacityPolicy{Mode: v1.CapacityShadow, SampleIntervalSeconds: 5}
	if err := c.Update(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	return fleetNow(t, c, f)
}

func TestACapacityFleetIsSampledFromStateAndPodMetricsOfTheCurrentContainers(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	sts := statefulSetOf(t, c, f, 2)
	runningPod(t, c, f, "f-0", "10.3.0.1", sts, "StatefulSet")
	runningPod(t, c, f, "f-1", "10.3.0.2", sts, "StatefulSet")
	f = withPolicy(t, c, f)
	metrics := &fakeMetrics{items: []metricsv1beta1.PodMetrics{
		podMetricsOf("f-0", time.Now().Add(-time.Second), "250m", "512Mi"),
		// a window that ended before the container started describes the previous process
		podMetricsOf("f-1", time.Now().Add(-2*time.Minute), "900m", "900Mi"),
	}}
	got := &sink{}
	o := New(c, c, c.Status(), Options{Reader: loadReader{pressured: map[string]bool{"10.3.0.2": true}}, Capacity: got.observed, Metrics: metrics})

	o.ObserveFleet(t.Context(), f)

	if metrics.calls != 1 || metrics.selectors[0] != v1.LabelFleetUID+"="+string(f.UID) {
		t.Fatalf("one collection lists the fleet's PodMetrics once by its UID label, got %d lists %v", metrics.calls, metrics.selectors)
	}
	if len(got.got) != 1 {
		t.Fatalf("one collection gives the policy one observation, got %d", len(got.got))
	}
	obs := got.got[0]
	if !obs.Complete || len(obs.Samples) != 2 {
		t.Fatalf("an unchanged membership gives a complete observation of both members: %+v", obs)
	}
	s0, s1 := obs.Samples[0], obs.Samples[1]
	if s0.Name != "f-0" || !s0.Ready || s0.RuntimeAt.IsZero() || s0.MetricsAt.IsZero() || s0.CPUMillicores != 250 || s0.MemoryMiB != 512 || s0.Window != 10*time.Second {
		t.Errorf("f-0 must carry its /state load view and its PodMetrics: %+v", s0)
	}
	if s1.RuntimeAt.IsZero() || !s1.Pressured {
		t.Errorf("f-1 must carry its /state load view and celld's pressure: %+v", s1)
	}
	if !s1.MetricsAt.IsZero() || s1.CPUMillicores != 0 {
		t.Errorf("PodMetrics whose window ended before the container started must not count: %+v", s1)
	}
	if s0.Identity == s1.Identity || s0.Identity == "" {
		t.Errorf("each member's identity names its process: %q, %q", s0.Identity, s1.Identity)
	}
}

func TestAMembershipChangeMakesTheCapacityObservationIncomplete(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	sts := statefulSetOf(t, c, f, 2)
	runningPod(t, c, f, "f-0", "10.4.0.1", sts, "StatefulSet")
	p1 := runningPod(t, c, f, "f-1", "10.4.0.2", sts, "StatefulSet")
	f = withPolicy(t, c, f)
	notReadyDuring := func(ctx context.Context) {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p1), p); err != nil {
			t.Error(err)
			return
		}
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		if err := c.Status().Update(ctx, p); err != nil {
			t.Error(err)
		}
	}
	got := &sink{}
	reader := &fakeReader{versions: map[string]string{"10.4.0.1": "v1", "10.4.0.2": "v1"},
		during: map[string]func(context.Context){"10.4.0.2": notReadyDuring}}
	o := New(c, c, c.Status(), Options{Reader: reader, Capacity: got.observed, Metrics: &fakeMetrics{}})

	o.ObserveFleet(t.Context(), f)

	if len(got.got) != 1 || got.got[0].Complete {
		t.Fatalf("a member whose readiness changed while it was read makes the observation incomplete: %+v", got.got)
	}
}

func TestAFleetWithoutAPolicyCostsNoMetricsRequest(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	sts := statefulSetOf(t, c, f, 1)
	runningPod(t, c, f, "f-0", "10.5.0.1", sts, "StatefulSet")
	metrics := &fakeMetrics{}
	got := &sink{}
	o := New(c, c, c.Status(), Options{Reader: loadReader{}, Capacity: got.observed, Metrics: metrics})

	o.ObserveFleet(t.Context(), fleetNow(t, c, f))

	if metrics.calls != 0 || len(got.got) != 0 {
		t.Fatalf("a fleet without spec.capacity must cost no Metrics API request and give no observation: %d lists, %d observations",
			metrics.calls, len(got.got))
	}
	ready := fleetNow(t, c, f)
	ready.Status.DesiredReplicas, ready.Status.ReadyReplicas = 1, 1
	ready.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonProvisioned}}
	if o.sampleInterval(ready) != DefaultOptions().Interval {
		t.Fatal("a fleet without spec.capacity whose members are all Ready is observed at the observation interval")
	}
}

// TestAFleetWhoseMembersAreNotAllReadyIsCollectedAtTheDetailsPace: until every member is
// Ready a fleet's verdict cannot be Converged, so it is read once per Pace; a capacity fleet
// keeps the interval, since its policy samples every collection.
func TestAFleetWhoseMembersAreNotAllReadyIsCollectedAtTheDetailsPace(t *testing.T) {
	o := New(nil, nil, nil, Options{Reader: loadReader{}})
	status := func(ready, desired int32, withCondition bool) *v1.CelldFleet {
		f := &v1.CelldFleet{}
		f.Status.ReadyReplicas, f.Status.DesiredReplicas = ready, desired
		if withCondition {
			f.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonProvisioning}}
		}
		return f
	}
	interval, pace := DefaultOptions().Interval, DefaultOptions().Pace
	capacityFleet := status(1, 3, true)
	capacityFleet.Spec.Capacity = &v1.CapacityPolicy{}
	for _, tc := range []struct {
		name string
		f    *v1.CelldFleet
		want time.Duration
	}{
		{"a new fleet, no status yet", status(0, 0, false), pace},
		{"one member of three Ready", status(1, 3, true), pace},
		{"every member Ready", status(3, 3, true), interval},
		{"stopped: none desired", status(0, 0, true), interval},
		{"a capacity fleet with members missing", capacityFleet, interval},
	} {
		if got := o.sampleInterval(tc.f); got != tc.want {
			t.Errorf("%s: collected every %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestAFailingMetricsAPIStillGivesAnObservationWithoutResourceSamples(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	sts := statefulSetOf(t, c, f, 1)
	runningPod(t, c, f, "f-0", "10.6.0.1", sts, "StatefulSet")
	f = withPolicy(t, c, f)
	got := &sink{}
	o := New(c, c, c.Status(), Options{Reader: loadReader{}, Capacity: got.observed,
		Metrics: &fakeMetrics{err: errors.New("the server could not find the requested resource")}})

	o.ObserveFleet(t.Context(), f)

	if len(got.got) != 1 || !got.got[0].Complete || !got.got[0].Samples[0].MetricsAt.IsZero() || got.got[0].Samples[0].RuntimeAt.IsZero() {
		t.Fatalf("without the Metrics API the members have /state but no resource samples, so the decision says IncompleteMetrics: %+v", got.got)
	}
	if o.sampleInterval(f) != DefaultOptions().Interval {
		t.Fatalf("a capacity fleet with sampleIntervalSeconds 5 is still collected every 15 s (seed 000's bound on /state), got %s", o.sampleInterval(f))
	}
}
