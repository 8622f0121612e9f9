package api

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

var (
	k8s     client.Client
	restCfg *rest.Config
	scheme  = runtime.NewScheme()
)

// TestMain starts one etcd and kube-apiserver for the package. The binaries come from bin/
// (make tools builds them); a missing binary is a failure, never a skip.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		os.Setenv("KUBEBUILDER_ASSETS", filepath.Join(root, "bin"))
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), b)); err != nil {
			fmt.Fprintf(os.Stderr, "tests/api needs %s in %s: run `make tools` (make test does it)\n", b, os.Getenv("KUBEBUILDER_ASSETS"))
			return 1
		}
	}
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	restCfg, err = env.Start()
	if err != nil {
		_ = env.Stop() // Start may fail after etcd and the API server are running
		fmt.Fprintf(os.Stderr, "start kube-apiserver: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s, err = client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "client: %v\n", err)
		return 1
	}
	return m.Run()
}

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
