package corpus

import (
	"bufio"
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoProductionCodeImportsTestSupport keeps the test fixtures out of the operator binary:
// no non-test Go file of the module outside internal/testsupport may import
// internal/testsupport/... (this corpus or any later fixture package).
func TestNoProductionCodeImportsTestSupport(t *testing.T) {
	root, module := moduleRoot(t)
	prefix := module + "/internal/testsupport"
	own := filepath.Join(root, "internal", "testsupport")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			// Directories the go tool ignores, the tool binaries, the fixtures themselves, and
			// nested modules (tests/tools/*), which are not part of this module.
			if name == "bin" || name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || path == own {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if p == prefix || strings.HasPrefix(p, prefix+"/") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s: test fixtures must not be compiled into production code; import them from _test.go files only", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Guard against a walk that silently saw nothing (a wrong root would pass vacuously).
	if checked == 0 {
		t.Fatalf("no non-test Go file found under %s", root)
	}
	if _, err := os.Stat(filepath.Join(root, "main.go")); err != nil {
		t.Fatalf("module root %s has no main.go: %v", root, err)
	}
}

// moduleRoot walks up from the package directory to the go.mod and returns its directory and
// module path.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			s := bufio.NewScanner(f)
			for s.Scan() {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(rest), `"`)
				}
			}
			t.Fatalf("%s/go.mod names no module", dir)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}
