package rbac

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
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/localcluster"
)

var (
	// root is the repository root (the directory of go.mod).
	root string
	// admin is a cluster-admin client (the local cluster's client certificate).
	admin    client.Client
	adminCfg *rest.Config
	scheme   = runtime.NewScheme()
)

// TestMain starts one local cluster for the package and installs the CRDs. A cluster that
// does not start is a failure (exit 1), never a skip.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if root, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Each operator logs through its manager; what is logged through ctrl.Log goes to the
	// running operator's log too (globalLog).
	ctrl.SetLogger(zap.New(zap.WriteTo(globalLog)))
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)

	dir, err := os.MkdirTemp("", "celld-rbac-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	started := time.Now()
	cluster, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, BinDir: binDir(), Log: os.Stderr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the local cluster: %v\n", err)
		return 1
	}
	defer cluster.Stop()
	fmt.Fprintf(os.Stderr, "rbac: local cluster ready in %s\n", time.Since(started).Round(100*time.Millisecond))
	adminCfg = cluster.RESTConfig()
	adminCfg.QPS, adminCfg.Burst = 100, 200
	if admin, err = client.New(adminCfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := localcluster.InstallCRDs(ctx, adminCfg, root, localcluster.OperatorCRDs...); err != nil {
		fmt.Fprintf(os.Stderr, "install the CRDs: %v\n", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "rbac: cluster logs were in %s (removed now)\n", filepath.Join(dir, "logs"))
	}
	return code
}

// binDir is the pinned binaries' directory: $CELLD_BIN_DIR, else <repo>/bin. Start builds
// them there with tests/tools/install.sh when one is missing.
func binDir() string {
	if d := os.Getenv("CELLD_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(root, "bin")
}
