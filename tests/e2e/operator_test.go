package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/application"
	"github.com/celld/celld-operator/controllers/fleet"
	"github.com/celld/celld-operator/controllers/preview"
	"github.com/celld/celld-operator/controllers/watches"
	helmcharts "github.com/celld/celld-operator/helm-charts"
	"github.com/celld/celld-operator/tests/e2e/framework"
	"github.com/celld/celld-operator/tests/localcluster"
)

// The operator's timers, shortened so every self-healing row runs in seconds. The seeds'
// defaults are 10 minutes, 5 minutes and 2 minutes.
var e2eOptions = func() fleet.Options {
	o := fleet.DefaultOptions()
	o.NetworkPolicyEnforced = true
	o.StorageProvisioners = []string{localcluster.ProvisionerName}
	o.MemberReplacementDelay = 20 * time.Second
	o.AbsorbWindow = 8 * time.Second
	o.TerminationMargin = 5 * time.Second
	// The resync stays watches.yaml's 10 minutes: every spec must be driven by events. A fleet
	// waiting for something no watch sees is re-examined every 3 s instead of 30 s.
	o.WaitingRequeue = 3 * time.Second
	o.NodeLossTolerationSeconds = new(int64(5))
	return o
}()

func init() {
	framework.StartOperator = startOperator
}

// startOperator installs the CRDs and runs the operator in-process until ctx ends. Its direct
// client records every delete it issues in a journal that every Ginkgo process can read: the
// safety monitor checks each spec's namespace against it.
func startOperator(ctx context.Context, cfg *rest.Config) error {
	ctrl.SetLogger(zap.New(zap.UseDevMode(false), zap.WriteTo(logFile("operator.log"))))
	plain, err := client.New(cfg, client.Options{Scheme: fleetScheme()})
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return writeJournal{next: rt, fleets: plain} })
	if err := localcluster.InstallCRDs(ctx, cfg, filepath.Join("..", ".."), localcluster.OperatorCRDs...); err != nil {
		return err
	}
	if bin := binaryOperator(); bin != "" {
		return startBinaryOperator(ctx, cfg, bin)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	ws, err := watches.Load(os.DirFS(filepath.Join("..", "..")), "watches.yaml", helmcharts.FS)
	if err != nil {
		return err
	}
	r, err := fleet.New(mgr, e2eOptions, ws)
	if err != nil {
		return err
	}
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	r.Direct = journaled(direct)
	// The journals exist from the start, empty: a spec that reads one that is missing fails
	// (readJournal), rather than passing on the absence of a record nobody wrote.
	for _, j := range []string{"operator-deletes.jsonl", "operator-writes.jsonl", "operator-reads.jsonl"} {
		logFile(j)
	}
	r.AfterReplacementPodDelete = func(namespace, pod string) {
		crashIfArmed(namespace, pod)
		writeClaimStatusIfArmed(ctx, plain, namespace, pod)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := preview.Setup(mgr, r.Direct, 4); err != nil {
		return err
	}
	// The application observer as in production, but observing each fleet every 2 s instead of
	// 15 s so its specs see transitions in seconds.
	observer := application.DefaultOptions()
	observer.Interval = 2 * time.Second
	// A details-only change (a count under the same verdict) waits 4 collections, and a fleet
	// whose members are not all Ready is collected every 4 intervals, as in production (1 min
	// at 15 s), so the specs see the pace too.
	observer.Pace = 8 * time.Second
	mc, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	observer.Capacity, observer.Metrics = r.Memory.Observed, application.MetricsAPI{Client: mc}
	if err := application.Add(mgr, observer, r.Caches); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(logFile("operator.log"), "operator stopped:", err)
		}
	}()
	return nil
}

// deleteRecord is one delete the operator issued.
type deleteRecord struct {
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	At        time.Time `json:"at"`
	Force     bool      `json:"force,omitempty"`
}

var journalMu sync.Mutex

// journaled wraps the operator's client so every Pod and claim delete lands in
// .artifacts/operator-deletes.jsonl, shared by every Ginkgo process.
func journaled(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			kind := ""
			switch obj.(type) {
			case *corev1.Pod:
				kind = "Pod"
			case *corev1.PersistentVolumeClaim:
				kind = "PersistentVolumeClaim"
			}
			err := cl.Delete(ctx, obj, opts...)
			if kind != "" && err == nil {
				do := &client.DeleteOptions{}
				do.ApplyOptions(opts)
				rec := deleteRecord{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), At: time.Now(),
					Force: do.GracePeriodSeconds != nil && *do.GracePeriodSeconds == 0}
				line, _ := json.Marshal(rec)
				journalMu.Lock()
				f := logFile("operator-deletes.jsonl")
				_, _ = f.Write(append(line, '\n'))
				journalMu.Unlock()
			}
			return err
		},
	})
}

var logFiles sync.Map

func logFile(name string) *os.File {
	path := filepath.Join(artifactsDir(), name)
	if f, ok := logFiles.Load(path); ok {
		return f.(*os.File)
	}
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	actual, _ := logFiles.LoadOrStore(path, f)
	return actual.(*os.File)
}

func artifactsDir() string {
	if d := os.Getenv("CELLD_E2E_ARTIFACTS"); d != "" {
		return d
	}
	abs, _ := filepath.Abs(".artifacts")
	return abs
}

// crashIfArmed stops a reconcile dead between a replacement's Pod delete and its claim delete,
// as a process crash would, when a spec armed it for the namespace (the marker file is shared
// by every Ginkgo process). controller-runtime recovers the panic; the next reconcile must
// finish or abort the handoff and never delete a second claim.
func crashIfArmed(namespace, pod string) {
	marker := filepath.Join(artifactsDir(), "crash-"+namespace)
	if os.Remove(marker) == nil {
		panic(fmt.Sprintf("e2e: simulated operator crash after deleting replacement victim %s/%s", namespace, pod))
	}
}

// writeClaimStatusIfArmed writes the status of a replaced member's claim between the
// replacement's Pod delete and its claim delete, when a spec armed it for the namespace (the
// marker file claim-status-<namespace>, removed once written). It is what Kubernetes 1.37's
// unused-since controller does as soon as the victim Pod stops running, which on the local
// cluster happened in 3 runs of 5; armed, it happens every time. The replacement must still
// delete exactly that claim.
func writeClaimStatusIfArmed(ctx context.Context, c client.Client, namespace, pod string) {
	if os.Remove(filepath.Join(artifactsDir(), "claim-status-"+namespace)) != nil {
		return
	}
	// The cluster's own controllers write the claim at this moment too: retry on their writes.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		claim := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "data-" + pod}, claim); err != nil {
			return err
		}
		claim.Status.Conditions = append(claim.Status.Conditions, corev1.PersistentVolumeClaimCondition{
			Type: "E2EStatusWrite", Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
			Message: "written by the e2e suite between the replacement's Pod delete and its claim delete"})
		return c.Status().Update(ctx, claim)
	})
	fmt.Fprintf(logFile("operator.log"), "e2e: wrote the status of claim %s/data-%s at its replacement's Pod delete: err=%v\n", namespace, pod, err)
	if err != nil {
		// the spec waits for this file: without the write it proves nothing
		_ = os.WriteFile(filepath.Join(artifactsDir(), "claim-status-failed-"+namespace), []byte(err.Error()), 0o644)
	}
}

// writeRecord is one write request the operator sent to the API server.
type writeRecord struct {
	Method  string    `json:"method"`
	Path    string    `json:"path"`
	Manager string    `json:"manager,omitempty"`
	At      time.Time `json:"at"`
	// Paused: a fleet of the namespace was paused when the operator sent a workload write or a
	// member delete. The safety monitor refuses every such record.
	Paused bool `json:"paused,omitempty"`
	// Status is the answer's HTTP status of a read (0 when the request failed).
	Status int `json:"status,omitempty"`
	// Name is the name of the object a create (POST to the collection) sent.
	Name string `json:"name,omitempty"`
}

// writeJournal records every write request of the operator (POST, PUT, PATCH, DELETE) in
// .artifacts/operator-writes.jsonl, so specs can count the writes a fleet costs and assert
// that a settled fleet costs none.
type writeJournal struct {
	next   http.RoundTripper
	fleets client.Client // reads fleets without going through the journal
}

func (w writeJournal) RoundTrip(req *http.Request) (*http.Response, error) {
	paused := w.lifecycleWrite(req) && w.anyPaused(req)
	resp, err := w.next.RoundTrip(req)
	// A dry-run request (the drift comparison) persists nothing and is not a write.
	write := req.Method != http.MethodGet && !req.URL.Query().Has("dryRun")
	watch := req.URL.Query().Get("watch") == "true"
	if !write && !watch && !strings.Contains(req.URL.Path, "/leases/") {
		// Every read that is not a long-lived watch: a settled fleet must cost none.
		rec := writeRecord{Method: req.Method, Path: req.URL.Path, At: time.Now()}
		if err == nil {
			rec.Status = resp.StatusCode
		}
		line, _ := json.Marshal(rec)
		journalMu.Lock()
		_, _ = logFile("operator-reads.jsonl").Write(append(line, '\n'))
		journalMu.Unlock()
	}
	if write && err == nil && resp.StatusCode < 300 && !strings.Contains(req.URL.Path, "/leases/") {
		rec := writeRecord{Method: req.Method, Path: req.URL.Path, Manager: req.URL.Query().Get("fieldManager"), At: time.Now(), Paused: paused, Name: createdName(req)}
		line, _ := json.Marshal(rec)
		journalMu.Lock()
		_, _ = logFile("operator-writes.jsonl").Write(append(line, '\n'))
		journalMu.Unlock()
	}
	return resp, err
}

// createdName is the metadata.name a POST sends, "" for any other request.
func createdName(req *http.Request) string {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	raw, err := io.ReadAll(body)
	if err != nil {
		return ""
	}
	// Built-in kinds are sent as protobuf, the others as JSON; the universal deserializer
	// reads both, and a kind it does not know is read as JSON metadata.
	if obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil); err == nil {
		if m, ok := obj.(metav1.Object); ok {
			return m.GetName()
		}
	}
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return ""
	}
	return obj.Metadata.Name
}

// lifecycleWrite: a write a paused fleet must never receive from the operator: a workload spec
// write, or a Pod or claim delete.
func (w writeJournal) lifecycleWrite(req *http.Request) bool {
	p := req.URL.Path
	switch {
	case strings.HasSuffix(p, "/status") || strings.HasSuffix(p, "/scale"):
		return false
	case req.Method == http.MethodPut || req.Method == http.MethodPatch || req.Method == http.MethodPost:
		return strings.Contains(p, "/statefulsets") || strings.Contains(p, "/deployments")
	case req.Method == http.MethodDelete:
		return strings.Contains(p, "/pods/") || strings.Contains(p, "/persistentvolumeclaims/")
	}
	return false
}

// anyPaused reads the fleets of the request's namespace as they are when the write is sent.
func (w writeJournal) anyPaused(req *http.Request) bool {
	parts := strings.Split(req.URL.Path, "/")
	for i, part := range parts {
		if part == "namespaces" && i+1 < len(parts) {
			list := &v1.CelldFleetList{}
			if w.fleets.List(req.Context(), list, client.InNamespace(parts[i+1])) != nil {
				return false
			}
			for _, f := range list.Items {
				// Deletion proceeds on a paused fleet (members drain, disks go): only a live
				// paused fleet must be left alone.
				if f.Spec.Maintenance != nil && f.Spec.Maintenance.Paused && f.DeletionTimestamp == nil {
					return true
				}
			}
		}
	}
	return false
}

func fleetScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1.AddToScheme(s)
	return s
}
