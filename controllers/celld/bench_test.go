package celld

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
)

// Run with: go test -run='^$' -bench=. -benchmem ./controllers/celld

// manyCells returns the fixture with as many resident cells as fit in just under MaxBody: a
// node at the size limit made of real structure, not padding.
func manyCells(b *testing.B) []byte {
	var out []byte
	for n := 1000; ; n += 250 {
		doc := edited(b, func(doc, dep map[string]any) {
			cells, list := map[string]any{}, make([]any, 0, n)
			for i := range n {
				sum := sha256.Sum256([]byte(strconv.Itoa(i)))
				id := "Cell:" + hex.EncodeToString(sum[:])
				cells[id] = 3 - i%2
				list = append(list, id)
			}
			dep["cells"], doc["residents"], doc["published"] = cells, list, list
		})
		if len(doc) > MaxBody {
			return out
		}
		out = doc
	}
}

func benchDecode(b *testing.B, doc []byte) {
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeState(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeStateTypical(b *testing.B) { benchDecode(b, readFixture(b)) }

func BenchmarkDecodeStateManyCells1MiB(b *testing.B) { benchDecode(b, manyCells(b)) }

func BenchmarkDecodeStatePadded1MiB(b *testing.B) {
	doc := readFixture(b)
	pad := make([]byte, MaxBody-len(doc)-len(`"_padding":"",`))
	for i := range pad {
		pad[i] = 'p'
	}
	benchDecode(b, append(append(append([]byte(`{"_padding":"`), pad...), `",`...), doc[1:]...))
}

// BenchmarkEncodingJSONManyCells1MiB is the baseline: the same body into map[string]any.
func BenchmarkEncodingJSONManyCells1MiB(b *testing.B) {
	doc := manyCells(b)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRead(b *testing.B, doc []byte) {
	c := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(doc) }))
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.ReadState(context.Background(), "127.0.0.1"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadStateTypical(b *testing.B) { benchRead(b, readFixture(b)) }

func BenchmarkReadStateManyCells1MiB(b *testing.B) { benchRead(b, manyCells(b)) }
