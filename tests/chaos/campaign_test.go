// Package chaos runs the seeded fault campaign: the local cluster, two operator replicas with
// leader election behind recording proxies, fleets of every layout, a storm from
// tests/chaos/schedule, and continuous invariants that fail the run on the first violation.
// `make test-chaos` runs it (SEED=N replays a storm, DURATION lengthens it); docs/reliability.md
// says what it covers.
package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkingv1 "k8s.io/api/networking/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/celldsim"
	"github.com/celld/celld-operator/tests/chaos/schedule"
	"github.com/celld/celld-operator/tests/localcluster"
	"github.com/celld/celld-operator/tests/sidecarinjector"
)

// Bounds of the run, each justified where it is used.
const (
	// setupBound: three fleets Ready from nothing on a loaded two-core machine (about 20 s
	// idle).
	setupBound = 3 * time.Minute
	// convergeBound: every fleet Ready once the faults are healed. The slowest path after the
	// last action: a leader handoff (lease 15 s + retry 2 s), a fleet re-created at the very
	// end (about 20 s to Ready), a member that went down just before the end replaced after
	// the replacement delay (20 s) and the absorb window (8 s), then a full rollout of the
	// largest fleet (5 members, about 4 s each with the 2 s shutdown): about 100 s on an idle
	// machine. Twice that, rounded up, for a machine shared with other builds. A mesh-off that
	// falls at the very end is such a rollout (every member leaves the mesh, one at a time).
	convergeBound = 4 * time.Minute
	// deletionBound: a deleted fleet is released (workload drained with a 10 s grace, claims
	// deleted, finalizer removed) within this, even with a leader handoff in the middle.
	deletionBound = 2 * time.Minute
)

// campaign is one run.
type campaign struct {
	seed    int64
	cfg     schedule.Config
	fleets  []*campaignFleet
	cs      kubernetes.Interface
	dyn     dynamic.Interface
	cl      client.Client
	faults  *localcluster.Faults
	ops     *operators
	mon     *monitor
	cluster *localcluster.Cluster
	// injector stands in for Istio's sidecar injector in every fleet namespace (mesh_test.go)
	injector *sidecarinjector.Injector
	// runCtx outlives the storm: an API server restart the storm started finishes in it.
	runCtx    context.Context
	log       *operatorLog
	dir       string
	openers   map[int]func()
	unhealthy map[int]string
	stops     map[int]chan struct{} // a full stop's scaling, by its action's Seq

	mu      sync.Mutex
	actions []string
}

func (c *campaign) logf(format string, args ...any) {
	line := time.Now().Format("15:04:05.000") + " " + fmt.Sprintf(format, args...)
	c.mu.Lock()
	c.actions = append(c.actions, line)
	if f, err := os.OpenFile(filepath.Join(c.dir, "actions.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		_, _ = f.WriteString(line + "\n")
		_ = f.Close()
	}
	c.mu.Unlock()
	fmt.Println("chaos:", line)
}

func (c *campaign) actionLog() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.actions...)
}

// TestCampaign is the campaign. CELLD_CHAOS_SEED (default: random, printed) picks the storm,
// CELLD_CHAOS_DURATION (default 3m) its length, CELLD_CHAOS_OPERATOR_BINARY the operator
// (default bin/manager).
func TestCampaign(t *testing.T) {
	seed := envSeed(t)
	duration := envDuration(t, "CELLD_CHAOS_DURATION", 3*time.Minute)
	weights, err := schedule.ParseWeights(os.Getenv("CELLD_CHAOS_WEIGHTS"), schedule.DefaultWeights)
	if err != nil {
		t.Fatalf("CELLD_CHAOS_WEIGHTS: %v", err)
	}
	fmt.Printf("chaos: seed %d, storm %s (replay: %s)\n", seed, duration, replayCommand(seed, duration, weights))
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("CELLD_CHAOS_OPERATOR_BINARY")
	if bin == "" {
		bin = filepath.Join(root, "bin", "manager")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the operator binary %s is missing: run make build (or make test-chaos, which builds it)", bin)
	}
	dir := os.Getenv("CELLD_CHAOS_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "celld-chaos", fmt.Sprintf("%d-%d", seed, os.Getpid()))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fmt.Println("chaos: artifacts in", dir)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{Dir: filepath.Join(dir, "cluster"), Log: os.Stderr, StartTimeout: 4 * time.Minute})
	if err != nil {
		t.Fatalf("start the local cluster: %v", err)
	}
	defer cluster.Stop()
	cfg := cluster.RESTConfig()
	if err := localcluster.InstallCRDs(ctx, cfg, root, localcluster.OperatorCRDs...); err != nil {
		t.Fatalf("install CRDs: %v", err)
	}
	c, err := newCampaign(seed, duration, cluster, dir)
	if err != nil {
		t.Fatal(err)
	}
	c.cfg.Weights, c.runCtx = weights, ctx
	stormCtx, stopStorm := context.WithCancel(ctx)
	defer stopStorm()
	c.mon = newMonitor(stopStorm)
	c.log, err = newOperatorLog(filepath.Join(dir, "operator.log"), c.mon.scanLogLine)
	if err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		report := c.report(fmt.Sprintf(format, args...))
		_ = os.WriteFile(filepath.Join(dir, "report.txt"), []byte(report), 0o644)
		t.Fatal(report)
	}

	defer c.stopInjector()
	if err := c.setup(ctx); err != nil {
		fail("setup: %v", err)
	}
	if err := c.mon.start(stormCtx, c); err != nil {
		fail("monitor: %v", err)
	}
	c.ops, err = startOperators(ctx, cfg, bin, dir, 2, c.log, c.mon.onWrite)
	if err != nil {
		fail("operators: %v", err)
	}
	defer c.ops.StopAll()
	if err := c.createFleets(ctx); err != nil {
		fail("create fleets: %v", err)
	}
	if err := c.waitReady(stormCtx, setupBound); err != nil {
		fail("the fleets were not Ready before the storm within %s: %v", setupBound, err)
	}

	plan := schedule.Generate(seed, c.cfg)
	fmt.Printf("chaos: %d actions\n", len(plan))
	start := time.Now()
	executed := 0
	played := map[schedule.Kind]int{}
	for _, a := range plan {
		select {
		case <-stormCtx.Done():
		case <-time.After(time.Until(start.Add(a.At))):
		}
		if stormCtx.Err() != nil {
			break
		}
		c.logf("%s -> %s", a.Describe(c.cfg), c.execute(stormCtx, a))
		executed++
		played[a.Kind]++
	}
	// The storm lasts its whole duration: the last closers' effects are watched too.
	select {
	case <-stormCtx.Done():
	case <-time.After(time.Until(start.Add(c.cfg.Duration))):
	}
	if v := c.mon.Violation(); v != "" {
		fail("%s", v)
	}
	c.logf("storm over after %d actions in %s; healing every fault", executed, time.Since(start).Round(time.Second))
	if err := c.heal(stormCtx); err != nil {
		fail("heal: %v", err)
	}
	if err := c.converge(stormCtx); err != nil {
		if v := c.mon.Violation(); v != "" {
			fail("%s", v)
		}
		fail("[%s] %v", ruleConvergence, err)
	}
	// every replacement announced during the storm or the convergence has delivered its fresh
	// disk by now: judged on a fresh read of each claim still awaited
	if err := c.mon.finishFreshDisks(stormCtx); err != nil {
		fail("[%s] read the claims still awaited: %v", ruleFreshDisk, err)
	}
	if v := c.mon.Violation(); v != "" {
		fail("%s", v)
	}
	c.summary(executed, played)
}

func newCampaign(seed int64, duration time.Duration, cluster *localcluster.Cluster, dir string) (*campaign, error) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	cfg := cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 100, 200
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	c := &campaign{
		seed: seed, cluster: cluster, cs: cs, dyn: dynamic.NewForConfigOrDie(cfg), cl: cl, faults: localcluster.NewFaults(cs), dir: dir,
		openers: map[int]func(){}, unhealthy: map[int]string{}, stops: map[int]chan struct{}{},
	}
	layouts := []struct {
		fleet  schedule.Fleet
		layout string
	}{
		// At least one member per zone (the API refuses fewer replicas than azCount).
		// Every layout may join the mesh: the API admits spec.mesh on each, and the campaign's
		// sidecar injector serves every fleet namespace.
		{schedule.Fleet{Name: "pf", Persistent: true, Replicas: 3, MinReplicas: 3, MaxReplicas: 5, Meshable: true}, "PersistentFleet"},
		{schedule.Fleet{Name: "dep", Replicas: 3, MinReplicas: 3, MaxReplicas: 4, Meshable: true}, "Bucket/Deployment"},
		{schedule.Fleet{Name: "ord", Replicas: 3, MinReplicas: 3, MaxReplicas: 4, Meshable: true}, "Bucket/Ordered"},
	}
	for _, l := range layouts {
		ns := fmt.Sprintf("chaos-%s-%d", l.fleet.Name, seed%1_000_000)
		c.fleets = append(c.fleets, &campaignFleet{spec: l.fleet, layout: l.layout, ns: ns, bucket: ns + "-" + l.fleet.Name})
		c.cfg.Fleets = append(c.cfg.Fleets, l.fleet)
	}
	c.cfg.Duration, c.cfg.MeanGap = duration, 3*time.Second
	c.cfg.Nodes, c.cfg.Zones = cluster.Nodes(), cluster.Zones()
	c.cfg.Weights = schedule.DefaultWeights
	// Holds up to 45 s: a node failure that long is seen NotReady (20 s grace) and its members
	// outlast the replacement delay (20 s), so both the force-delete and the replacement paths
	// are exercised; shorter holds test a fault that heals before the operator acts.
	c.cfg.MinHold, c.cfg.MaxHold = 5*time.Second, 45*time.Second
	// An API server restart takes 10-20 s on an idle machine, 35 s on a loaded one; the
	// runner waits for it to serve again before it plays the next action.
	c.cfg.APIRestartQuiet = 40 * time.Second
	return c, nil
}

// setup creates the operator namespace and each fleet's namespace, ServiceAccount and Secret,
// and starts the sidecar injector for the fleet namespaces.
func (c *campaign) setup(ctx context.Context) error {
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, f := range c.fleets {
		if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "celld-runtime"}}
		if _, err := c.cs.CoreV1().ServiceAccounts(f.ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			return err
		}
		token := make([]byte, 16)
		_, _ = rand.Read(token)
		f.secret = "chaos-secret-" + hex.EncodeToString(token)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "chaos-env"}, StringData: map[string]string{"token": f.secret}}
		if _, err := c.cs.CoreV1().Secrets(f.ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return err
		}
		c.mon.addFleet(f.ns, f.spec.Name, f.layout != "Bucket/Deployment", f.secret)
	}
	return c.startInjector(ctx)
}

func (c *campaign) createFleets(ctx context.Context) error {
	for _, f := range c.fleets {
		if err := c.cl.Create(ctx, f.render()); err != nil {
			return fmt.Errorf("create %s/%s: %w", f.ns, f.spec.Name, err)
		}
	}
	return nil
}

// waitReady polls until every fleet reports Ready/Provisioned for its generation with every
// declared member ready, or bound passes.
func (c *campaign) waitReady(ctx context.Context, bound time.Duration) error {
	return c.waitFleets(ctx, bound, c.readiness)
}

// waitFleets polls until check returns "" for every fleet, or bound passes; check says why a
// fleet is not there yet.
func (c *campaign) waitFleets(ctx context.Context, bound time.Duration, check func(context.Context, *campaignFleet) string) error {
	deadline := time.Now().Add(bound)
	for {
		var notReady []string
		for _, f := range c.fleets {
			if why := check(ctx, f); why != "" {
				notReady = append(notReady, why)
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %s", bound, strings.Join(notReady, "; "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped: %s", strings.Join(notReady, "; "))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// readiness returns "" when f is Ready as declared, else why not.
func (c *campaign) readiness(ctx context.Context, f *campaignFleet) string {
	fl := &v1.CelldFleet{}
	if err := c.cl.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.spec.Name}, fl); err != nil {
		return fmt.Sprintf("%s/%s: %v", f.ns, f.spec.Name, err)
	}
	ready := meta.FindStatusCondition(fl.Status.Conditions, v1.ConditionReady)
	want := int32(3)
	if fl.Spec.Replicas != nil {
		want = *fl.Spec.Replicas
	}
	switch {
	case ready == nil:
		return fmt.Sprintf("%s/%s: no Ready condition", f.ns, f.spec.Name)
	case ready.Status != metav1.ConditionTrue || ready.Reason != v1.ReasonProvisioned:
		return fmt.Sprintf("%s/%s: Ready %s/%s: %s", f.ns, f.spec.Name, ready.Status, ready.Reason, ready.Message)
	case fl.Status.ObservedGeneration != fl.Generation:
		return fmt.Sprintf("%s/%s: generation %d not observed (%d)", f.ns, f.spec.Name, fl.Generation, fl.Status.ObservedGeneration)
	case fl.Status.ReadyReplicas != want:
		return fmt.Sprintf("%s/%s: %d of %d members ready", f.ns, f.spec.Name, fl.Status.ReadyReplicas, want)
	}
	return ""
}

// heal ends whatever the schedule left open (nothing, by its constraints, but a skipped
// closer or a stopped storm can), clears the knob of every crash-loop-member whose Pod is still
// there (that fault has no closer), and brings every operator replica back.
func (c *campaign) heal(ctx context.Context) error {
	for _, n := range c.cfg.Nodes {
		if err := c.faults.RecoverNode(ctx, n); err != nil {
			return err
		}
	}
	for _, z := range c.cfg.Zones {
		if err := c.faults.UncordonZone(ctx, z); err != nil {
			return err
		}
	}
	c.mon.setCordon(false)
	for seq := range c.openers {
		c.close(seq)
	}
	for _, f := range c.fleets {
		pods, err := c.cs.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if _, ok := p.Annotations[celldsim.AnnotationPrefix+celldsim.KnobHealthMode]; ok {
				if err := ignoreNotFound(c.faults.Unhealthy(ctx, f.ns, p.Name, false)); err != nil {
					return err
				}
			}
			// a crash-loop-member whose member was not replaced (nor recreated) still exits at
			// every start: without the override its next start, a second later, serves
			if _, ok := p.Annotations[celldsim.AnnotationPrefix+celldsim.KnobCrashAfterMS]; ok {
				if err := ignoreNotFound(c.faults.SetKnob(ctx, f.ns, p.Name, celldsim.KnobCrashAfterMS, "")); err != nil {
					return err
				}
				c.logf("heal: %s/%s no longer exits at every start", f.ns, p.Name)
			}
		}
	}
	return c.ops.EnsureRunning()
}

// converge is invariant f: every fleet Ready within convergeBound, its mesh objects matching
// spec.mesh within meshSettleBound after that, the children the rogue writer edited restored,
// and every earlier fleet of each namespace released with its claims.
func (c *campaign) converge(ctx context.Context) error {
	t0 := time.Now()
	if err := c.waitReady(ctx, convergeBound); err != nil {
		return err
	}
	c.logf("every fleet Ready %s after the storm", time.Since(t0).Round(100*time.Millisecond))
	c.mon.mu.Lock()
	c.mon.checks[ruleConvergence] += len(c.fleets)
	c.mon.mu.Unlock()
	if err := c.waitFleets(ctx, meshSettleBound, c.meshSettled); err != nil {
		return fmt.Errorf("mesh objects disagree with spec.mesh once every fleet was Ready: %w", err)
	}
	c.mon.mu.Lock()
	c.mon.checks[ruleConvergence] += len(c.fleets)
	c.mon.mu.Unlock()
	for _, f := range c.fleets {
		np := &networkingv1.NetworkPolicy{}
		if err := c.cl.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.spec.Name}, np); err != nil {
			return err
		}
		if _, rogue := np.Spec.PodSelector.MatchLabels["chaos.celld.eric.dev/rogue"]; rogue {
			return fmt.Errorf("NetworkPolicy %s/%s still carries the rogue writer's selector", f.ns, f.spec.Name)
		}
		pdb := &policyv1.PodDisruptionBudget{}
		if err := c.cl.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.spec.Name}, pdb); err != nil {
			return err
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			return fmt.Errorf("PDB %s/%s maxUnavailable is %v, not the rendered 1", f.ns, f.spec.Name, pdb.Spec.MaxUnavailable)
		}
		// every routing-on was closed by its routing-off: the route and its policy are pruned
		if _, err := c.dyn.Resource(schemaGVR("gateway.networking.k8s.io", "httproutes")).Namespace(f.ns).Get(ctx, f.spec.Name+"-routing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("HTTPRoute %s/%s-routing outlived the fleet's routing (%v)", f.ns, f.spec.Name, err)
		}
		if err := c.cl.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.spec.Name + "-routing"}, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NetworkPolicy %s/%s-routing outlived the fleet's routing (%v)", f.ns, f.spec.Name, err)
		}
		fl := &v1.CelldFleet{}
		if err := c.cl.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.spec.Name}, fl); err != nil {
			return err
		}
		claims := &corev1.PersistentVolumeClaimList{}
		if err := c.cl.List(ctx, claims, client.InNamespace(f.ns)); err != nil {
			return err
		}
		for _, cl := range claims.Items {
			if owner := cl.Labels[v1.LabelFleetUID]; owner != string(fl.UID) {
				return fmt.Errorf("claim %s/%s of an earlier fleet (UID %s) is left after its deletion", f.ns, cl.Name, owner)
			}
		}
	}
	return nil
}

// report is what a failure prints: the seed, the replay command, the action log and the last
// minute of operator log.
func (c *campaign) report(reason string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nCHAOS CAMPAIGN FAILED, seed %d\n%s\n\nreplay: %s\nartifacts: %s\n\n",
		c.seed, reason, replayCommand(c.seed, c.cfg.Duration, c.cfg.Weights), c.dir)
	b.WriteString("action log:\n")
	for _, l := range c.actionLog() {
		b.WriteString("  " + l + "\n")
	}
	if c.log != nil {
		b.WriteString("\nlast minute of operator log:\n")
		for _, l := range c.log.Last(time.Minute) {
			b.WriteString("  " + l + "\n")
		}
	}
	if c.mon != nil {
		b.WriteString("\ninvariant checks so far:\n" + formatChecks(c.mon.Checks()))
	}
	b.WriteString(componentRestarts(c.cluster))
	return b.String()
}

// componentRestarts says which control-plane components exited on their own during the run and
// were started again by the local cluster, as a kubelet restarts a static Pod.
func componentRestarts(cl *localcluster.Cluster) string {
	if cl == nil {
		return ""
	}
	var b strings.Builder
	for _, r := range cl.ComponentRestarts() {
		fmt.Fprintf(&b, "  control plane: %s\n", r)
	}
	return b.String()
}

func (c *campaign) summary(executed int, played map[schedule.Kind]int) {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: seed %d passed: %d actions in a storm of %s\n", c.seed, executed, c.cfg.Duration)
	var kinds []string
	for _, k := range schedule.Kinds {
		if played[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, played[k]))
		}
	}
	fmt.Fprintf(&b, "  played: %s\n", strings.Join(kinds, ", "))
	b.WriteString(formatChecks(c.mon.Checks()))
	for _, h := range c.ops.Handoffs() {
		fmt.Fprintf(&b, "  leader handoff after %s of replica %d: replica %d wrote the lease %s later\n", h.Cause, h.From, h.To, h.Took.Round(time.Millisecond))
	}
	c.mon.mu.Lock()
	fmt.Fprintf(&b, "  judgements where the operator had a member down while a fault had another down (allowed, counted): %d\n", c.mon.opDownSeen)
	fmt.Fprintf(&b, "  claim deletes justified by the operator's log only, no event (see docs/reliability.md): %d\n", c.mon.eventless)
	fmt.Fprintf(&b, "  generations of a meshed fleet seen Provisioned with every member proxied: %d\n", c.mon.meshJoined)
	b.WriteString(c.mon.freshDiskSummary())
	c.mon.mu.Unlock()
	if c.injector != nil {
		fmt.Fprintf(&b, "  Pod creates the sidecar injector gave a proxy: %d\n", c.injector.Admissions())
	}
	if exits := c.ops.Exits(); len(exits) > 0 {
		var at []string
		for _, e := range exits {
			at = append(at, fmt.Sprintf("r%d %s (%s)", e.Replica, e.At.Format("15:04:05"), e.Err))
		}
		fmt.Fprintf(&b, "  replica processes that exited on their own and were restarted: %d: %s\n", len(exits), strings.Join(at, ", "))
	}
	b.WriteString(componentRestarts(c.cluster))
	c.mon.mu.Lock()
	if d := c.mon.diagnostics(); d != "" {
		b.WriteString("what the monitor saw of the API server, its watches and the Nodes:\n" + d)
	}
	c.mon.mu.Unlock()
	fmt.Print(b.String())
	_ = os.WriteFile(filepath.Join(c.dir, "summary.txt"), []byte(b.String()+"\n"+strings.Join(c.actionLog(), "\n")+"\n"), 0o644)
}

// replayCommand is the make invocation that plays the same storm.
func replayCommand(seed int64, duration time.Duration, weights map[schedule.Kind]int) string {
	cmd := fmt.Sprintf("make test-chaos SEED=%d DURATION=%s", seed, duration)
	var changed []string
	for _, k := range schedule.Kinds {
		if weights[k] != schedule.DefaultWeights[k] {
			changed = append(changed, fmt.Sprintf("%s=%d", k, weights[k]))
		}
	}
	if len(changed) > 0 {
		cmd += " WEIGHTS=" + strings.Join(changed, ",")
	}
	return cmd
}

func formatChecks(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	total := 0
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-90s %d checks\n", k, m[k])
		total += m[k]
	}
	fmt.Fprintf(&b, "  total %d invariant checks\n", total)
	return b.String()
}

func envSeed(t *testing.T) int64 {
	if s := os.Getenv("CELLD_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("CELLD_CHAOS_SEED=%q: %v", s, err)
		}
		return n
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<31))
	return n.Int64()
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return d
}

func schemaGVR(group, resource string) schema.GroupVersionResource {
	version := "v1"
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}
