package fleet

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
)

func TestCountersOnly(t *testing.T) {
	base := v1.CelldFleetStatus{ObservedGeneration: 2, AppliedReplicas: 5, DesiredReplicas: 5, ReadyReplicas: 4, Replicas: 5, JoiningReplicas: 1,
		Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonProvisioning, Message: "Rolling out: 1 of 5 members updated"}}}
	cases := []struct {
		name string
		edit func(*v1.CelldFleetStatus)
		want bool
	}{
		{"a member became ready", func(s *v1.CelldFleetStatus) { s.ReadyReplicas, s.JoiningReplicas = 5, 0 }, true},
		{"a member is terminating", func(s *v1.CelldFleetStatus) { s.TerminatingReplicas, s.ObservedReplicas = 1, 4 }, true},
		{"the progress message moved", func(s *v1.CelldFleetStatus) { s.Conditions[0].Message = "Rolling out: 2 of 5 members updated" }, true},
		{"the condition turned", func(s *v1.CelldFleetStatus) { s.Conditions[0].Status = metav1.ConditionTrue }, false},
		{"the reason changed", func(s *v1.CelldFleetStatus) { s.Conditions[0].Reason = v1.ReasonProvisioned }, false},
		{"a condition appeared", func(s *v1.CelldFleetStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: v1.ConditionBlocked, Status: metav1.ConditionTrue, Reason: v1.ReasonMemberUnschedulable})
		}, false},
		{"the applied count changed", func(s *v1.CelldFleetStatus) { s.AppliedReplicas = 4 }, false},
		{"a new generation", func(s *v1.CelldFleetStatus) { s.ObservedGeneration = 3 }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := *base.DeepCopy()
			c.edit(&want)
			if got := countersOnly(base, want); got != c.want {
				t.Fatalf("countersOnly = %v, want %v", got, c.want)
			}
			if len(base.Conditions) != 1 || base.Conditions[0].Message == "" {
				t.Fatal("countersOnly changed its input")
			}
		})
	}
}

func TestStatusPacer(t *testing.T) {
	m := NewMemory()
	key := types.NamespacedName{Namespace: "ns", Name: "f"}
	const uid = types.UID("u1")
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if d := m.statusWait(key, uid, t0); d != 0 {
		t.Fatalf("a fleet never written waits %v", d)
	}
	m.statusWritten(key, uid, t0, "7", v1.CelldFleetStatus{})
	if d := m.statusWait(key, uid, t0.Add(300*time.Millisecond)); d != statusPace-300*time.Millisecond {
		t.Fatalf("300 ms after a write: wait %v", d)
	}
	if d := m.statusWait(key, uid, t0.Add(statusPace)); d != 0 {
		t.Fatalf("a pace after a write: wait %v", d)
	}
	if d := m.statusWait(types.NamespacedName{Namespace: "ns", Name: "other"}, uid, t0); d != 0 {
		t.Fatalf("another fleet waits %v", d)
	}
	if d := m.statusWait(key, "u2", t0); d != 0 {
		t.Fatalf("a fleet re-created under the same name waits %v for its predecessor's write", d)
	}
	if d := (&Memory{}).statusWait(key, uid, t0); d != 0 {
		t.Fatalf("a memory without a pace waits %v", d)
	}
	m.Forget(key)
	if d := m.statusWait(key, uid, t0); d != 0 {
		t.Fatalf("a forgotten fleet waits %v", d)
	}
	var none *Memory
	none.statusWritten(key, uid, t0, "7", v1.CelldFleetStatus{})
	if none.statusInFlight(key, uid, "7", v1.CelldFleetStatus{}) {
		t.Fatal("a nil memory remembers a write")
	}
	none.Forget(key)
	none.dropCapacity(key)
	if d := none.statusWait(key, uid, t0); d != 0 {
		t.Fatalf("a nil memory waits %v", d)
	}
}

// TestMemoryKeepsOneEntryPerFleet: a fleet's capacity observation, trend and last status write
// live in one entry of its UID; a policy removed drops the capacity part only, a new UID under
// the same name starts afresh, and Forget drops everything.
func TestMemoryKeepsOneEntryPerFleet(t *testing.T) {
	m := &Memory{}
	key := types.NamespacedName{Namespace: "ns", Name: "f"}
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	obs := &capacity.Observation{At: t0, Complete: true}
	policy := v1.CapacityPolicy{Mode: v1.CapacityAutomatic, MinReplicas: 3, MaxReplicas: 5, ScaleOutStep: 1, SampleIntervalSeconds: 5, MaxAgeSeconds: 20, MinSamples: 2}
	trend := capacity.Decide(capacity.Input{Policy: policy, Now: t0, Declared: 3, Applied: 3, Observation: obs}).Trend
	if reflect.DeepEqual(trend, capacity.Trend{}) {
		t.Fatal("the decision returned an empty trend: the test would not tell a kept trend from none")
	}
	m.Observed(key, "u1", obs) // no wake channel: the sink must not block
	m.keepTrend(key, "u1", trend)
	m.statusWritten(key, "u1", t0, "7", v1.CelldFleetStatus{ReadyReplicas: 3})
	if o, tr := m.capacity(key, "u1"); o != obs || !reflect.DeepEqual(tr, trend) {
		t.Fatalf("capacity = %v, %v; want what was kept", o, tr)
	}
	if o, tr := m.capacity(key, "u2"); o != nil || !reflect.DeepEqual(tr, capacity.Trend{}) {
		t.Fatalf("another UID under the name reads %v, %v", o, tr)
	}
	m.dropCapacity(key)
	if o, tr := m.capacity(key, "u1"); o != nil || !reflect.DeepEqual(tr, capacity.Trend{}) {
		t.Fatalf("after the policy went: %v, %v", o, tr)
	}
	if !m.statusInFlight(key, "u1", "7", v1.CelldFleetStatus{ReadyReplicas: 3}) {
		t.Fatal("dropping the capacity memory dropped the status write")
	}
	m.Observed(key, "u2", obs) // the fleet was re-created
	if m.statusInFlight(key, "u2", "7", v1.CelldFleetStatus{ReadyReplicas: 3}) || m.statusInFlight(key, "u1", "7", v1.CelldFleetStatus{ReadyReplicas: 3}) {
		t.Fatal("a re-created fleet kept its predecessor's status write")
	}
	m.Forget(key)
	if o, _ := m.capacity(key, "u2"); o != nil || len(m.fleets) != 0 {
		t.Fatalf("Forget left %d entries", len(m.fleets))
	}
}

func TestStatusInFlight(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "f"}
	const uid = types.UID("u1")
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	ready := v1.CelldFleetStatus{ReadyReplicas: 3, Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Provisioned"}}}
	joining := v1.CelldFleetStatus{JoiningReplicas: 1, Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Provisioning"}}}
	for _, tc := range []struct {
		name   string
		write  bool // the memory saw a write of ready computed from resourceVersion 7
		liveRV string
		want   v1.CelldFleetStatus
		skip   bool
	}{
		{name: "no write remembered", liveRV: "7", want: ready},
		{name: "the same status on the same read: the cache lags", write: true, liveRV: "7", want: ready, skip: true},
		{name: "the same status on a newer read: judged against live", write: true, liveRV: "9", want: ready},
		{name: "another status on the same read", write: true, liveRV: "7", want: joining},
		{name: "a read without a version", write: true, liveRV: "", want: ready},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Memory{}
			if tc.write {
				m.statusWritten(key, uid, t0, "7", ready)
			}
			if got := m.statusInFlight(key, uid, tc.liveRV, tc.want); got != tc.skip {
				t.Fatalf("statusInFlight = %v, want %v", got, tc.skip)
			}
		})
	}
	m := &Memory{}
	written := *ready.DeepCopy()
	m.statusWritten(key, uid, t0, "7", written)
	written.Conditions[0].Reason = "Changed"
	if !m.statusInFlight(key, uid, "7", ready) {
		t.Fatal("the memory kept the caller's status, not a copy")
	}
	m.Forget(key)
	if m.statusInFlight(key, uid, "7", ready) {
		t.Fatal("a forgotten fleet's write is still in flight")
	}
}

// TestStatusWritesAreCountedByKind: against a real API server, a fleet's first status is a
// change; a member that appears long after the last write moves only counters and is written at
// once (counters); a second one that appears within a second of that write is put off (paced)
// and written by a pass a second later (counters).
func TestStatusWritesAreCountedByKind(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	r.metrics, r.Memory = newMetrics(prometheus.NewRegistry()), NewMemory()
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	r.Now = func() time.Time { return now }
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "counted", ns+"-counted", nil)
	count := func() (change, counters, paced float64) {
		return testutil.ToFloat64(r.metrics.statusWrites.WithLabelValues("change")),
			testutil.ToFloat64(r.metrics.statusWrites.WithLabelValues("counters")), testutil.ToFloat64(r.metrics.statusPaced)
	}
	live := &v1.CelldFleet{}
	settled := func() string {
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), live); err != nil {
			t.Fatal(err)
		}
		return live.ResourceVersion
	}
	// The first passes (finalizer, reservation, children, workload, status), a pace apart, until
	// a pass writes nothing.
	for pass, rv := 0, ""; ; pass++ {
		if pass == 8 {
			t.Fatal("the fleet's status never settled")
		}
		reconcileOnce(t, r, f)
		now = now.Add(2 * statusPace)
		if next := settled(); next == rv {
			break
		} else {
			rv = next
		}
	}
	change, counters, paced := count()
	if change < 1 {
		t.Fatalf("the first status must be counted as a change: change %v, counters %v, paced %v", change, counters, paced)
	}
	member := func(i int) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("counted-%d", i), Labels: map[string]string{v1.LabelFleetUID: string(live.UID)}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "celld", Image: "celld"}}}}
		if err := admin.Create(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(when string, dc, dn, dp float64, joining int32) {
		t.Helper()
		if c, n, p := count(); c != change+dc || n != counters+dn || p != paced+dp {
			t.Fatalf("%s: change +%v, counters +%v, paced +%v; want +%v, +%v, +%v", when, c-change, n-counters, p-paced, dc, dn, dp)
		}
		settled()
		if live.Status.JoiningReplicas != joining {
			t.Fatalf("%s: status says %d members joining, want %d", when, live.Status.JoiningReplicas, joining)
		}
	}

	member(0)
	reconcileOnce(t, r, f)
	expect("a member long after the last write", 0, 1, 0, 1)
	member(1)
	now = now.Add(statusPace / 2)
	reconcileOnce(t, r, f)
	expect("a member within a second of the last write", 0, 1, 1, 1)
	now = now.Add(statusPace)
	reconcileOnce(t, r, f)
	expect("a second later", 0, 2, 1, 2)
}
