package localcluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModulePath identifies the repository root when walking up from the working directory.
const ModulePath = "github.com/celld/celld-operator"

// requiredBinaries are the pinned tools tests/tools/install.sh builds.
var requiredBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "metrics-server"}

// RepoRoot walks up from the working directory to the go.mod of this module. Tests run in
// their package directory, the command runs anywhere inside the checkout.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+ModulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

// ResolveBinDir returns the directory holding the pinned binaries: the explicit dir, else
// $CELLD_BIN_DIR, else <repo>/bin. If any binary is missing it runs tests/tools/install.sh
// into that directory (minutes on a cold machine, a few seconds when the cache is warm).
func ResolveBinDir(dir string, log io.Writer) (string, error) {
	if dir == "" {
		dir = os.Getenv("CELLD_BIN_DIR")
	}
	root, rootErr := RepoRoot()
	if dir == "" {
		if rootErr != nil {
			return "", rootErr
		}
		dir = filepath.Join(root, "bin")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	missing := missingBinaries(dir)
	if len(missing) == 0 {
		return dir, nil
	}
	if rootErr != nil {
		return "", fmt.Errorf("missing %s in %s and no checkout to build them from: %w", strings.Join(missing, ", "), dir, rootErr)
	}
	fmt.Fprintf(log, "localcluster: %s missing in %s; building with tests/tools/install.sh (about 10 minutes when cold)\n", strings.Join(missing, ", "), dir)
	cmd := exec.Command(filepath.Join(root, "tests", "tools", "install.sh"), dir)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tests/tools/install.sh: %w", err)
	}
	if missing := missingBinaries(dir); len(missing) > 0 {
		return "", fmt.Errorf("install.sh finished but %s still missing in %s", strings.Join(missing, ", "), dir)
	}
	return dir, nil
}

func missingBinaries(dir string) []string {
	var missing []string
	for _, b := range requiredBinaries {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}
