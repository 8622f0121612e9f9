package gen

import (
	"strings"
	"testing"
)

func TestTableListsLeavesWithTypesDefaultsAndDescriptions(t *testing.T) {
	schema := `{"properties": {
	  "b": {"type": "object", "properties": {"port": {"type": "integer", "description": "the port | not 0"}}},
	  "a": {"$ref": "#/$defs/labels", "description": "labels of <name>"},
	  "mode": {"enum": ["On", "Off"], "description": "mode"},
	  "global": {"type": "object", "description": "globals"}},
	 "$defs": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}}`
	values := "b:\n  port: 8084\na: {x: z}\nmode: \"On\"\n"
	got, err := Table([]byte(schema), []byte(values))
	if err != nil {
		t.Fatal(err)
	}
	want := "| Key | Type | Default | Description |\n| --- | --- | --- | --- |\n" +
		"| `a` | map of string | `{\"x\":\"z\"}` | labels of &lt;name&gt; |\n" +
		"| `b.port` | integer | `8084` | the port \\| not 0 |\n" +
		"| `global` | object | (unset) | globals |\n" +
		"| `mode` | string | `\"On\"` | mode |\n"
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestTableRefusesUndocumentedValues(t *testing.T) {
	for name, c := range map[string]struct{ schema, values, want string }{
		"a leaf without a description":  {`{"properties": {"a": {"type": "string"}}}`, "a: x\n", "a has no description"},
		"a value without a schema":      {`{"properties": {"a": {"type": "string", "description": "d"}}}`, "a: x\nb: y\n", "b has no schema"},
		"a nested value without schema": {`{"properties": {"o": {"type": "object", "properties": {"a": {"type": "string", "description": "d"}}}}}`, "o: {a: x, c: y}\n", "o.c has no schema"},
		"a dangling reference":          {`{"properties": {"a": {"$ref": "#/$defs/nope", "description": "d"}}}`, "a: x\n", "unresolved $ref"},
	} {
		_, err := Table([]byte(c.schema), []byte(c.values))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
		}
	}
}

func TestSpliceReplacesOnlyBetweenTheMarkers(t *testing.T) {
	readme := "intro\n" + Begin + "\nold table\n" + End + "\noutro\n"
	got, err := Splice([]byte(readme), "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + Begin + "\nnew table\n" + End + "\noutro\n"; string(got) != want {
		t.Errorf("spliced:\n%s\nwant:\n%s", got, want)
	}
	if _, err := Splice([]byte("no markers"), "t"); err == nil {
		t.Error("a README without markers was accepted")
	}
}
