package gitops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	lua "github.com/yuin/gopher-lua"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// The files docs/gitops.md publishes, relative to the repository root.
const (
	ArgoScriptFile     = "docs/gitops/celldfleet-health.lua"
	FluxKustomization  = "docs/gitops/flux-kustomization.yaml"
	fleetAPIVersion    = "celld.eric.dev/v1alpha1"
	fleetKind          = "CelldFleet"
	argoScriptDeadline = time.Second // Argo CD cancels a health script after one second
)

// Argo CD health statuses a script may return; any other is reported as Unknown.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// Flux (kstatus) statuses of an object.
const (
	Current    = "Current"
	InProgress = "InProgress"
	Failed     = "Failed"
)

// Checks are the published health checks of a CelldFleet.
type Checks struct {
	// ArgoScript is the Lua script for resource.customizations.health.celld.eric.dev_CelldFleet.
	ArgoScript string
	// Flux is the Kustomization's healthCheckExprs entry for CelldFleet.
	Flux FluxExprs
}

// FluxExprs is one entry of a Flux Kustomization's spec.healthCheckExprs.
type FluxExprs struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress"`
	Failed     string `json:"failed"`
}

// Load reads the published checks from the repository at root.
func Load(root string) (*Checks, error) {
	script, err := os.ReadFile(filepath.Join(root, ArgoScriptFile))
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, FluxKustomization))
	if err != nil {
		return nil, err
	}
	var k struct {
		Kind string `json:"kind"`
		Spec struct {
			HealthCheckExprs []FluxExprs `json:"healthCheckExprs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", FluxKustomization, err)
	}
	if k.Kind != "Kustomization" {
		return nil, fmt.Errorf("%s is a %q, not a Flux Kustomization", FluxKustomization, k.Kind)
	}
	c := &Checks{ArgoScript: string(script)}
	for _, e := range k.Spec.HealthCheckExprs {
		if e.APIVersion == fleetAPIVersion && e.Kind == fleetKind {
			c.Flux = e
		}
	}
	if c.Flux.Current == "" {
		return nil, fmt.Errorf("%s has no healthCheckExprs entry with a current expression for %s %s", FluxKustomization, fleetAPIVersion, fleetKind)
	}
	return c, nil
}

// Verdict is what a tool shows for an object.
type Verdict struct {
	Status  string
	Message string
}

// ArgoHealth runs a health script as Argo CD runs a custom one from argocd-cm: a Lua state
// with only the base, package and table libraries, the object as the global table obj (lists
// as sequences, numbers as Lua numbers), a one-second deadline, and the returned table's status
// and message, an unknown status read as Unknown.
func ArgoHealth(script string, obj map[string]any) (Verdict, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{
		lua.LoadLibName: lua.OpenPackage,
		lua.BaseLibName: lua.OpenBase,
		lua.TabLibName:  lua.OpenTable,
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), NRet: 0, Protect: true}, lua.LString(name)); err != nil {
			return Verdict{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), argoScriptDeadline)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return Verdict{}, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Verdict{}, fmt.Errorf("the script returned a %s, not a table", l.Get(-1).Type())
	}
	status, _ := ret.RawGetString("status").(lua.LString)
	message, _ := ret.RawGetString("message").(lua.LString)
	switch string(status) {
	case Healthy, Progressing, Degraded, Suspended, Missing, Unknown:
		return Verdict{Status: string(status), Message: string(message)}, nil
	}
	return Verdict{Status: Unknown, Message: "Lua returned an invalid health status"}, nil
}

// toLua converts a decoded JSON value into Lua values.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetString(k, toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

// FluxHealth evaluates healthCheckExprs as Flux's kustomize-controller does: an object whose
// status.observedGeneration differs from metadata.generation is InProgress; otherwise
// inProgress, failed and current are evaluated in that order, the first that is true decides,
// and none true is InProgress. The expressions are parsed, not type-checked, in an environment
// with optional types and the strings, sets and encoders extensions, and see the object's
// top-level fields (apiVersion, kind, metadata, spec, status) as variables.
func FluxHealth(e FluxExprs, obj map[string]any) (string, error) {
	if st, ok := obj["status"].(map[string]any); ok {
		if observed, ok := st["observedGeneration"]; ok {
			meta, _ := obj["metadata"].(map[string]any)
			if generation, ok := meta["generation"]; ok && number(observed) != number(generation) {
				return InProgress, nil
			}
		}
	}
	for _, c := range []struct {
		expr, status string
	}{{e.InProgress, InProgress}, {e.Failed, Failed}, {e.Current, Current}} {
		if c.expr == "" {
			continue
		}
		ok, err := evalBool(c.expr, obj)
		if err != nil {
			return "", fmt.Errorf("%s expression: %w", c.status, err)
		}
		if ok {
			return c.status, nil
		}
	}
	return InProgress, nil
}

func number(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return -1
}

func evalBool(expr string, obj map[string]any) (bool, error) {
	env, err := cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
	if err != nil {
		return false, err
	}
	ast, issues := env.Parse(expr)
	if issues != nil && issues.Err() != nil {
		return false, issues.Err()
	}
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
	if err != nil {
		return false, err
	}
	out, _, err := prg.Eval(obj)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%q is not a boolean expression", expr)
	}
	return bool(b), nil
}

// Decode reads a fleet object as the tools receive it from the API server: an unstructured
// object, whose integers are int64.
func Decode(raw []byte) (map[string]any, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	return obj, nil
}
