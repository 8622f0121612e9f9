// Package apiserver starts the real etcd and kube-apiserver that the API-level tests run
// against (controller-runtime envtest over the pinned binaries in bin/), so every such test
// package boots the control plane the same way.
package apiserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Start starts etcd and kube-apiserver with the CRDs of dirs installed (paths relative to the
// repository root, or absolute). The binaries come from KUBEBUILDER_ASSETS or the repository's
// bin/, where make tools builds them; a missing binary is an error that names the fix, never a
// skip. Call stop exactly once.
func Start(dirs ...string) (cfg *rest.Config, stop func(), err error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, nil, fmt.Errorf("%s is missing from %s: build the control-plane binaries with make tools (make test does)", bin, assets)
		}
	}
	var paths []string
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(root, d)
		}
		paths = append(paths, d)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: paths, ErrorIfCRDPathMissing: true}
	// envtest's /24 gives 254 ClusterIPs; a long admission fuzz run creates and reconciles a
	// Service for every tenth admitted case and filled it after about 250 (finding E in
	// docs/reliability.md).
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	cfg, err = env.Start()
	if err != nil {
		_ = env.Stop() // Start can fail after etcd and the API server are already running
		return nil, nil, fmt.Errorf("start etcd and kube-apiserver: %w", err)
	}
	return cfg, func() { _ = env.Stop() }, nil
}

// RepoRoot is the directory of the module's go.mod, found upward from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "watches.yaml")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no repository root (go.mod beside watches.yaml) above the working directory")
		}
		dir = parent
	}
}
