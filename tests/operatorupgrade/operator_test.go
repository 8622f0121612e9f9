package operatorupgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/celld/celld-operator/tests/localcluster"
)

// Each operator runs as its shipped binary with leader election, as its Deployment would,
// against a recording proxy to the API server: the proxy is the operator's journal, so every
// write either release sends is attributed to it. The flags are those both releases accept
// (read from main.go at v0.1.0 and now), with the e2e suite's shortened self-healing timers.
const (
	operatorNamespace = "celld-system"
	leaseName         = "celld-operator.celld.eric.dev"
)

// writeRecord is one write an operator sent that the API server accepted.
type writeRecord struct {
	Operator  string    `json:"operator"`
	At        time.Time `json:"at"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Status    int       `json:"status"`
	Manager   string    `json:"manager,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Resource  string    `json:"resource"`
	Name      string    `json:"name,omitempty"`
	Sub       string    `json:"subresource,omitempty"`
}

// journal collects the writes of every operator the run starts, in the order the proxies saw
// them, and hands each to onWrite (the monitors).
type journal struct {
	mu      sync.Mutex
	records []writeRecord
	file    *os.File
	onWrite func(writeRecord)
	// onFleetStatus receives each fleet status an operator wrote, as the API server answered.
	onFleetStatus func(*unstructured.Unstructured)
}

func (j *journal) add(r writeRecord) {
	j.mu.Lock()
	j.records = append(j.records, r)
	line, _ := json.Marshal(r)
	_, _ = j.file.Write(append(line, '\n'))
	on := j.onWrite
	j.mu.Unlock()
	if on != nil {
		on(r)
	}
}

// since returns the records of one operator (all when name is "") at or after t.
func (j *journal) since(name string, t time.Time) []writeRecord {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []writeRecord
	for _, r := range j.records {
		if (name == "" || r.Operator == name) && !r.At.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

// operator is one running operator process.
type operator struct {
	name     string // "v0.1.0", "current", "v0.1.0 (rollback)"
	bin      string
	cmd      *exec.Cmd
	done     chan struct{}
	health   string
	started  time.Time
	stopping time.Time
	exited   time.Time
	logPath  string
}

// startOperator starts rel's binary as name behind a new recording proxy.
func startOperator(ctx context.Context, cfg *rest.Config, j *journal, dir, name string, rel release) (*operator, error) {
	proxy, err := serveProxy(ctx, cfg, j, name)
	if err != nil {
		return nil, err
	}
	slug := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(name)
	kubeconfig := filepath.Join(dir, "operator-"+slug+".kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + proxy}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "operator"}
	kc.CurrentContext = "proxy"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, err
	}
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	o := &operator{name: name, bin: rel.Binary, health: health, done: make(chan struct{}), logPath: filepath.Join(dir, "operator-"+slug+".log")}
	logf, err := os.OpenFile(o.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	o.cmd = exec.Command(rel.Binary, "--leader-elect=true", "--operator-namespace="+operatorNamespace, "--network-policy-enforced",
		"--storage-provisioners="+localcluster.ProvisionerName,
		"--member-replacement-delay=20s", "--unsafe-allow-short-replacement-delay", "--absorb-window=8s", "--termination-margin=5s",
		"--metrics-bind-address=0", "--health-probe-bind-address="+health)
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	o.cmd.Stdout, o.cmd.Stderr = logf, logf
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start operator %s: %w", name, err)
	}
	o.started = time.Now()
	go func() {
		_ = o.cmd.Wait()
		o.exited = time.Now()
		_ = logf.Close()
		close(o.done)
	}()
	return o, nil
}

// waitReady polls the operator's /readyz, as the Deployment's readiness probe does, until it
// answers 200 or d passes; an operator that exits fails at once.
func (o *operator) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-o.done:
			return fmt.Errorf("operator %s exited (see %s)", o.name, o.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get("http://" + o.health + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("operator %s not ready within %s (see %s)", o.name, d, o.logPath)
}

// stop sends SIGTERM, as the kubelet does when the Deployment replaces the Pod, and waits for
// the exit within grace (the Pod's terminationGracePeriodSeconds, 10 s in the chart and the
// CSV); past it the process is killed, as the kubelet would.
func (o *operator) stop(grace time.Duration) (graceful bool) {
	o.stopping = time.Now()
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
		return true
	case <-time.After(grace):
		_ = o.cmd.Process.Kill()
		<-o.done
		return false
	}
}

func (o *operator) running() bool {
	select {
	case <-o.done:
		return false
	default:
		return true
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// serveProxy listens on loopback and forwards to the API server with the admin credentials,
// streaming watches, recording every accepted write of operator name.
func serveProxy(ctx context.Context, cfg *rest.Config, j *journal, name string) (string, error) {
	up, err := url.Parse(cfg.Host)
	if err != nil {
		return "", err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(up); pr.Out.Host = up.Host },
		Transport:     recorder{next: rt, j: j, name: name},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return ln.Addr().String(), nil
}

type recorder struct {
	next http.RoundTripper
	j    *journal
	name string
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	write := req.Method != http.MethodGet && req.Method != http.MethodHead && !req.URL.Query().Has("dryRun")
	if err == nil && write && resp.StatusCode < 300 {
		rec := writeRecord{Operator: r.name, At: time.Now(), Method: req.Method, Path: req.URL.Path, Status: resp.StatusCode,
			Manager: req.URL.Query().Get("fieldManager")}
		rec.Namespace, rec.Resource, rec.Name, rec.Sub = parsePath(req.URL.Path)
		r.j.add(rec)
		if rec.Resource == "celldfleets" && rec.Sub == "status" && r.j.onFleetStatus != nil {
			body, rerr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			u := &unstructured.Unstructured{}
			if rerr == nil && u.UnmarshalJSON(body) == nil {
				r.j.onFleetStatus(u)
			}
		}
	}
	return resp, err
}

// parsePath splits /api/v1/namespaces/NS/RESOURCE/NAME/SUB and /apis/G/V/... into its parts.
func parsePath(p string) (ns, resource, name, sub string) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
		if len(parts) == 0 {
			return "", "namespaces", ns, ""
		}
	}
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		sub = strings.Join(parts[2:], "/")
	}
	return ns, resource, name, sub
}
