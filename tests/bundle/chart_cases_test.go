package bundle

import (
	"testing"

	"github.com/celld/celld-operator/tests/chart/cases"
)

// chartCase is one way to install the chart (tests/chart/cases, shared with the local-cluster
// tests of tests/chart). Every case is linted (helm lint --strict), rendered and installed on a
// real API server, so a value the README offers cannot render something the API server refuses.
type chartCase struct{ cases.Case }

func chartCases() []chartCase {
	var out []chartCase
	for _, c := range cases.All() {
		out = append(out, chartCase{c})
	}
	return out
}

// dir returns the chart directory helm would be pointed at: the install chart, or a parent
// chart in a temporary directory holding a copy of it under charts/.
func (c chartCase) dir(t *testing.T) string {
	t.Helper()
	dir, err := c.Dir(repo(t), t.TempDir())
	if err != nil {
		t.Fatalf("the chart directory of case %s: %v", c.Name, err)
	}
	return dir
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	if err := cases.WriteYAML(path, v); err != nil {
		t.Fatal(err)
	}
}
