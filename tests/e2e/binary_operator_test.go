package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	// GOMEMLIMIT as the chart and the bundle set it (goMemLimit, config/manager).
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "GOMEMLIMIT=200MiB")
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

// operatorRequests sums the binary's rest_client_requests_total by HTTP method.
func operatorRequests(ctx context.Context) (map[string]float64, error) {
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
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		method := label(line, "method")
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			out[method] += v
			if code := label(line, "code"); code == "404" || code == "409" {
				out[method+" "+code] += v // reads of what is not there; creates of what is
			}
		}
	}
	return out, s.Err()
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
