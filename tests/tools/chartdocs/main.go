// Command chartdocs regenerates the values table of helm-charts/celld-operator/README.md from
// the chart's values.schema.json and values.yaml. `make manifests` runs it; `make verify` and
// tests/bundle fail when the committed README is stale.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/celld/celld-operator/tests/tools/chartdocs/gen"
)

func main() {
	chart := flag.String("chart", "helm-charts/celld-operator", "chart directory")
	flag.Parse()
	path, content, err := gen.Readme(*chart)
	if err == nil {
		err = os.WriteFile(path, content, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartdocs:", err)
		os.Exit(1)
	}
}
