package children

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	helmcharts "github.com/celld/celld-operator/helm-charts"
)

// chartsDir is the repository directory the embedded FS mirrors; watches.yaml names charts by
// their repository path (helm-charts/celld-fleet), the hybrid convention.
const chartsDir = "helm-charts"

// FleetChart is the watches.yaml chart path of the fleet chart.
const FleetChart = chartsDir + "/celld-fleet"

// loadChart loads an embedded chart by its repository path. Files are handed to
// loader.LoadFiles with chart-relative names, exactly as `helm` reads a chart directory.
func loadChart(chartPath string) (*chart.Chart, error) {
	dir, err := embeddedDir(chartPath)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(helmcharts.FS, dir)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", chartPath, err)
	}
	var files []*loader.BufferedFile
	err = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(sub, name)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: name, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", chartPath, err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", chartPath, err)
	}
	return c, nil
}

// embeddedDir maps a repository chart path to its directory in helmcharts.FS, and fails when
// the binary does not carry that chart.
func embeddedDir(chartPath string) (string, error) {
	clean := path.Clean(chartPath)
	dir, ok := strings.CutPrefix(clean, chartsDir+"/")
	if !ok || dir == "" || dir == "." {
		return "", fmt.Errorf("chart %q is not under %s/; charts are embedded in the operator binary", chartPath, chartsDir)
	}
	if _, err := fs.Stat(helmcharts.FS, path.Join(dir, "Chart.yaml")); err != nil {
		return "", fmt.Errorf("chart %q is not embedded in the operator binary (no %s/Chart.yaml); add it to the go:embed directive in %s/embed.go", chartPath, dir, chartsDir)
	}
	return dir, nil
}
