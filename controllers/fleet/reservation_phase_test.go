package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
)

// reservationWrite is one write request the reconciler sent for a CelldStorageReservation.
type reservationWrite struct {
	method          string
	resourceVersion string // metadata.resourceVersion of the body
}

// reservationWrites records the reconciler's reservation writes. before, when set, runs once
// before the first write is sent, to make another writer win the race.
type reservationWrites struct {
	next   http.RoundTripper
	mu     sync.Mutex
	writes []reservationWrite
	before func()
}

func (w *reservationWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet || !strings.Contains(req.URL.Path, "/celldstoragereservations") {
		return w.next.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	var sent struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &sent)
	w.mu.Lock()
	w.writes = append(w.writes, reservationWrite{method: req.Method, resourceVersion: sent.Metadata.ResourceVersion})
	before := w.before
	w.before = nil
	w.mu.Unlock()
	if before != nil {
		before()
	}
	return w.next.RoundTrip(req)
}

// take returns the writes recorded since the last take.
func (w *reservationWrites) take() []reservationWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.writes
	w.writes = nil
	return got
}

// recordingReconciler is a reconciler whose reservation writes are recorded.
func recordingReconciler(t *testing.T) (*Reconciler, client.Client, *reservationWrites) {
	t.Helper()
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	rec := &reservationWrites{}
	cfg := rest.CopyConfig(testCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	direct, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	r.Direct = direct
	return r, admin, rec
}

func getReservation(t *testing.T, admin client.Client, name string) *v1.CelldStorageReservation {
	t.Helper()
	res := &v1.CelldStorageReservation{}
	if err := admin.Get(context.Background(), client.ObjectKey{Name: name}, res); err != nil {
		t.Fatal(err)
	}
	return res
}

// setRecord writes the reserved-tuning annotation as another writer would (absent when
// record is nil) and returns the reservation's new resourceVersion.
func setRecord(t *testing.T, admin client.Client, name string, record *string) string {
	t.Helper()
	res := getReservation(t, admin, name)
	if record == nil {
		delete(res.Annotations, v1.AnnotationReservedTuning)
	} else {
		if res.Annotations == nil {
			res.Annotations = map[string]string{}
		}
		res.Annotations[v1.AnnotationReservedTuning] = *record
	}
	if err := admin.Update(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	return res.ResourceVersion
}

// creationRecord is the record of the fleet as it is stored now (with its defaults).
func creationRecord(t *testing.T, admin client.Client, f *v1.CelldFleet) string {
	t.Helper()
	live := &v1.CelldFleet{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	rec, err := reservation.TuningRecord(live)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// expectOneUpdate fails unless writes is exactly one Update sent with resourceVersion rv.
func expectOneUpdate(t *testing.T, what string, writes []reservationWrite, rv string) {
	t.Helper()
	if len(writes) != 1 || writes[0].method != http.MethodPut || writes[0].resourceVersion != rv {
		t.Errorf("%s: want exactly one Update of the reservation carrying the read's resourceVersion %s, got %+v", what, rv, writes)
	}
}

// TestAnInvalidTuningRecordIsRewrittenAndAValidOneIsLeftAlone: a record that does not verify
// is rewritten from the fleet's tuning on the next pass, once; a record that verifies is
// never written again.
func TestAnInvalidTuningRecordIsRewrittenAndAValidOneIsLeftAlone(t *testing.T) {
	r, admin, rec := recordingReconciler(t)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "recorded", ns+"-recorded", nil)
	reconcileOnce(t, r, f)
	if w := rec.take(); len(w) != 1 || w[0].method != http.MethodPost {
		t.Fatalf("the first pass creates the reservation (with its record) and writes nothing else to it, got %+v", w)
	}
	name := reservation.Name(ns+"-recorded", "")
	want := creationRecord(t, admin, f)
	if got := getReservation(t, admin, name).Annotations[v1.AnnotationReservedTuning]; got != want {
		t.Fatalf("the reservation is created with the creation-time record:\n got %s\nwant %s", got, want)
	}
	reconcileOnce(t, r, f)
	if w := rec.take(); len(w) != 0 {
		t.Fatalf("a record that verifies must be left alone, got %+v", w)
	}

	retuned := &v1.CelldFleet{Spec: v1.CelldFleetSpec{
		Execution: &v1.ExecutionSpec{CPURequest: new(resource.MustParse("2"))},
		Lifecycle: &v1.LifecycleSpec{ShutdownSeconds: 10, TerminationGraceSeconds: 20},
	}}
	forged, err := reservation.TuningRecord(retuned)
	if err != nil {
		t.Fatal(err)
	}
	for _, invalid := range []struct{ name, record string }{
		{"an unparsable record", "execution: {}"},
		{"a record with a field records do not have", `{"storage":{"bucket":"x"}}`},
		{"a record that does not reproduce the frozen hash", forged},
	} {
		rv := setRecord(t, admin, name, &invalid.record)
		reconcileOnce(t, r, f)
		expectOneUpdate(t, invalid.name, rec.take(), rv)
		if got := getReservation(t, admin, name).Annotations[v1.AnnotationReservedTuning]; got != want {
			t.Errorf("%s must be rewritten with the fleet's creation-time tuning:\n got %s\nwant %s", invalid.name, got, want)
		}
		reconcileOnce(t, r, f)
		if w := rec.take(); len(w) != 0 {
			t.Errorf("%s: once rewritten, the record verifies and must be left alone, got %+v", invalid.name, w)
		}
		if b := blocked(t, admin, f); b.Reason == v1.ReasonStorageScopeConflict {
			t.Errorf("%s: an invalid record must not cost an unchanged fleet its bucket: %s", invalid.name, b.Message)
		}
	}
}

// v002Hash is the hash v0.0.2 froze for f: its defaulted spec with initialReplicas 3, without
// runtimeImage and with the default Deployment layout absent, and "qualification":"Experimental"
// before everything (reference-operator.md §1.8). It is derived here independently of the
// reservation package, so the reconciler is tested against the rule, not against itself.
func v002Hash(t *testing.T, f *v1.CelldFleet) string {
	t.Helper()
	d := f.DeepCopy()
	d.Default()
	s := d.Spec
	if *s.Replicas != 3 || s.Maintenance != nil || s.Capacity != nil || s.Routing != nil || s.Mesh != nil || s.Export != nil || s.Previews != nil {
		t.Fatal("the v0.0.2 fixture must be a plain fleet created with 3 replicas")
	}
	s.RuntimeImage, s.BucketWorkload = "", ""
	b, err := json.Marshal(struct {
		Qualification string `json:"qualification"`
		v1.CelldFleetSpec
	}{"Experimental", s})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestAReservationWithoutATuningRecordGetsOneOnTheFirstReconcile: a reservation an earlier
// release wrote (before records existed; v0.0.2's with its own hash) verifies, gets the record
// on the first pass while the fleet is unchanged, and then lets the tuning change.
func TestAReservationWithoutATuningRecordGetsOneOnTheFirstReconcile(t *testing.T) {
	r, admin, rec := recordingReconciler(t)
	ns := setup(t, admin)
	for _, c := range []struct {
		name string
		hash func(*v1.CelldFleet) string // the hash the earlier release froze; nil: this release's
	}{
		{name: "before-records"},
		{name: "v002", hash: func(f *v1.CelldFleet) string { return v002Hash(t, f) }},
	} {
		f := createFleet(t, admin, ns, c.name, ns+"-"+c.name, nil)
		earlier := reservation.Desired(f) // f carries the UID the API server gave it
		earlier.Annotations = nil
		if c.hash != nil {
			earlier.Spec.SpecHash = c.hash(f)
		}
		if err := admin.Create(context.Background(), earlier); err != nil {
			t.Fatal(err)
		}
		reconcileOnce(t, r, f)
		if b := blocked(t, admin, f); b.Reason == v1.ReasonStorageScopeConflict {
			t.Fatalf("%s: the reservation an earlier release wrote must verify for its fleet: %s", c.name, b.Message)
		}
		expectOneUpdate(t, c.name+": the first pass", rec.take(), earlier.ResourceVersion)
		if got, want := getReservation(t, admin, earlier.Name).Annotations[v1.AnnotationReservedTuning], creationRecord(t, admin, f); got != want {
			t.Errorf("%s: the first pass must record the creation-time tuning:\n got %s\nwant %s", c.name, got, want)
		}

		live := &v1.CelldFleet{}
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), live); err != nil {
			t.Fatal(err)
		}
		live.Spec.Env = []v1.EnvVar{{Name: "CELLD_LOG", Value: new("debug")}}
		if err := admin.Update(context.Background(), live); err != nil {
			t.Fatal(err)
		}
		reconcileOnce(t, r, f)
		if b := blocked(t, admin, f); b.Reason == v1.ReasonStorageScopeConflict {
			t.Errorf("%s: once recorded, the tuning may change and the reservation still verifies: %s", c.name, b.Message)
		}
		if w := rec.take(); len(w) != 0 {
			t.Errorf("%s: a record is never rewritten from changed tuning, got %+v", c.name, w)
		}
	}
}

// TestATuningRecordWriteIsNeverRetriedWithARefreshedResourceVersion: when another writer
// updates the reservation between the pass's read and its write, the write fails and is not
// retried in that pass; the next pass reads again and decides again.
func TestATuningRecordWriteIsNeverRetriedWithARefreshedResourceVersion(t *testing.T) {
	r, admin, rec := recordingReconciler(t)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "raced", ns+"-raced", nil)
	reconcileOnce(t, r, f)
	rec.take()
	name := reservation.Name(ns+"-raced", "")
	invalid := `{"x":1}`
	read := setRecord(t, admin, name, &invalid)

	var theirs string
	rec.mu.Lock()
	rec.before = func() {
		res := getReservation(t, admin, name)
		res.Labels = map[string]string{"example.com/touched": "yes"}
		if err := admin.Update(context.Background(), res); err != nil {
			t.Error(err)
		}
		theirs = res.ResourceVersion
	}
	rec.mu.Unlock()
	reconcileOnce(t, r, f) // a conflict ends the pass without an error
	expectOneUpdate(t, "the raced pass", rec.take(), read)
	res := getReservation(t, admin, name)
	if res.Annotations[v1.AnnotationReservedTuning] != invalid || res.Labels["example.com/touched"] != "yes" {
		t.Fatalf("the write with the stale resourceVersion must fail and leave the other writer's update alone, got %v %v", res.Annotations, res.Labels)
	}

	reconcileOnce(t, r, f)
	expectOneUpdate(t, "the next pass", rec.take(), theirs)
	if got, want := getReservation(t, admin, name).Annotations[v1.AnnotationReservedTuning], creationRecord(t, admin, f); got != want {
		t.Errorf("the next pass must record the creation-time tuning:\n got %s\nwant %s", got, want)
	}
}

// TestAnEarlierReleasesReservationIsBroughtToThisReleaseInOneUpdate: a reservation without a
// tuning record that still holds v0.0.5's operation in flight, of a fleet without
// spec.capacity, gets both records fixed by one Update carrying the read's resourceVersion
// (reservation.PlanRecords), the operation is told superseded once, and the next pass writes
// nothing.
func TestAnEarlierReleasesReservationIsBroughtToThisReleaseInOneUpdate(t *testing.T) {
	r, admin, rec := recordingReconciler(t)
	recorder := events.NewFakeRecorder(16)
	r.Recorder = recorder
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "earlier", ns+"-earlier", nil)
	reconcileOnce(t, r, f)
	rec.take()
	for len(recorder.Events) > 0 {
		<-recorder.Events
	}
	name := reservation.Name(ns+"-earlier", "")
	res := getReservation(t, admin, name)
	delete(res.Annotations, v1.AnnotationReservedTuning)
	res.Annotations[v1.AnnotationCurrentOperation] = `{"Version":1,"FleetUID":"` + res.Spec.FleetUID +
		`","WorkloadUID":"w","Initial":3,"Applied":3,"RuntimeImage":"i","Claims":{},"Operation":{"ID":"op-9","Kind":"Restart","Phase":"Requesting"}}`
	if err := admin.Update(context.Background(), res); err != nil {
		t.Fatal(err)
	}

	reconcileOnce(t, r, f)
	expectOneUpdate(t, "the first pass after the upgrade", rec.take(), res.ResourceVersion)
	got := getReservation(t, admin, name)
	if _, ok := got.Annotations[v1.AnnotationCurrentOperation]; ok {
		t.Errorf("the earlier release's record must be gone: %v", got.Annotations)
	}
	if got.Annotations[v1.AnnotationReservedTuning] != creationRecord(t, admin, f) {
		t.Errorf("the tuning record must be the fleet's creation tuning: %v", got.Annotations)
	}
	superseded := 0
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.Contains(e, v1.EventOperationSuperseded) && strings.Contains(e, "Restart operation op-9") {
			superseded++
		}
	}
	if superseded != 1 {
		t.Errorf("OperationSuperseded naming op-9 told %d times, want once", superseded)
	}

	reconcileOnce(t, r, f)
	if w := rec.take(); len(w) != 0 {
		t.Errorf("a reservation brought to this release is not written again, got %+v", w)
	}
}

// TestObserveReadsTheReservationAndTheReservationPhaseReadsNothing: the fleet's reservation is
// part of the pass's snapshot: observe reads it from the cache, and the reservation phase
// decides (verify, records, seed gate, history) without another read of its own.
func TestObserveReadsTheReservationAndTheReservationPhaseReadsNothing(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "snapshot", ns+"-snapshot", nil)
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)

	var reads atomic.Int64
	count := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*v1.CelldStorageReservation); ok {
			reads.Add(1)
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	ww, err := client.NewWithWatch(testCfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	r.Client, r.Direct = interceptor.NewClient(ww, count), interceptor.NewClient(ww, count)

	live := liveFleet(t, admin, f)
	s := newScope(live, r.now())
	ctx := context.Background()
	if stop, err := r.observe(ctx, s); stop || err != nil {
		t.Fatalf("observe: stop %v, %v", stop, err)
	}
	if s.reserved == nil || s.reserved.Spec.FleetUID != string(live.UID) {
		t.Fatalf("observe's snapshot holds reservation %v, want the fleet's", s.reserved)
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("observe read the reservation %d times, want once", n)
	}
	if stop, err := r.reservation(ctx, s); stop || err != nil {
		t.Fatalf("reservation phase: stop %v, %v", stop, err)
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("the reservation phase read the reservation again (%d reads in all)", n)
	}
	if s.find.Blocked() {
		t.Fatalf("the fleet's own reservation blocked it: %+v", s.find)
	}
}

// TestTheReservationsCreationIsLoggedOnce: creating the fleet's reservation is a change the
// operator makes, logged with one mutation line (action reserve) by the pass that created it;
// a pass that finds it, or loses its creation to another fleet, logs none.
func TestTheReservationsCreationIsLoggedOnce(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "logged", ns+"-logged", nil)
	other := createFleet(t, admin, ns, "rival", ns+"-logged", nil) // the same bucket: it loses
	reserves := func(f *v1.CelldFleet) int {
		t.Helper()
		ctx, lines := loggedContext()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f)}); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range *lines {
			if strings.Contains(l, `"msg"="mutation"`) && strings.Contains(l, `"action"="reserve"`) {
				if want := `"object"="CelldStorageReservation/` + reservation.Name(f.Spec.Storage.Bucket, "") + `"`; !strings.Contains(l, want) {
					t.Errorf("the reserve line %s lacks %s", l, want)
				}
				n++
			}
		}
		return n
	}
	if n := reserves(f); n != 1 {
		t.Fatalf("the pass that created the reservation logged %d reserve lines, want 1", n)
	}
	if n := reserves(f); n != 0 {
		t.Fatalf("a pass that found the reservation logged %d reserve lines", n)
	}
	if n := reserves(other); n != 0 {
		t.Fatalf("the fleet that found the bucket reserved to another logged %d reserve lines", n)
	}
	if c := blocked(t, admin, other); c == nil || c.Reason != v1.ReasonStorageScopeConflict {
		t.Fatalf("the rival fleet is not blocked by the reservation: %+v", c)
	}
}
