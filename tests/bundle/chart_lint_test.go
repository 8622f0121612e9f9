package bundle

import (
	"strings"
	"testing"

	"github.com/celld/celld-operator/tests/chart/cases"
)

// lintKubeVersion is the Kubernetes version lint checks the chart against: the control plane
// the tests run (bin/kube-apiserver).
var lintKubeVersion = strings.TrimPrefix(cases.KubeVersion.Version, "v")

// TestChartLintStrict runs `helm lint --strict` (warnings fail) on every install case, and
// requires that lint can fail: a delay the operator would refuse must fail it through
// values.schema.json, installed directly or as a dependency. The dependency case lints the
// parent, which renders the chart with the parent's values and global: and validates them
// against this chart's schema (--with-subcharts would lint the subchart with the parent's
// values file as its own).
func TestChartLintStrict(t *testing.T) {
	for _, c := range chartCases() {
		t.Run(c.Name, func(t *testing.T) {
			dir := c.dir(t)
			args := []string{"lint", "--strict", "--kube-version", lintKubeVersion, "-f", valuesFile(t, c.Values)}
			out, err := runHelm(t, "", append(args, dir)...)
			if err != nil || !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			short := "memberReplacementDelay=30s"
			if c.AsDependency {
				short = "celld-operator." + short
			}
			out, err = runHelm(t, "", append(args, "--set", short, dir)...)
			if err == nil || !strings.Contains(out, "memberReplacementDelay") {
				t.Errorf("helm lint accepted %s, which the operator refuses (%v):\n%s", short, err, out)
			}
		})
	}
}
