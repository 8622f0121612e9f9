package celld

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// nested returns n objects nested inside each other: depth n.
func nested(n int) string {
	return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1)
}

// nestedArrays returns one object holding n-1 nested arrays: depth n.
func nestedArrays(n int) string {
	return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}"
}

func TestValidObjectAcceptsExactlyOneWellFormedObject(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
	}{
		{"empty object", `{}`},
		{"surrounding whitespace", " \t\r\n{ \"a\" : 1 }\n\n"},
		{"every value kind", `{"s":"x","n":-0.5e+10,"i":0,"t":true,"f":false,"z":null,"o":{},"a":[1,"2",[],{}]}`},
		{"keys in reverse order", `{"c":1,"b":2,"a":3}`},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]}`},
		{"same key at different depths", `{"k":{"k":{"k":1}}}`},
		{"escaped keys that differ", `{"\u0061":1,"\u0062":2,"a\"":3,"a\\":4}`},
		{"a surrogate pair and its replacement are different keys", `{"\ud83d\ude00":1,"\ufffd":2}`},
		{"all escapes", `{"e":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}`},
		{"invalid UTF-8 inside a string value is tolerated", "{\"v\":\"\xff\xfe\"}"},
		{"nesting of exactly 64 objects", nested(MaxDepth)},
		{"nesting of exactly 64 containers with arrays", nestedArrays(MaxDepth)},
		{"large integers and exponents", `{"a":18446744073709551616,"b":1E400,"c":-0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidObject([]byte(tc.doc)); err != nil {
				t.Fatalf("a well-formed single object was refused: %v", err)
			}
		})
	}
}

func TestValidObjectRefusesAnythingElse(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      error
	}{
		{"empty body", ``, ErrNotObject},
		{"only whitespace", " \n", ErrNotObject},
		{"array", `[{"a":1}]`, ErrNotObject},
		{"null", `null`, ErrNotObject},
		{"scalar", `"{}"`, ErrNotObject},
		{"byte order mark", "\xef\xbb\xbf{}", ErrNotObject},
		{"second object", `{"a":1}{}`, ErrTrailingData},
		{"trailing garbage", `{"a":1} x`, ErrTrailingData},
		{"trailing NUL", "{}\x00", ErrTrailingData},
		{"duplicate at top level", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"duplicate not adjacent", `{"b":1,"a":2,"b":3}`, ErrDuplicateKey},
		{"duplicate in a nested object", `{"x":{"y":[{"k":1,"j":0,"k":2}]}}`, ErrDuplicateKey},
		{"duplicate through an escape", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"duplicate through an escaped slash", `{"a/b":1,"a\/b":2}`, ErrDuplicateKey},
		{"duplicate through a surrogate pair", "{\"\U0001F600\":1,\"\\ud83d\\ude00\":2}", ErrDuplicateKey},
		{"duplicate through two lone surrogates", `{"\ud800":1,"\udc00":2}`, ErrDuplicateKey},
		{"duplicate through invalid UTF-8", "{\"\xff\":1,\"\xfe\":2}", ErrDuplicateKey},
		{"duplicate empty key", `{"":1,"":2}`, ErrDuplicateKey},
		{"nesting of 65 objects", nested(MaxDepth + 1), ErrTooDeep},
		{"nesting of 65 containers with arrays", nestedArrays(MaxDepth + 1), ErrTooDeep},
		{"truncated", `{"a":{"b":1}`, ErrSyntax},
		{"truncated in a string", `{"a":"b`, ErrSyntax},
		{"missing colon", `{"a" 1}`, ErrSyntax},
		{"missing comma", `{"a":1 "b":2}`, ErrSyntax},
		{"trailing comma", `{"a":1,}`, ErrSyntax},
		{"trailing comma in array", `{"a":[1,]}`, ErrSyntax},
		{"unquoted key", `{a:1}`, ErrSyntax},
		{"single quotes", `{'a':1}`, ErrSyntax},
		{"leading zero", `{"a":01}`, ErrSyntax},
		{"bare minus", `{"a":-}`, ErrSyntax},
		{"empty fraction", `{"a":1.}`, ErrSyntax},
		{"empty exponent", `{"a":1e}`, ErrSyntax},
		{"plus sign", `{"a":+1}`, ErrSyntax},
		{"NaN", `{"a":NaN}`, ErrSyntax},
		{"misspelled literal", `{"a":tru}`, ErrSyntax},
		{"control character in a string", "{\"a\":\"\n\"}", ErrSyntax},
		{"invalid escape", `{"a":"\x41"}`, ErrSyntax},
		{"short unicode escape", `{"a":"\u12"}`, ErrSyntax},
		{"non-hex unicode escape", `{"a":"\u12g4"}`, ErrSyntax},
		{"mismatched brackets", `{"a":[}`, ErrSyntax},
		{"comment", `{"a":1 /* no */}`, ErrSyntax},
		{"non-ASCII outside strings", "{\"a\":1\xc2\xa0}", ErrSyntax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidObject([]byte(tc.doc))
			if !errors.Is(err, tc.want) {
				t.Fatalf("ValidObject(%q) = %v, want %v", tc.doc, err, tc.want)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not map to ErrMalformed", err)
			}
		})
	}
}

func TestValidObjectFindsDuplicatesAmongManyUnsortedKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 5000; i > 0; i-- {
		b.WriteString(`"k` + strconv.Itoa(i) + `":1,`)
	}
	ok := b.String() + `"end":0}`
	if err := ValidObject([]byte(ok)); err != nil {
		t.Fatalf("5000 distinct keys in reverse order were refused: %v", err)
	}
	dup := b.String() + `"k2500":0}`
	if err := ValidObject([]byte(dup)); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("a duplicate among 5000 unsorted keys was not found: %v", err)
	}
}

// The pool makes this hold for ValidObject too; the scanner is tested directly because the race
// detector deliberately drops pooled items.
func TestAReusedScannerAllocatesNothingOnAValidDocument(t *testing.T) {
	doc := readFixture(t)
	s := new(scanner)
	check := func() {
		if err := s.scan(doc); err != nil {
			t.Fatal(err)
		}
		s.reset()
	}
	check() // grow the stacks once
	if n := testing.AllocsPerRun(100, check); n != 0 {
		t.Fatalf("a reused scanner allocated %.1f times per document, want 0", n)
	}
}
