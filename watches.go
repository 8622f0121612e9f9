package main

import (
	"embed"
	"os"
	"path/filepath"

	"github.com/celld/celld-operator/controllers/children"
)

// embeddedWatches is the watches.yaml compiled into the binary, so the image needs no files.
//
//go:embed watches.yaml
var embeddedWatches embed.FS

// loadWatches reads --watches-file, or the embedded watches.yaml when it is empty. An unknown
// chart or a duplicate GVK stops the operator at start with a message naming it.
func loadWatches(path string) ([]children.Watch, error) {
	if path == "" {
		return children.LoadWatches(embeddedWatches, "watches.yaml")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return children.LoadWatches(os.DirFS(filepath.Dir(abs)), filepath.Base(abs))
}
