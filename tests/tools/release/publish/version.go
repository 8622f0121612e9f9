package publish

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/blang/semver/v4"
)

// The files besides the bundle that state the release version. The Makefile's VERSION is the
// source: `make version` writes it into each.
const (
	ChartFile         = "helm-charts/celld-operator/Chart.yaml"
	KustomizationFile = "config/manager/kustomization.yaml"
)

// versionFields are the lines SetVersion rewrites, each a YAML scalar at the start of a line
// (comments and the rest of the file are kept byte for byte).
var versionFields = map[string][]*regexp.Regexp{
	ChartFile: {
		regexp.MustCompile(`(?m)^(version: )"?[^"\s]+"?$`),
		regexp.MustCompile(`(?m)^(appVersion: )"?[^"\s]+"?$`),
	},
	KustomizationFile: {
		regexp.MustCompile(`(?m)^(  newTag: )"?[^"\s]+"?$`),
	},
}

// SetVersion writes version into the install chart (version and appVersion, so the chart's
// default image tag is the release) and the kustomize image tag. It reports the files changed.
func SetVersion(root, version string) ([]string, error) {
	if _, err := semver.Parse(version); err != nil {
		return nil, fmt.Errorf("version %q is not a semantic version: %w", version, err)
	}
	var changed []string
	for _, rel := range []string{ChartFile, KustomizationFile} {
		path := filepath.Join(root, rel)
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out := raw
		for _, re := range versionFields[rel] {
			if len(re.FindAll(out, -1)) != 1 {
				return nil, fmt.Errorf("%s: want exactly one line matching %s", rel, re)
			}
			// A quoted value keeps YAML from reading 1.10 as a number.
			out = re.ReplaceAll(out, []byte(`${1}"`+version+`"`))
		}
		if bytes.Equal(out, raw) {
			continue
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return nil, err
		}
		changed = append(changed, rel)
	}
	return changed, nil
}
