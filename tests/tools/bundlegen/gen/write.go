package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// generatedDirs are the bundle directories the generator owns; Write empties them first so
// that a file config/ no longer produces disappears.
var generatedDirs = []string{"manifests", "metadata", "tests"}

// Write replaces the bundle under outDir and writes the Dockerfile to dockerfilePath.
func (b *Bundle) Write(outDir, dockerfilePath string) error {
	for _, d := range generatedDirs {
		if err := os.RemoveAll(filepath.Join(outDir, d)); err != nil {
			return err
		}
	}
	for _, path := range b.Paths() {
		full := filepath.Join(outDir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, b.Files[path], 0o644); err != nil {
			return fmt.Errorf("write %s: %w", full, err)
		}
	}
	return os.WriteFile(dockerfilePath, b.Dockerfile, 0o644)
}

// Paths lists the bundle files in a stable order.
func (b *Bundle) Paths() []string {
	paths := make([]string, 0, len(b.Files))
	for p := range b.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}
