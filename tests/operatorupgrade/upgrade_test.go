// Package operatorupgrade proves an operator upgrade on the local cluster: release 0.1.0 runs
// fleets of every layout, then this release's CRDs and operator replace it the way OLM does
// (CRDs first, then the Deployment's rolling update), and finally the old operator comes back
// over the new CRDs, as an OLM rollback would leave them. Continuous monitors (monitor_test.go)
// fail the run on the first unsafe change. `make test-operator-upgrade` runs it;
// docs/install.md ("Upgrading the operator") states what it proves and what it measured.
package operatorupgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/localcluster"
)

// Bounds, each a generous multiple of what an idle two-core machine measures, so a machine
// shared with other builds does not flake while a real hang still fails in bounded time.
const (
	// readyBound: three fleets Ready from nothing under release 0.1.0 (about 20 s idle).
	readyBound = 3 * time.Minute
	// operatorReadyBound: a started operator answers /readyz (about 1 s).
	operatorReadyBound = time.Minute
	// leaseBound: the new operator holds the lease after the old one was stopped. The old one
	// releases it on SIGTERM, so the next retry (2 s) takes it; an unreleased lease would take
	// its 15 s duration.
	leaseBound = 45 * time.Second
	// convergeBound: every fleet's status rebuilt by the new operator and, if its template
	// changed, a rollout of three members (about 4 s each) finished.
	convergeBound = 3 * time.Minute
	// settle: how long the run keeps watching after convergence, so a late rollout or delete
	// is still seen in its phase.
	settle = 30 * time.Second
	// rollbackWatch: how long the rolled-back operator runs under the monitors, at least,
	// after it holds the lease: several of its 1-minute resyncs of watches.yaml at v0.1.0.
	rollbackWatch = 90 * time.Second
	// stopGrace: the operator Pod's terminationGracePeriodSeconds (chart and CSV).
	stopGrace = 10 * time.Second
)

type fleetCase struct {
	ns, name string
	profile  v1.Profile
	layout   v1.BucketWorkload
}

var fleetCases = []fleetCase{
	{"up-persistent", "persistent", v1.ProfilePersistentFleet, ""},
	{"up-deployment", "deployment", v1.ProfileBucket, v1.BucketWorkloadDeployment},
	{"up-ordered", "ordered", v1.ProfileBucket, v1.BucketWorkloadOrdered},
}

// runImage is a digest-pinned placeholder; the simulator serves every member.
const runImage = "images.example.invalid/celld/celld@sha256:94f35ba6973942eb4aaad2830ee8ebe431e2a125940acf380e74782602980a2a"

// fleetObject is a fleet as a user of 0.1.0 wrote it: only fields both releases know, as
// plain JSON, so nothing of this release's API leaks into what 0.1.0 is given.
func fleetObject(c fleetCase) *unstructured.Unstructured {
	storage := map[string]any{"bucket": "upgrade-" + c.name, "region": "us-east-1"}
	if c.profile == v1.ProfilePersistentFleet {
		storage["storageClassName"] = localcluster.StorageClassName
	}
	spec := map[string]any{
		"profile":            string(c.profile),
		"replicas":           int64(3),
		"runtimeImage":       runImage,
		"serviceAccountName": "celld-runtime",
		"storage":            storage,
		"placement":          map[string]any{"zones": []any{"us-east-1a", "us-east-1b", "us-east-1c"}, "azCount": int64(3)},
		"lifecycle":          map[string]any{"shutdownSeconds": int64(2), "terminationGraceSeconds": int64(10)},
	}
	if c.layout != "" {
		spec["bucketWorkload"] = string(c.layout)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.GroupVersion.String(), "kind": "CelldFleet",
		"metadata": map[string]any{"namespace": c.ns, "name": c.name},
		"spec":     spec,
	}}
}

// harness is one run's clients, operators and records.
type harness struct {
	t       *testing.T
	dir     string
	cs      kubernetes.Interface
	dyn     dynamic.Interface
	ext     apiextensionsclient.Interface
	journal *journal
	mon     *monitor
	report  map[string]any
}

func TestOperatorUpgrade(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old, cur := previousRelease(t), currentRelease(t)
	dir := artifactsDir(t)

	clusterLog, err := os.Create(filepath.Join(dir, "localcluster.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer clusterLog.Close()
	start := time.Now()
	cluster, err := localcluster.Start(ctx, localcluster.Options{Dir: filepath.Join(dir, "cluster"), Log: clusterLog, StartTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatalf("start the local cluster: %v", err)
	}
	defer cluster.Stop()
	t.Logf("local cluster up in %s", time.Since(start).Round(time.Second))
	cfg := cluster.RESTConfig()
	h := &harness{t: t, dir: dir, cs: cluster.Client(), dyn: dynamic.NewForConfigOrDie(cfg), ext: apiextensionsclient.NewForConfigOrDie(cfg),
		report: map[string]any{"previousRelease": old.Commit}}
	jf, err := os.Create(filepath.Join(dir, "operator-writes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer jf.Close()
	h.journal = &journal{file: jf}
	h.mon = newMonitor(h.cs, h.dyn)
	h.journal.onWrite, h.journal.onFleetStatus = h.mon.onWrite, h.mon.onFleetStatus
	defer h.writeReport()

	// The cluster as 0.1.0 was installed on it: its CRDs, the optional Gateway API and Istio
	// CRDs the fleet chart renders for, the operator namespace, a namespace per fleet.
	root, _ := localcluster.RepoRoot()
	if err := localcluster.InstallCRDs(ctx, cfg, old.CRDs, "*.yaml"); err != nil {
		t.Fatalf("install the CRDs of %s: %v", old.Version, err)
	}
	if err := localcluster.InstallCRDs(ctx, cfg, root, "controllers/children/testdata/crds/*.yaml"); err != nil {
		t.Fatal(err)
	}
	h.namespace(ctx, operatorNamespace, false)
	for _, c := range fleetCases {
		h.namespace(ctx, c.ns, true)
	}

	oldOp := h.start(ctx, cfg, "v"+old.Version, old)
	defer stopIfRunning(oldOp)
	h.waitLease(oldOp, time.Time{})
	for _, c := range fleetCases {
		if _, err := h.dyn.Resource(fleetsGVR).Namespace(c.ns).Create(ctx, fleetObject(c), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create fleet %s/%s under %s: %v", c.ns, c.name, old.Version, err)
		}
	}
	start = time.Now()
	h.waitFleets(ctx, readyBound, "under "+old.Version, nil)
	t.Logf("fleets Ready under %s in %s", old.Version, time.Since(start).Round(time.Second))
	before := h.snapshot(ctx)
	h.report["underPrevious"] = before.summary()

	// From here on every change is watched.
	var namespaces []string
	for _, c := range fleetCases {
		namespaces = append(namespaces, c.ns)
		if err := h.mon.track(ctx, before.fleets[c.ns+"/"+c.name]); err != nil {
			t.Fatal(err)
		}
	}
	monCtx, monCancel := context.WithCancel(ctx)
	defer monCancel()
	if err := h.mon.run(monCtx, namespaces); err != nil {
		t.Fatalf("start the monitors: %v", err)
	}
	if err := h.mon.startPhase(ctx, "upgrade"); err != nil {
		t.Fatal(err)
	}

	// OLM's order: the new bundle's CRDs replace the old ones first (server-side apply, as
	// OLM v1 applies bundle objects), then the Deployment rolls: the new Pod starts and is
	// ready (its readiness does not wait for the lease), then the old Pod gets SIGTERM and
	// releases the lease, and the new one takes it.
	t.Log("upgrade: applying this release's CRDs over 0.1.0's")
	crdAt := time.Now()
	h.applyCRDs(ctx, cur.CRDs)
	newOp := h.start(ctx, cfg, "current", cur)
	defer stopIfRunning(newOp)
	graceful := oldOp.stop(stopGrace)
	if !graceful {
		t.Errorf("operator %s did not exit within %s of SIGTERM (killed)", oldOp.name, stopGrace)
	}
	leaseAt := h.waitLease(newOp, oldOp.stopping)
	takeover := leaseAt.Sub(oldOp.stopping)
	t.Logf("upgrade: CRDs applied at +0s, new operator ready, old stopped at +%s (exited after %s), new operator leads %s after the stop",
		oldOp.stopping.Sub(crdAt).Round(time.Millisecond), oldOp.exited.Sub(oldOp.stopping).Round(time.Millisecond), takeover.Round(time.Millisecond))
	converged := h.waitFleets(ctx, convergeBound, "after the upgrade", newOp)
	h.observe(settle)
	after := h.snapshot(ctx)
	h.report["upgrade"] = h.judgePhase("upgrade", before, after, newOp, leaseAt, converged)
	h.report["upgradeTakeover"] = map[string]string{
		"oldExitAfterSIGTERM": oldOp.exited.Sub(oldOp.stopping).Round(time.Millisecond).String(),
		"leaseAfterSIGTERM":   takeover.Round(time.Millisecond).String(),
		"convergedAfterLease": converged.Sub(leaseAt).Round(time.Millisecond).String(),
	}
	if t.Failed() {
		return
	}

	// Rollback: OLM v0 cannot downgrade (a CSV replaces only an older one) and OLM v1 refuses
	// a lower version unless told to; the manual way back is the old Deployment over the CRDs
	// the new bundle left, which is what runs here.
	if err := h.mon.startPhase(ctx, "rollback"); err != nil {
		t.Fatal(err)
	}
	t.Log("rollback: starting 0.1.0 again over this release's CRDs")
	backOp := h.start(ctx, cfg, "v"+old.Version+"-rollback", old)
	defer stopIfRunning(backOp)
	if !newOp.stop(stopGrace) {
		t.Errorf("operator %s did not exit within %s of SIGTERM (killed)", newOp.name, stopGrace)
	}
	backLease := h.waitLease(backOp, newOp.stopping)
	t.Logf("rollback: 0.1.0 leads %s after the stop", backLease.Sub(newOp.stopping).Round(time.Millisecond))
	backConverged := h.waitFleets(ctx, convergeBound, "after the rollback", backOp)
	if rest := rollbackWatch - time.Since(backLease); rest > 0 {
		h.observe(rest)
	}
	back := h.snapshot(ctx)
	h.report["rollback"] = h.judgePhase("rollback", after, back, backOp, backLease, backConverged)
	h.report["rollbackTakeover"] = map[string]string{
		"newExitAfterSIGTERM": newOp.exited.Sub(newOp.stopping).Round(time.Millisecond).String(),
		"leaseAfterSIGTERM":   backLease.Sub(newOp.stopping).Round(time.Millisecond).String(),
		"watchedFor":          time.Since(backLease).Round(time.Second).String(),
	}
	for _, c := range fleetCases {
		key := c.ns + "/" + c.name
		if !equality.Semantic.DeepEqual(after.fleets[key].Spec, back.fleets[key].Spec) {
			t.Errorf("rollback: 0.1.0 changed the spec of fleet %s:\n%s\n->\n%s", key, toJSON(after.fleets[key].Spec), toJSON(back.fleets[key].Spec))
		}
	}
	h.mon.stop()
}

// observe keeps the monitors running for d, failing at once on a violation.
func (h *harness) observe(d time.Duration) {
	h.t.Helper()
	// the window runs out without a violation: that is the success
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, d, true, func(context.Context) (bool, error) {
		if v := h.mon.Violations(); len(v) > 0 {
			h.t.Fatalf("safety: %s", v[0])
		}
		return false, nil
	})
}

func stopIfRunning(o *operator) {
	if o != nil && o.running() {
		o.stop(stopGrace)
	}
}

func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CELLD_UPGRADE_ARTIFACTS")
	if dir == "" {
		dir = ".artifacts"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("artifacts (operator logs, write journal, report) in %s", dir)
	return dir
}

func (h *harness) namespace(ctx context.Context, name string, fleet bool) {
	h.t.Helper()
	if _, err := h.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
	if fleet {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "celld-runtime"}}
		if _, err := h.cs.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
}

// start runs an operator and waits until it answers /readyz.
func (h *harness) start(ctx context.Context, cfg *rest.Config, name string, rel release) *operator {
	h.t.Helper()
	o, err := startOperator(ctx, cfg, h.journal, h.dir, name, rel)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := o.waitReady(ctx, operatorReadyBound); err != nil {
		h.t.Fatal(err)
	}
	return o
}

// waitLease returns when operator o first wrote the leader-election Lease at or after since:
// a replica that does not lead only reads it.
func (h *harness) waitLease(o *operator, since time.Time) time.Time {
	h.t.Helper()
	var led time.Time
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, leaseBound, true, func(context.Context) (bool, error) {
		for _, r := range h.journal.since(o.name, since) {
			if r.Resource == "leases" && r.Namespace == operatorNamespace && (r.Name == leaseName || r.Method == "POST") {
				led = r.At
				return true, nil
			}
		}
		if !o.running() {
			h.t.Fatalf("operator %s exited before it led (see %s)", o.name, o.logPath)
		}
		return false, nil
	})
	if err != nil {
		h.t.Fatalf("operator %s did not take the lease %s/%s within %s (see %s)", o.name, operatorNamespace, leaseName, leaseBound, o.logPath)
	}
	return led
}

// waitFleets waits until every fleet is Ready (Provisioned, all members ready, not Blocked),
// its status is of its current generation, its workload's rollout is complete and, when op is
// given, op has written the fleet's status since it led (its own rebuild of it). It fails at
// once on a monitor violation or when op exits.
func (h *harness) waitFleets(ctx context.Context, bound time.Duration, when string, op *operator) time.Time {
	h.t.Helper()
	var why string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		if v := h.mon.Violations(); len(v) > 0 {
			h.t.Fatalf("safety %s: %s", when, v[0])
		}
		if op != nil && !op.running() {
			h.t.Fatalf("operator %s exited %s (see %s)", op.name, when, op.logPath)
		}
		why = ""
		for _, c := range fleetCases {
			if why = h.fleetSettled(ctx, c, op); why != "" {
				break
			}
		}
		return why == "", nil
	})
	if err != nil {
		h.t.Fatalf("fleets not settled %s within %s: %s", when, bound, why)
	}
	return time.Now()
}

func (h *harness) fleetSettled(ctx context.Context, c fleetCase, op *operator) string {
	f, err := h.fleet(ctx, c.ns, c.name)
	if err != nil {
		return err.Error()
	}
	key := c.ns + "/" + c.name
	ready := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionReady)
	switch {
	case ready == nil:
		return key + " has no Ready condition"
	case ready.Status != metav1.ConditionTrue || ready.Reason != v1.ReasonProvisioned:
		return fmt.Sprintf("%s Ready=%s/%s: %s", key, ready.Status, ready.Reason, ready.Message)
	case meta.IsStatusConditionTrue(f.Status.Conditions, v1.ConditionBlocked):
		return key + " is Blocked"
	case f.Status.ObservedGeneration != f.Generation:
		return fmt.Sprintf("%s status of generation %d, fleet at %d", key, f.Status.ObservedGeneration, f.Generation)
	case f.Status.ReadyReplicas != 3:
		return fmt.Sprintf("%s has %d ready members", key, f.Status.ReadyReplicas)
	}
	if c.profile == v1.ProfileBucket && c.layout == v1.BucketWorkloadDeployment {
		d, err := h.cs.AppsV1().Deployments(c.ns).Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 3 || d.Status.Replicas != 3 || d.Status.AvailableReplicas != 3 {
			return key + " Deployment rollout in progress"
		}
	} else {
		s, err := h.cs.AppsV1().StatefulSets(c.ns).Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if s.Status.ObservedGeneration != s.Generation || s.Status.UpdatedReplicas != 3 || s.Status.ReadyReplicas != 3 || s.Status.CurrentRevision != s.Status.UpdateRevision {
			return key + " StatefulSet rollout in progress"
		}
	}
	if op != nil && len(h.statusWrites(op, c, op.started)) == 0 && len(h.namespaceWrites(op, c, op.started)) == 0 {
		// A status the previous operator left may already be what op computes, and then op
		// rightly writes none; its first pass still applies the fleet's children, so a fleet
		// op has not touched at all is one it has not reconciled yet.
		return fmt.Sprintf("operator %s has written neither the status of %s nor any of its children yet", op.name, key)
	}
	return ""
}

// namespaceWrites are op's writes of objects in fleet c's namespace since t (its children).
func (h *harness) namespaceWrites(op *operator, c fleetCase, t time.Time) []writeRecord {
	var out []writeRecord
	for _, r := range h.journal.since(op.name, t) {
		if r.Namespace == c.ns && r.Resource != "events" && r.Resource != "celldfleets" {
			out = append(out, r)
		}
	}
	return out
}

// statusWrites are op's writes of fleet c's status since t.
func (h *harness) statusWrites(op *operator, c fleetCase, t time.Time) []writeRecord {
	var out []writeRecord
	for _, r := range h.journal.since(op.name, t) {
		if r.Resource == "celldfleets" && r.Namespace == c.ns && r.Name == c.name && r.Sub == "status" {
			out = append(out, r)
		}
	}
	return out
}

func (h *harness) fleet(ctx context.Context, ns, name string) (*v1.CelldFleet, error) {
	u, err := h.dyn.Resource(fleetsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	f := &v1.CelldFleet{}
	return f, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, f)
}

// applyCRDs server-side applies every CRD in dir, as the new bundle's, and waits until each
// is Established with its versions served.
func (h *harness) applyCRDs(ctx context.Context, dir string) {
	h.t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		h.t.Fatalf("no CRDs in %s", dir)
	}
	var names []string
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			h.t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			h.t.Fatalf("%s: %v", file, err)
		}
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		body, err := json.Marshal(crd)
		if err != nil {
			h.t.Fatal(err)
		}
		force := true
		if _, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "olm", Force: &force}); err != nil {
			h.t.Fatalf("server-side apply CRD %s from %s: %v", crd.Name, file, err)
		}
		names = append(names, crd.Name)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, name := range names {
		err := wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			return err == nil && crdEstablished(crd), nil
		})
		if err != nil {
			h.t.Fatalf("CRD %s not Established within a minute of the apply", name)
		}
	}
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// snapshot is what the run compares across a phase.
type snapshot struct {
	fleets       map[string]*v1.CelldFleet
	claims       map[string]types.UID // ns/name -> UID
	pods         map[string]types.UID // ns/name -> UID
	templates    map[string]corev1.PodTemplateSpec
	revisions    map[string]string
	reservations map[string]*unstructured.Unstructured
	// children: the fleets' Services, NetworkPolicies and PodDisruptionBudgets by
	// kind/ns/name, for the report.
	children map[string]child
}

type child struct {
	labels, annotations map[string]string
	spec                string // JSON
}

// changes names what differs between two reads of a child: the label and annotation keys,
// and the spec.
func (a child) changes(b child) []string {
	var out []string
	for _, m := range []struct {
		what string
		x, y map[string]string
	}{{"label", a.labels, b.labels}, {"annotation", a.annotations, b.annotations}} {
		for k := range mergeKeys(anyMap(m.x), anyMap(m.y)) {
			if m.x[k] != m.y[k] {
				out = append(out, fmt.Sprintf("%s %s %q -> %q", m.what, k, m.x[k], m.y[k]))
			}
		}
	}
	if a.spec != b.spec {
		out = append(out, "spec "+a.spec+" -> "+b.spec)
	}
	sort.Strings(out)
	return out
}

func anyMap(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (h *harness) snapshot(ctx context.Context) *snapshot {
	h.t.Helper()
	s := &snapshot{fleets: map[string]*v1.CelldFleet{}, claims: map[string]types.UID{}, pods: map[string]types.UID{},
		templates: map[string]corev1.PodTemplateSpec{}, revisions: map[string]string{}, reservations: map[string]*unstructured.Unstructured{},
		children: map[string]child{}}
	for _, c := range fleetCases {
		key := c.ns + "/" + c.name
		f, err := h.fleet(ctx, c.ns, c.name)
		if err != nil {
			h.t.Fatal(err)
		}
		s.fleets[key] = f
		claims, err := h.cs.CoreV1().PersistentVolumeClaims(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		for _, cl := range claims.Items {
			s.claims[c.ns+"/"+cl.Name] = cl.UID
		}
		pods, err := h.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID + "=" + string(f.UID)})
		if err != nil {
			h.t.Fatal(err)
		}
		for _, p := range pods.Items {
			s.pods[c.ns+"/"+p.Name] = p.UID
		}
		h.children(ctx, c.ns, s.children)
		if c.layout == v1.BucketWorkloadDeployment {
			d, err := h.cs.AppsV1().Deployments(c.ns).Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				h.t.Fatal(err)
			}
			s.templates[key], s.revisions[key] = d.Spec.Template, deploymentRevision(d)
		} else {
			st, err := h.cs.AppsV1().StatefulSets(c.ns).Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				h.t.Fatal(err)
			}
			s.templates[key], s.revisions[key] = st.Spec.Template, st.Status.UpdateRevision
		}
	}
	res, err := h.dyn.Resource(reservationsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	for i := range res.Items {
		s.reservations[res.Items[i].GetName()] = &res.Items[i]
	}
	return s
}

// children records the namespace's Services, NetworkPolicies and PodDisruptionBudgets.
func (h *harness) children(ctx context.Context, ns string, into map[string]child) {
	h.t.Helper()
	svcs, err := h.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, o := range svcs.Items {
		into["Service/"+ns+"/"+o.Name] = child{o.Labels, o.Annotations, toJSON(o.Spec)}
	}
	nps, err := h.cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, o := range nps.Items {
		into["NetworkPolicy/"+ns+"/"+o.Name] = child{o.Labels, o.Annotations, toJSON(o.Spec)}
	}
	pdbs, err := h.cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, o := range pdbs.Items {
		into["PodDisruptionBudget/"+ns+"/"+o.Name] = child{o.Labels, o.Annotations, toJSON(o.Spec)}
	}
}

func deploymentRevision(d *appsv1.Deployment) string {
	return d.Annotations["deployment.kubernetes.io/revision"]
}

func (s *snapshot) summary() map[string]any {
	out := map[string]any{"claims": len(s.claims), "pods": len(s.pods), "reservations": len(s.reservations)}
	rev := map[string]string{}
	for k, v := range s.revisions {
		rev[k] = v
	}
	out["workloadRevisions"] = rev
	return out
}

// judgePhase compares the cluster before and after a phase, reports what changed and fails the
// test for anything unsafe the monitors could not see as one event.
func (h *harness) judgePhase(phase string, a, b *snapshot, op *operator, leaseAt, converged time.Time) map[string]any {
	t := h.t
	t.Helper()
	out := map[string]any{}
	for i, v := range h.mon.Violations() {
		if i == 10 {
			t.Errorf("%s: ... and more (see report.json)", phase)
			break
		}
		t.Errorf("%s: safety: %s", phase, v)
	}
	for key, uid := range a.claims {
		if b.claims[key] != uid {
			t.Errorf("%s: claim %s was %s, now %q: a member lost its disk", phase, key, uid, b.claims[key])
		}
	}
	for name, r := range a.reservations {
		n := b.reservations[name]
		if n == nil || n.GetUID() != r.GetUID() {
			t.Errorf("%s: reservation %s was replaced or deleted", phase, name)
			continue
		}
		if !equality.Semantic.DeepEqual(r.Object["spec"], n.Object["spec"]) {
			t.Errorf("%s: reservation %s spec changed:\n%s\n->\n%s", phase, name, toJSON(r.Object["spec"]), toJSON(n.Object["spec"]))
		}
	}
	var fleets []map[string]any
	mon := map[string]fleetReport{}
	for _, r := range h.mon.report() {
		mon[r.Fleet] = r
	}
	for _, c := range fleetCases {
		key := c.ns + "/" + c.name
		fa, fb := a.fleets[key], b.fleets[key]
		if fa.UID != fb.UID {
			t.Errorf("%s: fleet %s was recreated", phase, key)
		}
		changed := !equality.Semantic.DeepEqual(a.templates[key], b.templates[key])
		var replaced, kept []string
		for name, uid := range a.pods {
			if !strings.HasPrefix(name, c.ns+"/") {
				continue
			}
			if b.pods[name] == uid {
				kept = append(kept, name)
			} else {
				replaced = append(replaced, name)
			}
		}
		sort.Strings(replaced)
		if !changed && len(replaced) > 0 {
			t.Errorf("%s: fleet %s: members %v restarted although the template did not change", phase, key, replaced)
		}
		writes := h.statusWrites(op, c, leaseAt)
		fr := map[string]any{
			"fleet": key, "templateChanged": changed, "membersReplaced": len(replaced), "membersKept": len(kept),
			"revision": a.revisions[key] + " -> " + b.revisions[key], "maxMembersDown": mon[key].MaxMembersDown,
			"statusWrites": len(writes), "readyLeft": mon[key].ReadyLeft, "memberPodDeletes": mon[key].MemberPodDeletes,
			"statusChanges": statusDiff(fa, fb),
		}
		if changed {
			fr["templateDiff"] = templateDiff(a.templates[key], b.templates[key])
		}
		if len(writes) > 0 {
			fr["firstStatusWriteAfterLease"] = writes[0].At.Sub(leaseAt).Round(time.Millisecond).String()
		}
		fleets = append(fleets, fr)
		t.Logf("%s: %s: template changed %v, %d members replaced, %d kept, at most %d down at once, %d status writes by %s",
			phase, key, changed, len(replaced), len(kept), mon[key].MaxMembersDown, len(writes), op.name)
	}
	out["fleets"] = fleets
	out["convergedAfterLease"] = converged.Sub(leaseAt).Round(time.Millisecond).String()
	counts := map[string]int{}
	for _, r := range h.journal.since(op.name, leaseAt) {
		if r.Resource != "leases" {
			counts[r.Method+" "+r.Resource+ternary(r.Sub != "", "/"+r.Sub, "")]++
		}
	}
	out["operatorWrites"] = counts
	var resChanges []string
	for name, r := range a.reservations {
		if n := b.reservations[name]; n != nil && !equality.Semantic.DeepEqual(r.GetAnnotations(), n.GetAnnotations()) {
			resChanges = append(resChanges, name+": annotations "+toJSON(r.GetAnnotations())+" -> "+toJSON(n.GetAnnotations()))
		}
	}
	out["reservationChanges"] = resChanges
	var childChanges []string
	for k, v := range a.children {
		switch n, ok := b.children[k]; {
		case !ok:
			t.Errorf("%s: %s is gone", phase, k)
		case len(v.changes(n)) > 0:
			childChanges = append(childChanges, k+": "+strings.Join(v.changes(n), "; "))
		}
	}
	for k := range b.children {
		if _, ok := a.children[k]; !ok {
			childChanges = append(childChanges, k+" created")
		}
	}
	sort.Strings(childChanges)
	out["childChanges"] = childChanges
	return out
}

// statusDiff lists the status fields and conditions that differ between two reads of a fleet.
func statusDiff(a, b *v1.CelldFleet) []string {
	var out []string
	ca, cb := map[string]metav1.Condition{}, map[string]metav1.Condition{}
	for _, c := range a.Status.Conditions {
		ca[c.Type] = c
	}
	for _, c := range b.Status.Conditions {
		cb[c.Type] = c
	}
	for typ, c := range cb {
		o, ok := ca[typ]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("condition %s added: %s/%s", typ, c.Status, c.Reason))
		case o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message || o.ObservedGeneration != c.ObservedGeneration:
			out = append(out, fmt.Sprintf("condition %s: %s/%s -> %s/%s", typ, o.Status, o.Reason, c.Status, c.Reason))
		}
	}
	for typ := range ca {
		if _, ok := cb[typ]; !ok {
			out = append(out, "condition "+typ+" removed")
		}
	}
	sa, sb := a.Status.DeepCopy(), b.Status.DeepCopy()
	sa.Conditions, sb.Conditions = nil, nil
	var ma, mb map[string]any
	_ = json.Unmarshal([]byte(toJSON(sa)), &ma)
	_ = json.Unmarshal([]byte(toJSON(sb)), &mb)
	for k := range mergeKeys(ma, mb) {
		if !equality.Semantic.DeepEqual(ma[k], mb[k]) {
			out = append(out, "status."+k+" changed")
		}
	}
	sort.Strings(out)
	return out
}

func mergeKeys(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func ternary(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

func (h *harness) writeReport() {
	h.report["violations"] = h.mon.Violations()
	h.report["watchesResumed"] = h.mon.Resumes()
	b, _ := json.MarshalIndent(h.report, "", "  ")
	_ = os.WriteFile(filepath.Join(h.dir, "report.json"), b, 0o644)
	h.t.Logf("report: %s", filepath.Join(h.dir, "report.json"))
}
