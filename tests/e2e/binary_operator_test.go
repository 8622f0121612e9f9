package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/celld/celld-operator/tests/localcluster"
)

// The read-model benchmark measures the operator as it ships: the built binary in its own
// process, so its requests (rest_client_requests_total), peak RSS and CPU are its own and not
// the test's or the simulator's. CELLD_E2E_OPERATOR_BINARY names the binary; make test-scale
// sets it for the specs labelled read-model.
const (
	binaryEnv     = "CELLD_E2E_OPERATOR_BINARY"
	binaryMetrics = "127.0.0.1:18095"
	binaryPprof   = "127.0.0.1:18096"
)

func binaryOperator() string { return os.Getenv(binaryEnv) }

// startBinaryOperator runs the operator binary against the cluster until ctx ends, with the
// production timers except the self-healing windows, which the e2e values shorten.
func startBinaryOperator(ctx context.Context, cfg *rest.Config, bin string) error {
	kubeconfig := filepath.Join(artifactsDir(), "operator.kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		return err
	}
	cmd := exec.Command(bin, "--leader-elect=false", "--network-policy-enforced",
		"--storage-provisioners="+localcluster.ProvisionerName, "--operator-namespace="+e2eOptions.OperatorNamespace,
		"--member-replacement-delay=20s", "--unsafe-allow-short-replacement-delay", "--absorb-window=8s", "--termination-margin=5s",
		// plain HTTP on loopback, so the benchmark reads the counters without a token; a
		// cluster install keeps the default HTTPS with authentication and authorization
		"--metrics-bind-address="+binaryMetrics, "--metrics-secure=false", "--health-probe-bind-address=127.0.0.1:0",
		"--pprof-bind-address="+binaryPprof)
	// CELLD_E2E_OPERATOR_ARGS adds flags, for a scale run that measures one (for example
	// --max-concurrent-reconciles=32).
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv("CELLD_E2E_OPERATOR_ARGS"))...)
	// GOMEMLIMIT and GOGC as the chart and the bundle set them (goMemLimit, goGC,
	// config/manager).
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "GOMEMLIMIT=200MiB", "GOGC=50")
	cmd.Stdout, cmd.Stderr = logFile("operator.log"), logFile("operator.log")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	if err := os.WriteFile(filepath.Join(artifactsDir(), "operator.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}()
	go func() { _ = cmd.Wait() }()
	return nil
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile, Token: cfg.BearerToken}
	c.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	c.CurrentContext = "local"
	return clientcmd.WriteToFile(*c, path)
}

// operatorRequests sums the binary's rest_client_requests_total by HTTP method, and counts
// the GETs answered 404 and the creates answered 409 apart.
func operatorRequests(ctx context.Context) (map[string]float64, error) {
	return scrapeOperator(ctx, func(line string, add func(string, float64)) {
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			return
		}
		method, v := label(line, "method"), value(line)
		add(method, v)
		if code := label(line, "code"); code == "404" || code == "409" {
			add(method+" "+code, v) // reads of what is not there; creates of what is
		}
	})
}

// The operator's own account of where a fleet's time goes, from its metrics: passes of the
// fleet controller and the time they took, the time requests waited in its work queue (with
// the queue histogram's buckets, for quantiles), and its status writes by kind.
const (
	workReconciles     = "passes"
	workReconcileTime  = "pass seconds"
	workQueued         = "queued"
	workQueueWait      = "queue wait seconds"
	workQueueBucket    = "queue wait le "
	workStatusChange   = "status writes: change"
	workStatusCounters = "status writes: counters only"
	workStatusPaced    = "status writes: paced"
	workWakes          = "wakes by "
	workSkipped        = "child events that woke no fleet"
)

// operatorWork scrapes the operator's own account (the work* keys).
func operatorWork(ctx context.Context) (map[string]float64, error) {
	const fleetController = `controller="celldfleet"`
	return scrapeOperator(ctx, func(line string, add func(string, float64)) {
		switch {
		case strings.HasPrefix(line, "controller_runtime_reconcile_total{") && strings.Contains(line, fleetController):
			add(workReconciles, value(line))
		case strings.HasPrefix(line, "controller_runtime_reconcile_time_seconds_sum{") && strings.Contains(line, fleetController):
			add(workReconcileTime, value(line))
		case strings.HasPrefix(line, "workqueue_queue_duration_seconds_count{") && strings.Contains(line, fleetController):
			add(workQueued, value(line))
		case strings.HasPrefix(line, "workqueue_queue_duration_seconds_sum{") && strings.Contains(line, fleetController):
			add(workQueueWait, value(line))
		case strings.HasPrefix(line, "workqueue_queue_duration_seconds_bucket{") && strings.Contains(line, fleetController):
			add(workQueueBucket+label(line, "le"), value(line))
		case strings.HasPrefix(line, "celld_operator_status_writes_total{"):
			if label(line, "kind") == "counters" {
				add(workStatusCounters, value(line))
			} else {
				add(workStatusChange, value(line))
			}
		case strings.HasPrefix(line, "celld_operator_status_writes_paced_total "):
			add(workStatusPaced, value(line))
		case strings.HasPrefix(line, "celld_operator_child_events_total{"):
			if label(line, "woke") == "true" {
				add(workWakes+label(line, "kind"), value(line))
			} else {
				add(workSkipped, value(line))
			}
		}
	})
}

// workReport is the operator's account of a phase (d, the difference of two operatorWork
// scrapes) for n fleets: per fleet, its passes, their time and its status writes by kind; per
// pass, the mean and the 95th percentile (the bucket's upper bound) of the queue wait.
func workReport(d map[string]float64, n int) map[string]string {
	per := func(k string) string { return fmt.Sprintf("%.1f", d[k]/float64(n)) }
	out := map[string]string{
		"passes per fleet": per(workReconciles), "status writes per fleet, change": per(workStatusChange),
		"status writes per fleet, counters only": per(workStatusCounters), "status writes per fleet, paced": per(workStatusPaced),
		"pass time per fleet (s)": fmt.Sprintf("%.2f", d[workReconcileTime]/float64(n)),
	}
	for k := range d {
		if kind, ok := strings.CutPrefix(k, workWakes); ok && d[k] > 0 {
			out["wakes per fleet by "+kind] = per(k)
		}
	}
	out["child events per fleet that woke no fleet"] = per(workSkipped)
	if q := d[workQueued]; q > 0 {
		out["queue wait, mean (ms)"] = fmt.Sprintf("%.0f", 1000*d[workQueueWait]/q)
		type bucket struct {
			le    float64
			label string
		}
		var buckets []bucket
		for k := range d {
			if le, ok := strings.CutPrefix(k, workQueueBucket); ok {
				if b, err := strconv.ParseFloat(le, 64); err == nil {
					buckets = append(buckets, bucket{b, le})
				}
			}
		}
		slices.SortFunc(buckets, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
		for _, b := range buckets {
			if d[workQueueBucket+b.label] >= 0.95*q {
				out["queue wait, p95 at most (s)"] = b.label
				break
			}
		}
	}
	return out
}

// scrapeOperator reads the binary's metrics; keep adds what it wants of each line.
func scrapeOperator(ctx context.Context, keep func(line string, add func(string, float64))) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+binaryMetrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	add := func(k string, v float64) { out[k] += v }
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		keep(s.Text(), add)
	}
	return out, s.Err()
}

// value is a metric line's sample value, 0 when it does not parse.
func value(line string) float64 {
	v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil {
		return 0
	}
	return v
}

func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

// saveHeapProfile writes the binary's heap profile (pprof, in-use and allocated) to the
// artifacts as name, for `go tool pprof -sample_index=inuse_space bin/manager FILE`.
func saveHeapProfile(ctx context.Context, name string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+binaryPprof+"/debug/pprof/heap", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("heap profile: %s", resp.Status)
	}
	path := filepath.Join(artifactsDir(), name)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return path, err
}

// operatorProcess reads the binary's CPU seconds and peak RSS (KiB) from /proc.
func operatorProcess() (cpuSeconds float64, peakRSSKiB int, err error) {
	raw, err := os.ReadFile(filepath.Join(artifactsDir(), "operator.pid"))
	if err != nil {
		return 0, 0, err
	}
	pid := strings.TrimSpace(string(raw))
	cpu, rss := procStats("/proc/" + pid)
	return cpu, rss, nil
}

// operatorRSS reads the binary's current RSS (KiB) from /proc.
func operatorRSS() (int, error) {
	raw, err := os.ReadFile(filepath.Join(artifactsDir(), "operator.pid"))
	if err != nil {
		return 0, err
	}
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(raw)) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%s/status", strings.TrimSpace(string(raw)))
}

// procStats reads CPU seconds and peak RSS (KiB) of the process at dir (/proc/PID).
func procStats(dir string) (cpuSeconds float64, peakRSSKiB int) {
	if raw, err := os.ReadFile(dir + "/status"); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				peakRSSKiB, _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			}
		}
	}
	if raw, err := os.ReadFile(dir + "/stat"); err == nil {
		fields := strings.Fields(string(raw)[strings.LastIndexByte(string(raw), ')')+2:])
		if len(fields) > 12 {
			u, _ := strconv.ParseFloat(fields[11], 64)
			s, _ := strconv.ParseFloat(fields[12], 64)
			cpuSeconds = (u + s) / 100 // USER_HZ
		}
	}
	return cpuSeconds, peakRSSKiB
}
