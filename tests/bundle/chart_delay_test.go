package bundle

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// TestChartDelayRefusedWhereTheOperatorRefusesIt builds the operator and asks it, through
// --version (which parses and validates every flag first), about each memberReplacementDelay
// of a corpus: a value the schema accepts must be one the operator starts with, so a typo
// fails at helm install instead of as a crash-looping operator. The schema may refuse more
// than the operator (fractions, ms, +1m): it documents the whole-unit spelling it accepts.
func TestChartDelayRefusedWhereTheOperatorRefusesIt(t *testing.T) {
	manager := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", manager, ".")
	build.Dir = repo(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the operator: %v\n%s", err, out)
	}
	operatorAccepts := func(delay string) bool {
		err := exec.Command(manager, "--version", "--member-replacement-delay="+delay).Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("run the operator: %v", err)
		}
		return err == nil
	}
	chrt := loadChart(t)
	schemaAccepts := func(delay string) bool {
		_, err := chartutil.ToRenderValues(chrt, map[string]any{"memberReplacementDelay": delay},
			chartutil.ReleaseOptions{Name: "celld-operator", Namespace: releaseNamespace, IsInstall: true}, chartutil.DefaultCapabilities)
		return err == nil
	}

	// What the README and values.yaml show, and Go's own spelling of a Duration, must pass.
	ordinary := []string{"1m", "10m", "60s", "90s", "1h", "1h30m", "1m0s", "10m0s", "2h0m0s", "0h5m"}
	var corpus []string
	for _, n := range []string{"0", "1", "2", "9", "10", "30", "59", "60", "61", "90", "99", "100", "120", "600", "3599", "3600", "00060", "059"} {
		for _, unit := range []string{"ns", "us", "µs", "ms", "s", "m", "h", "", "d", "M", "S"} {
			corpus = append(corpus, n+unit)
		}
	}
	corpus = append(corpus, ordinary...)
	corpus = append(corpus,
		"", " ", "1m ", " 1m", "1 m", "-1m", "-90s", "+1m", "1.5m", "0.5m", "0.99m", "0.016h", "0.017h", "1.0m", ".5h",
		"0m59s", "0h0m59s", "0h0m60s", "0h1m", "0m0s", "0h0m0s", "30s30s", "1m1m", "1s1m", "59s999ms", "1m500ms",
		"0h0m0059s", "1h-1m", "1h1h", "m", "h1", "1m1", "9999999h", "2562048h", "999999h", "999999h9999999m999999999s",
		"99999999999999999999h", "1000000h", "0001h", "1e3s", "0x3Cs", "1m\n", "1m\x00")
	for _, d := range ordinary {
		if !schemaAccepts(d) {
			t.Errorf("the schema refuses memberReplacementDelay %q, an ordinary delay the operator accepts", d)
		}
	}
	for _, d := range corpus {
		if schemaAccepts(d) && !operatorAccepts(d) {
			t.Errorf("the schema accepts memberReplacementDelay %q, which the operator refuses at start", d)
		}
	}
	if operatorAccepts("30s") || !operatorAccepts("1m") {
		t.Error("the operator's own rule moved (30s refused, 1m accepted); update the schema's pattern and this corpus")
	}
}
