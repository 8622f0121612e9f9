package main

import (
	"embed"
	"os"
	"path/filepath"

	"github.com/celld/celld-operator/controllers/watches"
	helmcharts "github.com/celld/celld-operator/helm-charts"
)

// embeddedWatches is the watches.yaml compiled into the binary, so the image needs no files.
//
//go:embed watches.yaml
var embeddedWatches embed.FS

// loadWatches reads --watches-file, or the embedded watches.yaml when it is empty. An unknown
// chart or a duplicate GVK stops the operator at start with a message naming it.
func loadWatches(path string) ([]watches.Watch, error) {
	if path == "" {
		return watches.Load(embeddedWatches, "watches.yaml", helmcharts.FS)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return watches.Load(os.DirFS(filepath.Dir(abs)), filepath.Base(abs), helmcharts.FS)
}
