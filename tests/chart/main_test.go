// Package chart runs every install case of the chart (tests/chart/cases) on the local cluster
// (tests/localcluster: a real control plane with the controller manager and scheduler, and kwok
// nodes), where the operator Pods are created, admitted, scheduled and made ready, and the
// disruption controller evaluates the chart's PodDisruptionBudget. tests/bundle checks the
// same cases with helm lint and on a bare API server.
package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/celld/celld-operator/tests/localcluster"
)

var (
	// root is the repository root (the directory of go.mod).
	root string
	// admin is a cluster-admin client of the local cluster.
	admin  client.Client
	scheme = runtime.NewScheme()
)

// TestMain starts one local cluster for the package. A cluster that does not start is a
// failure (exit 1), never a skip.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if root, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	dir, err := os.MkdirTemp("", "celld-chart-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin := os.Getenv("CELLD_BIN_DIR")
	if bin == "" {
		bin = filepath.Join(root, "bin")
	}
	cluster, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, BinDir: bin, Log: os.Stderr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the local cluster: %v\n", err)
		return 1
	}
	defer cluster.Stop()
	cfg := cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 100, 200
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "chart: cluster logs were in %s (removed now)\n", filepath.Join(dir, "logs"))
	}
	return code
}
