package rbac

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/celld/celld-operator/controllers/application"
	"github.com/celld/celld-operator/controllers/fleet"
	"github.com/celld/celld-operator/controllers/preview"
	"github.com/celld/celld-operator/controllers/watches"
	helmcharts "github.com/celld/celld-operator/helm-charts"
	"github.com/celld/celld-operator/internal/opmetrics"
	"github.com/celld/celld-operator/internal/testsupport/syncbuf"
	"github.com/celld/celld-operator/tests/localcluster"
)

// leaseName is main.go's LeaderElectionID.
const leaseName = "celld-operator.celld.eric.dev"

// operatorOptions are fleet.DefaultOptions with the attestation on, the local cluster's
// provisioner and short timers, for the operator identity of src.
func operatorOptions(src *rbacSource) fleet.Options {
	o := fleet.DefaultOptions()
	o.NetworkPolicyEnforced = true
	o.StorageProvisioners = []string{localcluster.ProvisionerName}
	o.OperatorNamespace = src.operatorNamespace
	o.OperatorServiceAccount = src.serviceAccount
	o.WaitingRequeue = 3 * time.Second
	o.MemberReplacementDelay = 20 * time.Second
	o.AbsorbWindow = 8 * time.Second
	o.TerminationMargin = 5 * time.Second
	o.NodeLossTolerationSeconds = new(int64(5))
	return o
}

// operator is one in-process operator running as the ServiceAccount of an RBAC source.
type operator struct {
	src    *rbacSource
	rec    *recorder
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
	// expectDenied marks the 403s a test expects (a namespace without the fleet Role).
	expectDenied func(call) bool
	// metricsAddr is where the operator serves /metrics, as main.go does by default: HTTPS,
	// authenticated and authorized through the API server with the operator's identity.
	metricsAddr string
}

// startOperator runs the operator as main.go wires it (a cache over src's watch namespaces or
// the whole cluster, leader election in the operator namespace, the CelldFleet controller)
// with a bound token of src's ServiceAccount, and waits until it leads. expectDenied (may be
// nil) marks expected 403s. t.Cleanup stops it, checks that it released the lease, and fails
// the test on any unexpected 403 or Forbidden log line.
func startOperator(ctx context.Context, t *testing.T, src *rbacSource, expectDenied func(call) bool) *operator {
	t.Helper()
	cfg := serviceAccountConfig(ctx, t, src)
	op := &operator{src: src, rec: newRecorder(), logs: &syncBuffer{}, done: make(chan error, 1), expectDenied: expectDenied,
		metricsAddr: freeLocalAddr(t)}
	cfg.Wrap(op.rec.wrap)
	// main.go reads its settings from this ConfigMap by name before it creates the manager
	// (config.go); the scenarios create none, so the answer is NotFound, and a 403 fails.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(src.operatorNamespace).Get(ctx, "celld-operator-config", metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("read the operator ConfigMap as main.go does: %v", err)
	}

	ws, err := watches.Load(os.DirFS(root), "watches.yaml", helmcharts.FS)
	if err != nil {
		t.Fatal(err)
	}
	logger := zap.New(zap.WriteTo(op.logs), zap.UseDevMode(false))
	// main.go restricts the cache to WATCH_NAMESPACE, which OLM fills from the OperatorGroup's
	// target namespaces.
	cacheOpts := cache.Options{}
	if len(src.watchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range src.watchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Logger:                        logger,
		Metrics:                       opmetrics.ServerOptions(opmetrics.Serving{BindAddress: op.metricsAddr, Secure: true}),
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              leaseName,
		LeaderElectionNamespace:       src.operatorNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Each test runs its own operator in this process; the controller name repeats.
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	if err != nil {
		t.Fatalf("create the manager: %v", err)
	}
	if err := opmetrics.RegisterBuildInfo(crmetrics.Registry, "rbac-test"); err != nil {
		t.Fatal(err)
	}
	r, err := fleet.New(mgr, operatorOptions(src), ws)
	if err != nil {
		t.Fatalf("fleet.New: %v", err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("SetupWithManager: %v", err)
	}
	if err := preview.Setup(mgr, r.Direct, 2); err != nil {
		t.Fatalf("preview.Setup: %v", err)
	}
	// main.go also runs the leader-only /state observer, which reads workloads, ReplicaSets and
	// Pods and writes status.application.
	ao := application.DefaultOptions()
	ao.Interval = 2 * time.Second
	if err := application.Add(mgr, ao, r.Caches); err != nil {
		t.Fatalf("application.Add: %v", err)
	}
	globalLog.set(op.logs)
	runCtx, cancel := context.WithCancel(context.Background())
	op.cancel = cancel
	go func() { op.done <- mgr.Start(runCtx) }()
	t.Cleanup(func() { op.stop(t) })

	select {
	case <-mgr.Elected():
	case err := <-op.done:
		op.done <- err
		t.Fatalf("the operator stopped before it led: %v%s", err, describeDenied(op.rec.deniedCalls(nil)))
	case <-time.After(30 * time.Second):
		t.Fatalf("the operator did not win leader election in 30s%s\n%s", describeDenied(op.rec.deniedCalls(nil)), op.logs.errors())
	}
	lease := &coordinationv1.Lease{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: src.operatorNamespace, Name: leaseName}, lease); err != nil {
		t.Fatalf("the leader's Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("the operator leads but Lease %s/%s names no holder", src.operatorNamespace, leaseName)
	}
	return op
}

// serviceAccountConfig returns a rest.Config that authenticates as src's ServiceAccount with
// a bound token from the TokenRequest API, and checks the identity with a SelfSubjectReview.
func serviceAccountConfig(ctx context.Context, t *testing.T, src *rbacSource) *rest.Config {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(adminCfg)
	tr, err := cs.CoreV1().ServiceAccounts(src.operatorNamespace).CreateToken(ctx, src.serviceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", src.operatorNamespace, src.serviceAccount, err)
	}
	cfg := rest.AnonymousClientConfig(adminCfg)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = 100, 200
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().
		Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with the ServiceAccount token: %v", err)
	}
	want := "system:serviceaccount:" + src.operatorNamespace + ":" + src.serviceAccount
	if got := review.Status.UserInfo.Username; got != want {
		t.Fatalf("the token authenticates as %q, want %q", got, want)
	}
	return cfg
}

// stop cancels the operator, waits for it to return, checks the lease was released (an
// update the leader-election Role must allow) and fails on unexpected 403s and Forbidden logs.
func (op *operator) stop(t *testing.T) {
	t.Helper()
	op.cancel()
	defer globalLog.set(nil)
	select {
	case err := <-op.done:
		if err != nil {
			t.Errorf("the operator stopped with: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the operator did not stop within 30s")
	}
	lease := &coordinationv1.Lease{}
	if err := admin.Get(context.Background(), types.NamespacedName{Namespace: op.src.operatorNamespace, Name: leaseName}, lease); err != nil {
		t.Errorf("the Lease after stop: %v", err)
	} else if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the operator did not release Lease %s/%s on stop (holder %q)", op.src.operatorNamespace, leaseName, *h)
	}
	op.check(t)
	t.Logf("requests of the operator with the %s RBAC:\n%s", op.src.name, op.rec.summary())
	if errs := op.logs.errors(); errs != "" {
		t.Logf("operator errors:\n%s", errs)
	}
}

// check fails the test on any 403 the operator received, or a Forbidden in its log, that the
// test does not expect.
func (op *operator) check(t *testing.T) {
	t.Helper()
	if d := op.rec.deniedCalls(op.expectDenied); len(d) > 0 {
		t.Errorf("the %s RBAC denied the operator:%s", op.src.name, describeDenied(d))
	}
	if lines := op.logs.forbidden(op.expectDenied != nil); lines != "" {
		t.Errorf("the operator logged Forbidden errors with the %s RBAC:\n%s", op.src.name, lines)
	}
}

// failFast returns an error naming the denied requests as soon as one is recorded, for polls.
func (op *operator) failFast() error {
	if d := op.rec.deniedCalls(op.expectDenied); len(d) > 0 {
		return fmt.Errorf("the %s RBAC denied the operator:%s", op.src.name, describeDenied(d))
	}
	return nil
}

// globalLog receives what is logged through ctrl.Log (the application observer logs there, not
// through its manager): the running operator's buffer, else stderr.
var globalLog = &switchWriter{}

type switchWriter struct {
	mu  sync.Mutex
	dst *syncBuffer
}

func (w *switchWriter) set(b *syncBuffer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dst = b
}

func (w *switchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	dst := w.dst
	w.mu.Unlock()
	if dst == nil {
		return os.Stderr.Write(p)
	}
	return dst.Write(p)
}

// syncBuffer is the operator's log, written by many goroutines.
type syncBuffer struct{ syncbuf.Buffer }

func (b *syncBuffer) lines(keep func(string) bool) string {
	var out strings.Builder
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if keep(sc.Text()) {
			out.WriteString("  " + sc.Text() + "\n")
		}
	}
	return out.String()
}

// errors returns the error-level lines of the operator's log.
func (b *syncBuffer) errors() string {
	return b.lines(func(l string) bool { return strings.Contains(l, `"level":"error"`) })
}

// forbidden returns the log lines that mention a Forbidden answer. With deniedExpected, lines
// are left to the recorder, which knows which namespace may be denied.
func (b *syncBuffer) forbidden(deniedExpected bool) string {
	if deniedExpected {
		return ""
	}
	return b.lines(func(l string) bool {
		l = strings.ToLower(l)
		return strings.Contains(l, "forbidden") || strings.Contains(l, "namespaceaccessdenied")
	})
}

// poll waits up to timeout for cond, failing fast when the operator was denied anything.
// Each call of cond gets a context of its own, so the poll's deadline never turns into a
// client error that hides the last real one. On failure it logs diagnose's report.
func (op *operator) poll(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error), diagnose func(context.Context) string) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := op.failFast(); err != nil {
			return false, err
		}
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		ok, err := cond(callCtx)
		if err != nil {
			last = err
			if isFatal(err) {
				return false, err
			}
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		report := ""
		if diagnose != nil {
			report = diagnose(context.Background())
		}
		t.Fatalf("%s: %v (last: %v)\n%soperator errors:\n%s", what, err, last, report, op.logs.errors())
	}
}

// fatalError stops a poll at once.
type fatalError struct{ error }

func fatal(format string, args ...any) error { return fatalError{fmt.Errorf(format, args...)} }

func isFatal(err error) bool {
	_, ok := err.(fatalError)
	return ok
}
