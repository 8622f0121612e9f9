package bundle

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/celld/celld-operator/tests/apiserver"
)

// chartServer is the real etcd and kube-apiserver the chart's renders are created on, started
// by the first test that needs it.
var chartServer = newChartServer()

func newChartServer() *apiserver.Shared {
	return &apiserver.Shared{Schemes: []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme}}
}

// ownChartServer gives a test a real API server of its own, stopped when the test ends: a test
// that installs and uninstalls cluster-scoped objects (CRDs above all, whose deletion waits on
// the API server's own finalizer) then never depends on another test's clean-up.
func ownChartServer(t *testing.T) *apiserver.Shared {
	t.Helper()
	s := newChartServer()
	t.Cleanup(s.Stop)
	s.Client(t)
	return s
}

// helmCLI is the helm command built from the Helm module go.mod pins (see helmBinary).
var helmCLI struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	chartServer.Stop()
	if helmCLI.dir != "" {
		_ = os.RemoveAll(helmCLI.dir)
	}
	os.Exit(code)
}

// helmBinary builds the helm CLI at the version of helm.sh/helm/v3 in go.mod, once per test
// run. The CLI, not the SDK's lint package, because pkg/lint needs modules go.sum does not
// carry; building cmd/helm@version uses Helm's own go.mod. The build cache makes later runs a
// link only.
func helmBinary(t *testing.T) string {
	t.Helper()
	helmCLI.once.Do(func() {
		list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "helm.sh/helm/v3")
		list.Dir = repo(t)
		version, err := list.Output()
		if err != nil {
			helmCLI.err = fmt.Errorf("read the Helm version from go.mod: %w", err)
			return
		}
		if helmCLI.dir, helmCLI.err = os.MkdirTemp("", "celld-chart-helm-"); helmCLI.err != nil {
			return
		}
		install := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+strings.TrimSpace(string(version)))
		install.Dir = helmCLI.dir
		install.Env = append(os.Environ(), "GOBIN="+helmCLI.dir)
		if out, err := install.CombinedOutput(); err != nil {
			helmCLI.err = fmt.Errorf("build the helm CLI (go install helm.sh/helm/v3/cmd/helm@%s): %w\n%s", strings.TrimSpace(string(version)), err, out)
			return
		}
		helmCLI.path = filepath.Join(helmCLI.dir, "helm")
	})
	if helmCLI.err != nil {
		t.Fatal(helmCLI.err)
	}
	return helmCLI.path
}

// runHelm runs the helm CLI with its configuration, cache and data in a temporary directory
// and, when kubeconfig is set, against that cluster.
func runHelm(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Dir = repo(t)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// chartKubeconfig writes a kubeconfig for the admin of server s, for the helm CLI.
func chartKubeconfig(t *testing.T, s *apiserver.Shared) string {
	t.Helper()
	s.Client(t)
	cfg := s.Config()
	server := cfg.Host
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["chart-test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["chart-test"] = &clientcmdapi.Context{Cluster: "chart-test", AuthInfo: "admin"}
	kc.CurrentContext = "chart-test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// valuesFile writes values as a Helm values file.
func valuesFile(t *testing.T, values map[string]any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if values == nil {
		values = map[string]any{}
	}
	writeYAML(t, path, values)
	return path
}
