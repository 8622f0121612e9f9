package bundle

import (
	"os"
	"testing"

	"github.com/celld/celld-operator/tests/tools/chartdocs/gen"
)

// TestChartReadmeIsUpToDate regenerates the README's values table from values.schema.json and
// values.yaml and requires the committed README to equal it.
func TestChartReadmeIsUpToDate(t *testing.T) {
	path, fresh, err := gen.Readme(repo(t, chartDir))
	if err != nil {
		t.Fatalf("generate the values table: %v", err)
	}
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(committed) != string(fresh) {
		t.Errorf("%s is stale (values.schema.json or values.yaml changed); run `make manifests` and commit it:\n%s", path, diffLines(string(fresh), string(committed)))
	}
}
