package celld

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"testing"
	"unicode/utf8"
)

// Run longer with: go test -run='^$' -fuzz=FuzzValidObject -fuzztime=10m ./controllers/celld

// seeds are documents both fuzz targets start from: the fixture, the simulator's fault shapes
// (celld-runtime.md §5.7) and the escape and nesting corner cases.
func seeds(f *testing.F) {
	doc := readFixture(f)
	f.Add(doc)
	f.Add(bytes.ReplaceAll(doc, []byte("\n"), nil))
	for _, s := range []string{
		`{}`, `[]`, `null`, `"x"`, `1`, ``, ` {} `, `{}{}`, `{} x`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"\ud800":1,"\udc00":2}`, "{\"\xff\":1,\"\xfe\":2}",
		`{"a":"\ud83d\ude00","b":[true,false,null,-1.5e-3]}`,
		nested(MaxDepth), nested(MaxDepth + 1), nestedArrays(MaxDepth + 1),
		`{"deployment":null}`, `{"deployment":{}}`, `{"deployment":[]}`,
		`{"deployment":{"cells":{"c":1},"generation":1,"prefix":"p","swapping":0,"version":"v"}}`,
		`{"deployment":{"cells":{"c":2},"generation":1,"prefix":"p","swapping":0,"version":"v"}}`,
		`{"deployment":{"cells":{},"generation":0,"prefix":"p","swapping":-1,"version":""}}`,
		`{"d\u0065ployment":{"cells":{"c":1,"c":1},"generation":1,"prefix":"p","swapping":0,"version":"v"}}`,
		`{"deployment":{"cells":{},"generation":1,"prefix":"p","swapping":0,"version":"v"},"shutdown":{"runtime_generation":7}}`,
	} {
		f.Add([]byte(s))
	}
	trimmed := bytes.TrimRight(doc, "\n}")
	f.Add(append(bytes.Clone(trimmed), `,"occupied":1}`...))        // duplicate key
	f.Add(append(bytes.Clone(doc), `{}`...))                        // trailing object
	f.Add(doc[:len(doc)/2])                                         // truncated
	f.Add(bytes.Replace(doc, []byte("shop"), []byte("sh\xffp"), 1)) // invalid UTF-8
}

// referenceVerdict judges b with encoding/json alone: json.Valid for syntax, then a token walk
// for the object, depth and duplicate-key rules. It returns "" for accept or why it refuses.
func referenceVerdict(b []byte) string {
	if !json.Valid(b) {
		return "encoding/json finds it invalid"
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return "not an object"
	}
	d := json.NewDecoder(bytes.NewReader(b))
	type level struct {
		keys     map[string]bool
		wantsKey bool
	}
	var stack []*level
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			return "token walk failed: " + err.Error()
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.wantsKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return "duplicate key " + strconv.Quote(k)
				}
				top.keys[k] = true
				top.wantsKey = false
				continue
			}
		}
		if top != nil {
			top.wantsKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{keys: map[string]bool{}, wantsKey: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > MaxDepth {
			return "too deep"
		}
	}
}

func FuzzValidObject(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		got := ValidObject(b)
		if got != nil && !errors.Is(got, ErrMalformed) {
			t.Fatalf("refusal %v does not map to ErrMalformed", got)
		}
		want := referenceVerdict(b)
		switch {
		case got == nil && want != "":
			t.Fatalf("ValidObject accepted %q, but encoding/json says: %s", b, want)
		case got != nil && want == "":
			t.Fatalf("ValidObject refused %q (%v), but encoding/json accepts it", b, got)
		case got == nil:
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("ValidObject accepted %q, but it does not unmarshal into a map: %v", b, err)
			}
		}
	})
}

// referenceDeployment decodes the application view with encoding/json from a document
// ValidObject accepted: "unsupported", "malformed" or "" with the result.
func referenceDeployment(b []byte) (Deployment, string, string) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		return Deployment{}, "", "malformed"
	}
	u := func(v any) (uint64, bool) {
		n, ok := v.(json.Number)
		if !ok {
			return 0, false
		}
		x, err := strconv.ParseUint(string(n), 10, 64)
		return x, err == nil
	}
	str := func(v any, min, max int) (string, bool) {
		s, ok := v.(string)
		n := utf8.RuneCountInString(s)
		return s, ok && n >= min && n <= max
	}
	var gen string
	switch sh := doc["shutdown"].(type) {
	case nil:
	case map[string]any:
		if rg, present := sh["runtime_generation"]; present && rg != nil {
			var ok bool
			if gen, ok = str(rg, 0, 128); !ok {
				return Deployment{}, "", "malformed"
			}
		}
	default:
		return Deployment{}, "", "malformed"
	}
	raw, present := doc["deployment"]
	if !present || raw == nil {
		return Deployment{}, "", "unsupported"
	}
	dep, ok := raw.(map[string]any)
	if !ok {
		return Deployment{}, "", "malformed"
	}
	var out Deployment
	var ok1, ok2, ok3, ok4 bool
	out.Version, ok1 = str(dep["version"], 1, 256)
	out.Prefix, ok2 = str(dep["prefix"], 1, 1024)
	out.Generation, ok3 = u(dep["generation"])
	swapping, ok4 := u(dep["swapping"])
	cells, ok5 := dep["cells"].(map[string]any)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || out.Generation == 0 || swapping > 1e9 {
		return Deployment{}, "", "malformed"
	}
	out.SwappingCells = int64(swapping)
	for _, v := range cells {
		g, ok := u(v)
		if !ok || g > out.Generation {
			return Deployment{}, "", "malformed"
		}
		out.ResidentCells++
		if g != out.Generation {
			out.PendingCells++
		}
	}
	return out, gen, ""
}

func FuzzDecodeState(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeState(b)
		if ValidObject(b) != nil {
			if err == nil {
				t.Fatalf("DecodeState accepted %q, which ValidObject refuses", b)
			}
			return
		}
		want, gen, verdict := referenceDeployment(b)
		switch {
		case verdict == "unsupported":
			if !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeState(%q) = %v, encoding/json finds no deployment", b, err)
			}
		case verdict == "malformed":
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeState(%q) = %v, encoding/json finds the deployment invalid", b, err)
			}
		case err != nil:
			t.Fatalf("DecodeState(%q) = %v, encoding/json decodes %+v", b, err, want)
		case st.Deployment != want || st.RuntimeGeneration != gen:
			t.Fatalf("DecodeState(%q) = %+v %q, encoding/json decodes %+v %q", b, st.Deployment, st.RuntimeGeneration, want, gen)
		case st.Load == nil && st.LoadErr == nil, st.Load != nil && st.LoadErr != nil:
			t.Fatalf("exactly one of Load and LoadErr must be set: %+v, %v", st.Load, st.LoadErr)
		}
	})
}
