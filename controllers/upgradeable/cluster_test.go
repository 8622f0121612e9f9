package upgradeable

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	olmcrds "github.com/operator-framework/api/crds"
	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/tests/apiserver"
)

// These tests run against a real kube-apiserver with the CelldFleet CRD and the
// OperatorCondition CRD as operator-framework/api ships it (the CRD OLM installs).

var (
	cfg    *rest.Config
	admin  client.Client
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, apiv2.AddToScheme} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	dir, err := os.MkdirTemp("", "olm-crds-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	raw, err := yaml.Marshal(olmcrds.OperatorCondition())
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "operatorconditions.yaml"), raw, 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var stop func()
	cfg, stop, err = apiserver.Start("config/crd/bases", dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// namedFactory locates the OperatorCondition by a fixed key. operator-lib's InClusterFactory,
// which main.go uses, reads the namespace from the Pod's ServiceAccount mount, which a test
// process has not; its conditions behave as opCondition does: read the object, set the one
// condition type in spec.conditions with meta.SetStatusCondition, update.
type namedFactory struct {
	c   client.Client
	key types.NamespacedName
}

func (f namedFactory) GetNamespacedName() (*types.NamespacedName, error) { return &f.key, nil }

func (f namedFactory) NewCondition(t apiv2.ConditionType) (conditions.Condition, error) {
	return &opCondition{c: f.c, key: f.key, t: t}, nil
}

type opCondition struct {
	c   client.Client
	key types.NamespacedName
	t   apiv2.ConditionType
}

func (o *opCondition) Get(ctx context.Context) (*metav1.Condition, error) {
	oc := &apiv2.OperatorCondition{}
	if err := o.c.Get(ctx, o.key, oc); err != nil {
		return nil, err
	}
	if c := meta.FindStatusCondition(oc.Spec.Conditions, string(o.t)); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("conditionType %v not found", o.t)
}

func (o *opCondition) Set(ctx context.Context, s metav1.ConditionStatus, opts ...conditions.Option) error {
	oc := &apiv2.OperatorCondition{}
	if err := o.c.Get(ctx, o.key, oc); err != nil {
		return err
	}
	c := metav1.Condition{Type: string(o.t), Status: s}
	for _, opt := range opts {
		opt(&c)
	}
	meta.SetStatusCondition(&oc.Spec.Conditions, c)
	return o.c.Update(ctx, oc)
}

// directPods reads Pods from the API server for the namespaces listed.
type directPods struct {
	c  client.Client
	ns []string
}

func (d directPods) Namespaces() []string { return d.ns }
func (d directPods) Reader(context.Context, string) (client.Reader, error) {
	return d.c, nil
}

// recorder notes the path of every request a manager sends.
type recorder struct {
	mu    sync.Mutex
	paths []string
}

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.paths = append(r.paths, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (r *recorder) matching(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.paths {
		if strings.Contains(p, s) {
			out = append(out, p)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := admin.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// startManager runs a manager over rec's recording config until the test ends.
func startManager(t *testing.T, rec *recorder, add func(ctrl.Manager)) {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Wrap(rec.wrap)
	mgr, err := ctrl.NewManager(c, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	add(mgr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("the manager's cache did not sync")
	}
}

func operatorCondition(t *testing.T, ns string) *apiv2.OperatorCondition {
	t.Helper()
	oc := &apiv2.OperatorCondition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "celld-operator.v0.2.0"},
		Spec: apiv2.OperatorConditionSpec{Deployments: []string{"celld-operator"}, ServiceAccounts: []string{"celld-operator"}}}
	if err := admin.Create(t.Context(), oc); err != nil {
		t.Fatal(err)
	}
	return oc
}

// waitUpgradeable polls the OperatorCondition until its Upgradeable condition satisfies ok.
func waitUpgradeable(t *testing.T, key types.NamespacedName, what string, ok func(*metav1.Condition) bool) *metav1.Condition {
	t.Helper()
	var last *metav1.Condition
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		oc := &apiv2.OperatorCondition{}
		if err := admin.Get(ctx, key, oc); err != nil {
			return false, err
		}
		last = meta.FindStatusCondition(oc.Spec.Conditions, apiv2.Upgradeable)
		return last != nil && ok(last), nil
	})
	if err != nil {
		t.Fatalf("Upgradeable never became %s within 30s (%v); last %+v", what, err, last)
	}
	return last
}

func setProgressing(t *testing.T, f *v1.CelldFleet, s metav1.ConditionStatus, reason string) {
	t.Helper()
	if err := admin.Get(t.Context(), client.ObjectKeyFromObject(f), f); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&f.Status.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: s, Reason: reason, Message: "test"})
	if err := admin.Status().Update(t.Context(), f); err != nil {
		t.Fatal(err)
	}
}

func TestUpgradeableFollowsFleets(t *testing.T) {
	opNS, fleetNS := namespace(t, "olm-op-"), namespace(t, "fleets-")
	oc := operatorCondition(t, opNS)
	key := client.ObjectKeyFromObject(oc)
	t.Setenv(EnvConditionName, oc.Name)
	rec := &recorder{}
	startManager(t, rec, func(mgr ctrl.Manager) {
		// the condition's client goes through the recording config, as main.go's does
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		added, err := Add(mgr, Options{Factory: namedFactory{c: direct, key: key}, Pods: directPods{c: admin, ns: []string{fleetNS}}, Interval: 200 * time.Millisecond})
		if err != nil || !added {
			t.Fatalf("Add under OLM: added %v, %v", added, err)
		}
	})
	settled := func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue && c.Reason == ReasonSettled }
	waitUpgradeable(t, key, "True with no fleet", settled)

	f := corpus.Bucket()
	f.Namespace, f.Name = fleetNS, "web"
	if err := admin.Create(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	setProgressing(t, f, metav1.ConditionTrue, v1.ReasonProvisioning)
	// Provisioning is not a handoff, but the write after it must come from a decision that saw
	// the fleet: the rollout below flips it.
	setProgressing(t, f, metav1.ConditionTrue, v1.ReasonLifecycleProgress)
	named := func(name, why string) func(*metav1.Condition) bool {
		return func(c *metav1.Condition) bool {
			return c.Status == metav1.ConditionFalse && c.Reason == ReasonMidHandoff && strings.Contains(c.Message, fleetNS+"/"+name+" ("+why+")")
		}
	}
	c := waitUpgradeable(t, key, "False naming the rolling fleet", named("web", Rollout))
	t.Logf("during the rollout: %s", c.Message)
	setProgressing(t, f, metav1.ConditionFalse, v1.ReasonProvisioned)
	waitUpgradeable(t, key, "True after the rollout", settled)

	// A member Pod held by a replacement handoff, as fleet/handoff.go holds it.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: "web-0",
		Labels:     map[string]string{v1.LabelFleetUID: string(f.UID), v1.LabelReplacementFleet: string(f.UID)},
		Finalizers: []string{v1.FinalizerReplacingDisk}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "celld", Image: corpus.Image}}}}
	if err := admin.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	waitUpgradeable(t, key, "False naming the fleet whose member is held", named("web", Replacement))
	delete(pod.Labels, v1.LabelReplacementFleet)
	pod.Finalizers = nil
	if err := admin.Update(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	waitUpgradeable(t, key, "True after the handoff is released", settled)

	// Deletion: a finalizer keeps the fleet while it is deleting, as the reconciler's does.
	if err := admin.Get(t.Context(), client.ObjectKeyFromObject(f), f); err != nil {
		t.Fatal(err)
	}
	controllerutil.AddFinalizer(f, "test.celld.eric.dev/hold")
	if err := admin.Update(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	waitUpgradeable(t, key, "False naming the deleting fleet", named("web", Deleting))
	if err := admin.Get(t.Context(), client.ObjectKeyFromObject(f), f); err != nil {
		t.Fatal(err)
	}
	f.Finalizers = nil
	if err := admin.Update(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	waitUpgradeable(t, key, "True once the fleet is gone", settled)

	// The runnable writes only on change: two flips are two updates, however many fleet events
	// and ticks come between them.
	before := len(rec.matching("PUT /apis/operators.coreos.com/v2/namespaces/" + opNS + "/operatorconditions/"))
	g := corpus.Bucket()
	g.Namespace, g.Name = fleetNS, "quiet"
	if err := admin.Create(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	setProgressing(t, g, metav1.ConditionTrue, v1.ReasonLifecycleProgress)
	waitUpgradeable(t, key, "False for the second fleet", named("quiet", Rollout))
	setProgressing(t, g, metav1.ConditionFalse, v1.ReasonProvisioned)
	waitUpgradeable(t, key, "True again", settled)
	if n := len(rec.matching("PUT /apis/operators.coreos.com/v2/namespaces/"+opNS+"/operatorconditions/")) - before; n != 2 {
		t.Fatalf("two verdict changes sent %d OperatorCondition updates, want 2", n)
	}
}

func TestNothingOutsideOLM(t *testing.T) {
	opNS, fleetNS := namespace(t, "no-olm-"), namespace(t, "fleets-")
	oc := operatorCondition(t, opNS)
	t.Setenv(EnvConditionName, "")
	rec := &recorder{}
	startManager(t, rec, func(mgr ctrl.Manager) {
		added, err := Add(mgr, Options{Pods: directPods{c: admin, ns: []string{fleetNS}}, Interval: 100 * time.Millisecond})
		if err != nil || added {
			t.Fatalf("without %s Add must add nothing: added %v, %v", EnvConditionName, added, err)
		}
	})
	f := corpus.Bucket()
	f.Namespace, f.Name = fleetNS, "web"
	if err := admin.Create(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	setProgressing(t, f, metav1.ConditionTrue, v1.ReasonLifecycleProgress)
	if got := rec.matching("operatorconditions"); len(got) > 0 {
		t.Fatalf("outside OLM the operator sent OperatorCondition requests: %v", got)
	}
	if err := admin.Get(t.Context(), client.ObjectKeyFromObject(oc), oc); err != nil {
		t.Fatal(err)
	}
	if len(oc.Spec.Conditions) != 0 {
		t.Fatalf("outside OLM the OperatorCondition was written: %+v", oc.Spec.Conditions)
	}
}
