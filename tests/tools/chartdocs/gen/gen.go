// Package gen writes the values table of the install chart's README from values.schema.json
// (keys, types, descriptions) and values.yaml (defaults), so the table cannot drift from what
// the chart accepts. The rest of the README is hand-written around two markers.
package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Begin and End mark the generated table in README.md; everything between them is replaced.
const (
	Begin = "<!-- values table: generated from values.schema.json and values.yaml by tests/tools/chartdocs (make manifests); do not edit -->"
	End   = "<!-- end of values table -->"
)

// schema is the part of a JSON Schema the table reads.
type schema struct {
	Ref                  string             `json:"$ref"`
	Type                 any                `json:"type"`
	Description          string             `json:"description"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties any                `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	Enum                 []any              `json:"enum"`
	AllOf                []*schema          `json:"allOf"`
	Defs                 map[string]*schema `json:"$defs"`
}

// Readme returns the chart's README.md path and its content with a freshly generated table.
func Readme(chartDir string) (path string, content []byte, err error) {
	path = filepath.Join(chartDir, "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	rawSchema, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		return "", nil, err
	}
	rawValues, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return "", nil, err
	}
	table, err := Table(rawSchema, rawValues)
	if err != nil {
		return "", nil, err
	}
	content, err = Splice(readme, table)
	return path, content, err
}

// Splice replaces what lies between Begin and End in readme with table.
func Splice(readme []byte, table string) ([]byte, error) {
	begin, end := bytes.Index(readme, []byte(Begin)), bytes.Index(readme, []byte(End))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("README.md lacks the markers %q and %q, in that order", Begin, End)
	}
	var out bytes.Buffer
	out.Write(readme[:begin+len(Begin)])
	out.WriteString("\n")
	out.WriteString(table)
	out.Write(readme[end:])
	return out.Bytes(), nil
}

// Table is the Markdown table of every leaf value: key, type, default, description. A leaf is
// a value whose schema has no properties of its own (maps, lists and scalars). Every leaf must
// have a description, and every value in values.yaml a schema, or Table fails.
func Table(rawSchema, rawValues []byte) (string, error) {
	var root schema
	if err := json.Unmarshal(rawSchema, &root); err != nil {
		return "", fmt.Errorf("values.schema.json: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(rawValues, &values); err != nil {
		return "", fmt.Errorf("values.yaml: %w", err)
	}
	t := &table{defs: root.Defs}
	t.walk("", &root, values)
	if err := t.undocumented("", values, &root); err != nil {
		t.errs = append(t.errs, err)
	}
	if len(t.errs) > 0 {
		return "", errors.Join(t.errs...)
	}
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n| --- | --- | --- | --- |\n")
	for _, r := range t.rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
	}
	return b.String(), nil
}

type table struct {
	defs map[string]*schema
	rows [][4]string
	errs []error
}

// resolve follows $ref and the first schema of allOf, merging the description of the outer
// schema over the referenced one.
func (t *table) resolve(s *schema) *schema {
	var next *schema
	switch {
	case s.Ref != "":
		if next = t.defs[strings.TrimPrefix(s.Ref, "#/$defs/")]; next == nil {
			t.errs = append(t.errs, fmt.Errorf("values.schema.json: unresolved $ref %s", s.Ref))
			return s
		}
	case len(s.AllOf) > 0:
		next = s.AllOf[0]
	default:
		return s
	}
	merged := *t.resolve(next)
	if s.Description != "" {
		merged.Description = s.Description
	}
	return &merged
}

func (t *table) walk(prefix string, s *schema, values map[string]any) {
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		p := t.resolve(s.Properties[k])
		v, set := values[k]
		if len(p.Properties) > 0 {
			sub, _ := v.(map[string]any)
			t.walk(key, p, sub)
			continue
		}
		if p.Description == "" {
			t.errs = append(t.errs, fmt.Errorf("values.schema.json: %s has no description", key))
		}
		def := "(unset)"
		if set {
			b, err := json.Marshal(v)
			if err != nil {
				t.errs = append(t.errs, fmt.Errorf("values.yaml: %s: %w", key, err))
			}
			def = "`" + string(b) + "`"
		}
		t.rows = append(t.rows, [4]string{key, t.typeOf(p), cell(def), cell(p.Description)})
	}
}

// undocumented reports values.yaml keys without a schema.
func (t *table) undocumented(prefix string, values map[string]any, s *schema) error {
	var errs []error
	for k, v := range values {
		key := strings.TrimPrefix(prefix+"."+k, ".")
		p, ok := s.Properties[k]
		if !ok {
			if len(s.Properties) > 0 {
				errs = append(errs, fmt.Errorf("values.yaml: %s has no schema", key))
			}
			continue
		}
		if sub, isMap := v.(map[string]any); isMap {
			errs = append(errs, t.undocumented(key, sub, t.resolve(p)))
		}
	}
	return errors.Join(errs...)
}

func (t *table) typeOf(s *schema) string {
	types := typeNames(s.Type)
	if len(types) == 0 && len(s.Enum) > 0 {
		for _, e := range s.Enum {
			if b, err := json.Marshal(e); err == nil && !slices.Contains(types, jsonType(b)) {
				types = append(types, jsonType(b))
			}
		}
	}
	for i, ty := range types {
		switch ty {
		case "array":
			if s.Items != nil {
				if it := t.resolve(s.Items); it.Type != nil {
					types[i] = "list of " + t.typeOf(it)
				}
			}
		case "object":
			if ap, ok := s.AdditionalProperties.(map[string]any); ok && ap["type"] != nil {
				types[i] = "map of " + strings.Join(typeNames(ap["type"]), " or ")
			}
		}
	}
	if len(types) == 0 {
		return "any"
	}
	return strings.Join(types, " or ")
}

// typeNames reads a JSON Schema type: one name or a list.
func typeNames(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

// jsonType names the JSON type of an encoded value, for an enum without a type.
func jsonType(b []byte) string {
	switch {
	case b[0] == '"':
		return "string"
	case string(b) == "true" || string(b) == "false":
		return "boolean"
	default:
		return "number"
	}
}

// cell makes text safe inside a Markdown table cell: no pipe ends the cell, no line breaks
// the row and no <placeholder> reads as an HTML tag.
var cellEscapes = strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;")

func cell(s string) string { return cellEscapes.Replace(s) }
