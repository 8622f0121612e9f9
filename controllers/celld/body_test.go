package celld

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// readBody grows a small buffer to the body's size, whatever the reader's chunking, and
// refuses a body beyond MaxBody without reading it whole.
func TestReadBodyGrowsToTheBodyAndRefusesMore(t *testing.T) {
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"halves":   iotest.HalfReader,
	}
	for _, size := range []int{0, 1, 511, pooledBody - 1, pooledBody, pooledBody + 1, 300 << 10, MaxBody, MaxBody + 1, 2 * MaxBody} {
		body := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		for name, wrap := range readers {
			if name == "one byte" && size > 64<<10 {
				continue // a megabyte one byte at a time proves nothing the halves do not
			}
			got, err := readBody(wrap(bytes.NewReader(body)), make([]byte, 0, pooledBody))
			if size > MaxBody {
				if !errors.Is(err, ErrTooLarge) {
					t.Errorf("%d bytes (%s): err %v, want ErrTooLarge", size, name, err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("%d bytes (%s): read %d bytes, err %v; want the body whole", size, name, len(got), err)
			}
		}
	}
}

// A reader's error other than EOF is returned, not taken for the end of the body.
func TestReadBodyReturnsTheReadersError(t *testing.T) {
	broken := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader([]byte("{\"ce")), iotest.ErrReader(broken))
	if _, err := readBody(r, nil); !errors.Is(err, broken) {
		t.Fatalf("err %v, want %v", err, broken)
	}
}
