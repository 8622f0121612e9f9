package application

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/celld"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// countingReader records when each member's /state was read, on the observer's clock.
type countingReader struct {
	mu    sync.Mutex
	now   func() time.Time
	reads map[string][]time.Time
}

func (r *countingReader) ReadState(ctx context.Context, ip string) (celld.Reading, error) {
	r.mu.Lock()
	r.reads[ip] = append(r.reads[ip], r.now())
	r.mu.Unlock()
	return loadReader{}.ReadState(ctx, ip)
}

// Seed 000: the operator reads GET /state at most once every 15 seconds per fleet. Two things
// once read more often: a capacity policy's sampleIntervalSeconds (5 to 300) shorter than 15 s,
// and every generation change, which re-read at once. Three simulated minutes of scans, one a
// second, with the policy at 5 s and the fleet's spec changed every 20 s, must read the member
// no sooner than 15 s after the previous read, and still read it on the 15 s beat.
func TestStateIsReadAtMostOnceEveryFifteenSecondsPerFleet(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	sts := statefulSetOf(t, c, f, 1)
	const ip = "10.9.15.1"
	runningPod(t, c, f, "f-0", ip, sts, "StatefulSet")
	f = withPolicy(t, c, f) // sampleIntervalSeconds 5
	f = reportedFleet(t, c, f, 1)

	clock := time.Now()
	now := func() time.Time { return clock }
	reader := &countingReader{now: now, reads: map[string][]time.Time{}}
	observations := 0 // of this fleet: the scan observes every fleet of the shared API server
	feed := func(key types.NamespacedName, _ types.UID, _ *capacity.Observation) {
		if key.Namespace == ns {
			observations++
		}
	}
	o := New(c, c, c.Status(), Options{Reader: reader, Capacity: feed, Metrics: &fakeMetrics{}, Now: now})

	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	const seconds = 180
	for s := range seconds {
		if s%20 == 10 { // a spec change: a new generation
			bumpGeneration(t, c, f, s)
		}
		o.scan(t.Context(), &wg, slots)
		wg.Wait()
		clock = clock.Add(time.Second)
	}

	reads := reader.reads[ip]
	for i := 1; i < len(reads); i++ {
		if gap := reads[i].Sub(reads[i-1]); gap < 15*time.Second {
			t.Fatalf("read %d came %s after the previous one: /state is read at most once every 15 s per fleet", i, gap)
		}
	}
	// every 15 s from the first read, on a one-second scan: 12 reads in three minutes
	if len(reads) < seconds/15-1 {
		t.Fatalf("%d reads in %d s: the fleet must still be read every 15 s", len(reads), seconds)
	}
	if observations != len(reads) {
		t.Fatalf("every collection feeds the capacity policy: %d observations for %d reads", observations, len(reads))
	}
}

// bumpGeneration changes the fleet's spec, so its generation moves.
func bumpGeneration(t *testing.T, c client.Client, f *v1.CelldFleet, token int) {
	t.Helper()
	live := fleetNow(t, c, f)
	before := live.Generation
	patch := client.MergeFrom(live.DeepCopy())
	live.Spec.Maintenance = &v1.MaintenanceSpec{RestartToken: fmt.Sprint("t", token)}
	if err := c.Patch(t.Context(), live, patch); err != nil {
		t.Fatal(err)
	}
	if fleetNow(t, c, live).Generation == before {
		t.Fatal("the spec change did not move the generation")
	}
}

// TestOneScanStartsEveryDueFleetTheLongestWaitingFirst: a scan starts every due fleet through
// its four slots, not only the four that find a slot free as the walk reaches them: 300 fleets
// due every 15 s were observed four a second, each about every 75 s, and a fleet late in the
// list waited behind the early ones for as long as they kept falling due (the 300-fleet
// benchmark's run 16). The fleet that waited longest starts first.
func TestOneScanStartsEveryDueFleetTheLongestWaitingFirst(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	const n = 12
	var uids []types.UID
	for i := range n {
		f := corpus.Bucket()
		f.Namespace, f.Name = ns, fmt.Sprintf("f%02d", i)
		if err := c.Create(t.Context(), f); err != nil {
			t.Fatal(err)
		}
		reportedFleet(t, c, f, 0)
		uids = append(uids, f.UID)
	}
	clock := time.Now()
	o := New(c, c, c.Status(), Options{Reader: loadReader{}, Metrics: &fakeMetrics{}, Now: func() time.Time { return clock }})
	// Every fleet was observed before, the last in name order longest ago.
	for i, uid := range uids {
		o.last[uid] = observed{at: clock.Add(-time.Minute - time.Duration(i)*time.Second)}
	}
	var mu sync.Mutex
	var order []types.UID
	o.started = func(uid types.UID) {
		mu.Lock()
		order = append(order, uid)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	o.scan(t.Context(), &wg, slots)
	wg.Wait()
	var ours []types.UID // the scan observes every fleet of the shared API server
	for _, uid := range order {
		if slices.Contains(uids, uid) {
			ours = append(ours, uid)
		}
	}
	if len(ours) != n {
		t.Fatalf("one scan started %d of %d due fleets", len(ours), n)
	}
	if ours[0] != uids[n-1] {
		t.Fatalf("the fleet observed longest ago did not start first: started %v", ours)
	}
	for _, uid := range uids {
		if !o.last[uid].at.Equal(clock) {
			t.Fatalf("fleet %s was not observed in the scan: last %v", uid, o.last[uid].at)
		}
	}
}

// TestAFleetIsObservedOnceTheReconcilerHasReportedIt: a new fleet has no workload before the
// reconciler's first pass, so the scan leaves it until its status has a Ready condition; a
// deleting fleet is observed whatever its status says (it is published FleetDeleting).
func TestAFleetIsObservedOnceTheReconcilerHasReportedIt(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	o := New(c, c, c.Status(), Options{Reader: loadReader{}, Metrics: &fakeMetrics{}})
	var mu sync.Mutex
	started := map[types.UID]int{}
	o.started = func(uid types.UID) {
		mu.Lock()
		started[uid]++
		mu.Unlock()
	}
	scan := func() int {
		var wg sync.WaitGroup
		o.scan(t.Context(), &wg, make(chan struct{}, 4))
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return started[f.UID]
	}
	if n := scan(); n != 0 {
		t.Fatalf("a fleet the reconciler has not reported was observed %d times", n)
	}
	if live := fleetNow(t, c, f); meta.FindStatusCondition(live.Status.Conditions, v1.ConditionApplicationConverged) != nil {
		t.Fatalf("a fleet the reconciler has not reported got ApplicationConverged: %+v", live.Status.Conditions)
	}
	reportedFleet(t, c, f, 1)
	if n := scan(); n != 1 {
		t.Fatalf("a reported fleet was observed %d times in one scan, want once", n)
	}

	if !reported(&v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: time.Now()}}}) {
		t.Fatal("a deleting fleet must be observed (FleetDeleting) even before the reconciler reported it")
	}
}
