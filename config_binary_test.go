package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/celld/celld-operator/internal/testsupport/syncbuf"
	"github.com/celld/celld-operator/tests/apiserver"
)

// exited is closed when a started process has exited; err is then its Wait error.
type exited struct {
	ch  chan struct{}
	err error
}

// kubeconfig writes cfg (the test API server's admin identity) as a kubeconfig file.
func kubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBinaryReadsItsConfigMap builds the operator binary and starts it against a real API
// server with the operator ConfigMap in its namespace: a bad value or an unknown key stops it at
// start with the key named; good values are applied under the flags given; no ConfigMap is fine.
func TestBinaryReadsItsConfigMap(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg, stop, err := apiserver.Start("config/crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cs := kubernetes.NewForConfigOrDie(cfg)
	path := kubeconfig(t, cfg)

	// start runs the binary in a namespace of its own holding data as the ConfigMap (nil: none).
	start := func(t *testing.T, data map[string]string, args ...string) (*syncbuf.Buffer, *exited) {
		t.Helper()
		ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "op-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if data != nil {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configMapName}, Data: data}
			if _, err := cs.CoreV1().ConfigMaps(ns.Name).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(bin, append([]string{"--leader-elect=false", "--health-probe-bind-address=0", "--metrics-bind-address=0",
			"--operator-namespace=" + ns.Name}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+path)
		out := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := &exited{ch: make(chan struct{})}
		go func() { done.err = cmd.Wait(); close(done.ch) }()
		t.Cleanup(func() {
			select {
			case <-done.ch:
			default:
				_ = cmd.Process.Kill() // the process this test started
				<-done.ch
			}
		})
		return out, done
	}
	refused := func(t *testing.T, data map[string]string, want ...string) {
		t.Helper()
		out, done := start(t, data)
		select {
		case <-done.ch:
			var exit *exec.ExitError
			if !errors.As(done.err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("want exit status 1, got %v\n%s", done.err, out)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("the operator did not refuse to start within 60s\n%s", out)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("the refusal does not mention %q:\n%s", w, out)
			}
		}
	}
	running := func(t *testing.T, out *syncbuf.Buffer, done *exited, want ...string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			all := true
			for _, w := range want {
				all = all && strings.Contains(out.String(), w)
			}
			if all {
				return
			}
			select {
			case <-done.ch:
				t.Fatalf("the operator stopped: %v\n%s", done.err, out)
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatalf("the operator's log never said %q within 60s:\n%s", want, out)
	}

	t.Run("bad duration", func(t *testing.T) {
		refused(t, map[string]string{"member-replacement-delay": "5"}, "key member-replacement-delay=\"5\"", "missing unit", "at least 1m")
	})
	t.Run("below the minimum", func(t *testing.T) {
		refused(t, map[string]string{"member-replacement-delay": "30s"}, "key member-replacement-delay=\"30s\"", "below the minimum of 1m0s")
	})
	t.Run("unknown key", func(t *testing.T) {
		refused(t, map[string]string{"networkPolicyEnforced": "true"}, `unknown key "networkPolicyEnforced"`, "network-policy-enforced")
	})
	t.Run("applied under the flags", func(t *testing.T) {
		out, done := start(t, map[string]string{"network-policy-enforced": "true", "member-replacement-delay": "7m",
			"storage-provisioners": "a.csi,b.csi"}, "--member-replacement-delay=9m")
		running(t, out, done, `"network-policy-enforced from ConfigMap `, `"member-replacement-delay from flag"`,
			`"networkPolicyEnforced":true`, `"memberReplacementDelay":"9m0s"`)
	})
	t.Run("no ConfigMap", func(t *testing.T) {
		out, done := start(t, nil)
		running(t, out, done, "no operator ConfigMap; flags and defaults apply", `"networkPolicyEnforced":false`)
	})
}
