package capacity

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDocsListEveryReason keeps the "Decision reasons" section of docs/capacity.md and Reasons
// equal: a reason the code gives must tell the user what to do, and a documented reason must
// exist.
func TestDocsListEveryReason(t *testing.T) {
	documented := documentedReasons(t, "../../docs/capacity.md")
	for _, r := range Reasons {
		if !slices.Contains(documented, r) {
			t.Errorf("reason %s is given by the capacity policy but not listed under \"Decision reasons\" in docs/capacity.md", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(Reasons, r) {
			t.Errorf("reason %s is listed under \"Decision reasons\" in docs/capacity.md but the capacity policy never gives it", r)
		}
	}
	for i, r := range documented {
		if slices.Contains(documented[i+1:], r) {
			t.Errorf("reason %s is listed twice in docs/capacity.md", r)
		}
	}
}

var firstColumn = regexp.MustCompile("^\\| `([A-Za-z]+)` \\|")

// documentedReasons is the first column of the table under "## Decision reasons".
func documentedReasons(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.TrimSpace(line) == "## Decision reasons"
		case in:
			if m := firstColumn.FindStringSubmatch(line); m != nil {
				out = append(out, m[1])
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no reasons under \"## Decision reasons\"; the parser or the document is broken", path)
	}
	return out
}

// TestReasonsIsEveryReasonConstant: Reasons lists each Reason constant of the package once,
// and each constant is spelled as its name says.
func TestReasonsIsEveryReasonConstant(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var constants []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok {
				continue
			}
			v, _ := strconv.Unquote(lit.Value)
			if v != strings.TrimPrefix(name.Name, "Reason") {
				t.Errorf("%s is %q; a reason constant is spelled as its name", name.Name, v)
			}
			constants = append(constants, v)
		}
		return true
	})
	if len(constants) != 19 {
		t.Errorf("found %d reason constants; the policy has exactly 19 reasons", len(constants))
	}
	for _, c := range constants {
		if !slices.Contains(Reasons, c) {
			t.Errorf("reason %s is a constant but missing from Reasons", c)
		}
	}
	if len(Reasons) != len(constants) {
		t.Errorf("Reasons has %d entries for %d constants", len(Reasons), len(constants))
	}
}
