package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEveryEmittedReasonIsDocumentedAndEveryDocumentedReasonIsEmitted keeps docs/operations.md
// and the code in step: for each family of reasons (lifecycle conditions, RoutingReady,
// ApplicationConverged, CelldPreview Ready, events), the reasons the code can emit must be exactly the reasons the
// document lists. A reason counts as emitted where the code passes, assigns or returns it; a
// comparison (==, !=, a case) or a map key only reads it.
func TestEveryEmittedReasonIsDocumentedAndEveryDocumentedReasonIsEmitted(t *testing.T) {
	values := constants(t, "api/v1alpha1/names.go")
	emitted := emittedReasons(t, values)
	documented := documentedReasons(t, "docs/operations.md")
	for _, family := range []string{"lifecycle", "routing", "application", "preview", "events"} {
		got, want := emitted[family], documented[family]
		for _, r := range got {
			if !slices.Contains(want, r) {
				t.Errorf("%s reason %s is emitted by the code but not documented in docs/operations.md", family, r)
			}
		}
		for _, r := range want {
			if !slices.Contains(got, r) {
				t.Errorf("%s reason %s is documented in docs/operations.md but the code never emits it", family, r)
			}
		}
		if len(got) == 0 || len(want) == 0 {
			t.Errorf("%s: found %d emitted and %d documented reasons; the scan is broken", family, len(got), len(want))
		}
	}
}

// constants maps each Reason* and Event* constant of the API package to its value.
func constants(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != len(vs.Names) {
			return true
		}
		for i, name := range vs.Names {
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if ok && lit.Kind == token.STRING && (strings.HasPrefix(name.Name, "Reason") || strings.HasPrefix(name.Name, "Event")) {
				out[name.Name], _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	return out
}

// emittedReasons scans the operator's non-test code for v1.Reason* and v1.Event* used in an
// emitting position, sorted into families: RoutingReady reasons are those passed to
// routingCondition, ApplicationConverged reasons those of controllers/application, preview
// reasons those of controllers/preview, events the
// Event* constants, and lifecycle reasons the rest.
func emittedReasons(t *testing.T, values map[string]string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(family, v string) {
		if !slices.Contains(out[family], v) {
			out[family] = append(out[family], v)
		}
	}
	err := filepath.WalkDir("controllers", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		routing := map[ast.Node]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "routingCondition" && len(call.Args) > 2 {
					routing[call.Args[2]] = true
				}
			}
			return true
		})
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			defer func() { stack = append(stack, n) }()
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			v, known := values[sel.Sel.Name]
			if !ok || x.Name != "v1" || !known || !emitting(sel, stack) {
				return true
			}
			switch {
			case strings.HasPrefix(sel.Sel.Name, "Event"):
				add("events", v)
			case routing[sel]:
				add("routing", v)
			case strings.HasPrefix(path, filepath.Join("controllers", "application")):
				add("application", v)
			case strings.HasPrefix(path, filepath.Join("controllers", "preview")):
				add("preview", v)
			default:
				add("lifecycle", v)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// emitting: the reference is passed, assigned, returned or set as a field, not compared or
// used as a map key.
func emitting(ref ast.Node, stack []ast.Node) bool {
	if len(stack) == 0 {
		return true
	}
	switch p := stack[len(stack)-1].(type) {
	case *ast.BinaryExpr:
		return p.Op != token.EQL && p.Op != token.NEQ
	case *ast.CaseClause:
		return false
	case *ast.KeyValueExpr:
		if p.Key == ref && len(stack) > 1 {
			if lit, ok := stack[len(stack)-2].(*ast.CompositeLit); ok {
				if _, isMap := lit.Type.(*ast.MapType); isMap {
					return false
				}
			}
		}
	}
	return true
}

var backticked = regexp.MustCompile("`([A-Z][A-Za-z]+)`")

// documentedReasons reads docs/operations.md: the first column of the lifecycle reasons table
// and the line "Other condition reasons:" under it, every backticked name in the RoutingReady
// and ApplicationConverged reason paragraphs, and the first column of the events table.
func documentedReasons(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	section, inParagraph := "", false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "### Lifecycle reasons"):
			section = "lifecycle"
			continue
		case strings.HasPrefix(line, "### RoutingReady reasons"):
			section = "routing"
			continue
		case strings.HasPrefix(line, "### ApplicationConverged reasons"):
			section = "application"
			continue
		case strings.HasPrefix(line, "### Preview reasons"):
			section = "preview"
			continue
		case strings.HasPrefix(line, "## Events"):
			section = "events"
			continue
		case strings.HasPrefix(line, "#"):
			section = ""
			continue
		}
		text := line
		switch section {
		case "lifecycle", "preview", "events":
			if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| Reason") {
				text = strings.SplitN(line, "|", 3)[1] // the first column
			} else if !strings.HasPrefix(line, "Other condition reasons:") {
				continue
			}
		case "routing", "application":
			// The reasons are the paragraph right under the heading.
			if line == "" && inParagraph {
				section, inParagraph = "", false
				continue
			}
			inParagraph = inParagraph || line != ""
		default:
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(out[section], m[1]) {
				out[section] = append(out[section], m[1])
			}
		}
	}
	return out
}
