package admissionfuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/controllers/fleet"
	"github.com/celld/celld-operator/controllers/workload"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/tests/apiserver"
)

// Settings of the run, from the environment:
//
//	CELLD_FUZZ_ADMISSION=N         mutations in all (default defaultCount), spread over the samples
//	CELLD_FUZZ_ADMISSION_SEED=S    the run's seed (default: the clock, printed)
//	CELLD_FUZZ_ADMISSION_CASE=I    replay only case I of seed S
//	CELLD_FUZZ_ADMISSION_REAL=K    about one admitted case in K (drawn by the case's seed) is
//	                               also created for real and reconciled twice (default 10)
const defaultCount = 2400

// storageClass is the class the PersistentFleet samples name; the reconciled namespace has it,
// so that admitted PersistentFleets get past the storage guard into the later phases.
const storageClass = "ebs-gp3"

const provisioner = "test.csi.example"

// requestLimit is the API server's limit on a request body (3 MiB): a larger object is refused
// as too large before admission reads any field.
const requestLimit = 3 << 20

type sample struct {
	name string
	obj  Object
}

// TestRandomMutationsOfEverySample sends seeded mutations of every CelldFleet sample to the
// API server as server-side dry-run creates (real admission: schema, CEL, defaulting, strict
// field validation) and every K-th admitted one as a real create. A refusal must name one of
// the mutated fields. An admitted object must decode into the Go type without an unknown
// field, be admitted by Validate after Default, render (the workload and the chart's
// children) without a panic, and the real creates reconcile twice without a panic or an error.
func TestRandomMutationsOfEverySample(t *testing.T) {
	count := envInt(t, "CELLD_FUZZ_ADMISSION", defaultCount)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CELLD_FUZZ_ADMISSION_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CELLD_FUZZ_ADMISSION_SEED=%q: %v", s, err)
		}
		seed = v
	}
	only := envInt(t, "CELLD_FUZZ_ADMISSION_CASE", -1)
	realEvery := envInt(t, "CELLD_FUZZ_ADMISSION_REAL", 10)
	t.Logf("seed %d, %d mutations (replay: CELLD_FUZZ_ADMISSION_SEED=%d CELLD_FUZZ_ADMISSION=%d)", seed, count, seed, count)

	samples := readSamples(t)
	donors := make([]Object, 0, len(samples))
	for _, s := range samples {
		donors = append(donors, s.obj)
	}
	donors = append(donors, corpusDonors(t)...)
	c := server.Client(t)
	ctx := context.Background()
	// The dry runs and the real creates go to separate namespaces: a mutated name may repeat,
	// and a dry run must not meet an object an earlier case created for real (AlreadyExists
	// answers after admission, so it would hide the answer the case is about).
	ns := namespaces{dry: prepareNamespace(t, c), real: prepareNamespace(t, c)}
	renderer, err := children.NewFleetRenderer()
	if err != nil {
		t.Fatal(err)
	}
	r := reconciler(c, renderer)

	var (
		st      stats
		mu      sync.Mutex
		reports []string
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, fmt.Sprintf(format, args...))
	}
	for range 4 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= count {
					return
				}
				if only >= 0 && i != only {
					continue
				}
				one(ctx, t, c, r, renderer, ns, seed, i, samples, donors, realEvery, &st, fail)
			}
		})
	}
	wg.Wait()

	t.Logf("sent %d: refused %d (%d over the request size limit), admitted %d (%d created for real and reconciled twice); disagreements %d",
		st.sent.Load(), st.refused.Load(), st.tooLarge.Load(), st.admitted.Load(), st.reconciled.Load(), len(reports))
	t.Logf("refused/admitted by kind of mutation: %s", st.byKind())
	t.Logf("admitted after Default() changed the server's defaulting: %d", st.defaultDiffers.Load())
	slices.Sort(reports)
	for i, rep := range reports {
		if i == 20 {
			t.Errorf("... and %d more", len(reports)-20)
			break
		}
		t.Error(rep)
	}
	if only < 0 && count >= 100 && (st.refused.Load() == 0 || st.admitted.Load() == 0) {
		t.Errorf("a run of %d mutations must see both refusals and admissions: refused %d, admitted %d", count, st.refused.Load(), st.admitted.Load())
	}
}

type stats struct {
	sent, refused, admitted, reconciled, defaultDiffers, tooLarge atomic.Int64

	mu sync.Mutex
	// kinds counts, per kind of mutation, the cases refused and admitted (a case with
	// several mutations counts for each).
	kinds map[string]*[2]int
}

func (s *stats) tally(muts []Mutation, admitted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kinds == nil {
		s.kinds = map[string]*[2]int{}
	}
	for _, m := range muts {
		if s.kinds[m.Kind] == nil {
			s.kinds[m.Kind] = &[2]int{}
		}
		if admitted {
			s.kinds[m.Kind][1]++
		} else {
			s.kinds[m.Kind][0]++
		}
	}
}

func (s *stats) byKind() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.kinds)) {
		parts = append(parts, fmt.Sprintf("%s %d/%d", k, s.kinds[k][0], s.kinds[k][1]))
	}
	return strings.Join(parts, ", ")
}

// caseSeed derives the seed of case i of a run (splitmix64), so cases are independent of
// the order the workers take them in.
func caseSeed(run uint64, i int) uint64 {
	z := run + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func one(ctx context.Context, t *testing.T, c client.Client, r *fleet.Reconciler, renderer *children.Renderer, ns namespaces,
	seed uint64, i int, samples []sample, donors []Object, realEvery int, st *stats, fail func(string, ...any)) {
	s := samples[i%len(samples)]
	obj, muts := Mutate(s.obj, donors, caseSeed(seed, i))
	unique(obj, s, i)
	where := func() string {
		data, _ := json.Marshal(obj)
		if len(data) > 1500 {
			data = append(data[:1500], "..."...)
		}
		return fmt.Sprintf("seed %d case %d (CELLD_FUZZ_ADMISSION_SEED=%d CELLD_FUZZ_ADMISSION_CASE=%d), sample %s, mutations %v, object %s",
			seed, i, seed, i, s.name, muts, data)
	}
	u := &unstructured.Unstructured{Object: deepCopy(obj).(Object)}
	u.SetNamespace(ns.dry)
	st.sent.Add(1)
	err := c.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
	if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
		// a machine shared with other builds can starve the API server: one more try, then
		// the timeout counts as the answer
		u = &unstructured.Unstructured{Object: deepCopy(obj).(Object)}
		u.SetNamespace(ns.dry)
		err = c.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
	}
	st.tally(muts, err == nil)
	if err != nil {
		st.refused.Add(1)
		ref, ok := RefusalOf(err)
		switch {
		case !ok:
			fail("the API server did not answer: %v; %s", err, where())
		case apierrors.IsRequestEntityTooLargeError(err):
			// The API server's request limit (3 MiB) refuses before any field is read: only an
			// object over it may get this answer.
			if data, _ := json.Marshal(u.Object); len(data) < requestLimit {
				fail("refused as too large at %d bytes, under the %d-byte request limit: %v; %s", len(data), requestLimit, err, where())
			}
			st.tooLarge.Add(1)
		case !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err):
			fail("refused with %s, not as an invalid object: %v; %s", apierrors.ReasonForError(err), err, where())
		default:
			if _, named := ref.Names(muts); !named {
				fail("the refusal names none of the mutated fields: %v; %s", err, where())
			}
		}
		return
	}
	st.admitted.Add(1)
	f, err := decode(u)
	if err != nil {
		fail("admitted, but the operator cannot decode it: %v; %s", err, where())
		return
	}
	local := f.DeepCopy()
	local.Default()
	if errs := local.Validate(); len(errs) > 0 {
		fail("admitted by the API server, refused by Validate: %v; %s", errs.ToAggregate(), where())
		return
	}
	if !equality.Semantic.DeepEqual(f.Spec, local.Spec) {
		// the reconciler defaults the stored object again: it must find nothing to fill
		st.defaultDiffers.Add(1)
		want, _ := json.Marshal(f.Spec)
		got, _ := json.Marshal(local.Spec)
		fail("Default() changes what the API server defaulted: stored %s, after Default %s; %s", want, got, where())
	}
	if p := render(renderer, local); p != "" {
		fail("rendering an admitted fleet panicked: %s; %s", p, where())
		return
	}
	// about one admitted case in realEvery, drawn from the case's seed so that a replay of one
	// case does the same
	if realEvery <= 0 || (caseSeed(seed, i)>>8)%uint64(realEvery) != 0 {
		return
	}
	real := &unstructured.Unstructured{Object: deepCopy(obj).(Object)}
	real.SetNamespace(ns.real)
	if err := c.Create(ctx, real, client.FieldValidation("Strict")); err != nil {
		if !apierrors.IsAlreadyExists(err) { // a mutated name may repeat
			fail("admitted by a dry run, refused by the real create: %v; %s", err, where())
		}
		return
	}
	st.reconciled.Add(1)
	key := client.ObjectKeyFromObject(real)
	for pass := 1; pass <= 2; pass++ {
		if msg := reconcile(ctx, r, key); msg != "" {
			fail("reconcile pass %d: %s; %s", pass, msg, where())
			return
		}
	}
	live := &v1.CelldFleet{}
	if err := c.Get(ctx, key, live); err != nil {
		fail("read the reconciled fleet: %v; %s", err, where())
		return
	}
	if meta.FindStatusCondition(live.Status.Conditions, v1.ConditionReady) == nil &&
		meta.FindStatusCondition(live.Status.Conditions, v1.ConditionBlocked) == nil {
		fail("two reconciles left no Ready or Blocked condition: %+v; %s", live.Status.Conditions, where())
	}
}

// unique gives each case its own name and bucket, unless the mutation changed them: names
// must not collide in the namespace, and a bucket is reserved to the first fleet that asks.
func unique(obj Object, s sample, i int) {
	if md, ok := obj["metadata"].(Object); ok && md["name"] == s.name {
		md["name"] = s.name + "-" + strconv.Itoa(i)
	}
	spec, _ := obj["spec"].(Object)
	storage, _ := spec["storage"].(Object)
	orig := s.obj["spec"].(Object)["storage"].(Object)["bucket"]
	if storage != nil && storage["bucket"] == orig {
		b := "fz" + strconv.Itoa(i) + "-" + orig.(string)
		storage["bucket"] = strings.TrimRight(b[:min(len(b), 63)], "-")
	}
}

// decode reads the API server's answer as the operator's cache would: into the Go type, here
// strictly, so a field the schema keeps and the Go type lacks is found.
func decode(u *unstructured.Unstructured) (*v1.CelldFleet, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	f := &v1.CelldFleet{}
	return f, dec.Decode(f)
}

// render runs the operator's pure renderers on a defaulted fleet and returns a panic's value
// and stack, or "".
func render(renderer *children.Renderer, f *v1.CelldFleet) (panicked string) {
	defer func() {
		if p := recover(); p != nil {
			panicked = fmt.Sprintf("%v\n%s", p, debug.Stack())
		}
	}()
	o := workload.Options{OperatorNamespace: "celld-system", OperatorServiceAccount: "celld-operator", ReservationName: "r"}
	if f.Spec.Profile == v1.ProfileBucket && f.Spec.BucketWorkload == v1.BucketWorkloadDeployment {
		workload.Deployment(f, o, f.DesiredReplicas())
	} else {
		workload.StatefulSet(f, o, f.DesiredReplicas())
	}
	for _, facts := range []children.OperatorFacts{
		{Namespace: "celld-system", ServiceAccount: "celld-operator", NetworkPolicyEnforced: true},
		{Namespace: "celld-system", ServiceAccount: "celld-operator", NetworkPolicyEnforced: true, GatewayAPIInstalled: true, IstioInstalled: true, MeshMixed: true},
	} {
		_, _ = renderer.Render(f, facts) // a BlockedError is a verdict, not a failure
	}
	renderer.Forget(f.UID)
	return ""
}

// reconcile runs one pass and describes a panic or a returned error ("" for neither). A
// returned error is what controller-runtime retries with backoff: an admitted fleet must get a
// verdict in its status instead.
func reconcile(ctx context.Context, r *fleet.Reconciler, key client.ObjectKey) (problem string) {
	defer func() {
		if p := recover(); p != nil {
			problem = fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		return "returned an error (an error loop): " + err.Error()
	}
	return ""
}

// reconciler is the operator's reconciler over the test's API server, built as the manager
// builds it but reading directly (no caches) and with no optional APIs installed.
func reconciler(c client.Client, renderer *children.Renderer) *fleet.Reconciler {
	o := fleet.DefaultOptions()
	o.NetworkPolicyEnforced = true
	o.StorageProvisioners = []string{provisioner}
	o.RequeuePeriod = fleet.DefaultResyncPeriod
	return &fleet.Reconciler{
		Client: c, Direct: c, Options: o, Children: renderer, Applier: &children.Applier{Direct: c}, Drift: &drift.Detector{},
		APIs: func(context.Context) (bool, bool, error) { return false, false, nil },
	}
}

// namespaces are where a case's dry run and its real create go.
type namespaces struct{ dry, real string }

// prepareNamespace creates the namespace the fleets go to, with the runtime ServiceAccount the
// samples name and their StorageClass.
func prepareNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fuzz-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "celld-runtime"}}); err != nil {
		t.Fatal(err)
	}
	reclaim, mode := corev1.PersistentVolumeReclaimDelete, storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: storageClass}, Provisioner: provisioner, ReclaimPolicy: &reclaim, VolumeBindingMode: &mode}
	if err := c.Create(ctx, sc); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// corpusDonors are the admitted fleets of the admission corpus, as JSON: grafts from them
// bring fields no sample sets (previews, preview storage, capacity bounds, env sources).
func corpusDonors(t *testing.T) []Object {
	t.Helper()
	var out []Object
	for _, c := range corpus.Create() {
		if !c.Accepted() {
			continue
		}
		f := corpus.Persistent()
		c.Mutate(f)
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := FromJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// readSamples reads the CelldFleet document of every sample as generic JSON.
func readSamples(t *testing.T) []sample {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	var out []sample
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for doc := range strings.SplitSeq(string(data), "\n---\n") {
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			obj, err := FromJSON(js)
			if err != nil || obj["kind"] != "CelldFleet" {
				continue
			}
			out = append(out, sample{name: obj["metadata"].(Object)["name"].(string), obj: obj})
		}
	}
	if len(out) < 12 {
		t.Fatalf("want the 12 CelldFleet samples of config/samples, found %d", len(out))
	}
	return out
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}
