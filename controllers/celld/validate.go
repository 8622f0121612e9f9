package celld

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting ValidObject accepts. The top-level object counts as depth 1,
// so 64 nested containers pass and 65 fail. A real /state document is four levels deep; the
// limit only exists so a hostile body cannot make us walk an unbounded stack.
const MaxDepth = 64

// Errors from ValidObject. Each of them wraps ErrMalformed, so a caller that only needs the
// condition reason checks errors.Is(err, ErrMalformed).
var (
	ErrMalformed    = errors.New("malformed celld response")
	ErrNotObject    = fmt.Errorf("%w: top-level value is not a JSON object", ErrMalformed)
	ErrDuplicateKey = fmt.Errorf("%w: duplicate object key", ErrMalformed)
	ErrTooDeep      = fmt.Errorf("%w: nesting deeper than %d", ErrMalformed, MaxDepth)
	ErrTrailingData = fmt.Errorf("%w: data after the top-level object", ErrMalformed)
	ErrSyntax       = fmt.Errorf("%w: invalid JSON", ErrMalformed)
)

// ValidObject reports whether b is exactly one JSON object (surrounding whitespace allowed) with
// no duplicate key at any depth, no nesting beyond MaxDepth and nothing after it. It reads b once
// and allocates nothing in the steady state.
//
// Keys are compared the way encoding/json would store them in a map: escapes are decoded and
// invalid UTF-8 or lone surrogates become U+FFFD, so "a" and "\u0061" are duplicates. Invalid
// UTF-8 inside strings is otherwise tolerated, as celld's contract requires (celld-runtime.md
// §2.6 and the simulator's invalid-utf8 mode): it cannot change the structure of the document.
func ValidObject(b []byte) error {
	s := scanners.Get().(*scanner)
	err := s.scan(b)
	s.reset()
	scanners.Put(s)
	return err
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// keyRef locates one decoded key: in the input when the raw bytes already are the decoded form,
// otherwise in scanner.scratch.
type keyRef struct {
	start, end int
	scratch    bool
}

// frame is one open container.
type frame struct {
	object     bool
	offset     int  // where the container starts, for messages
	firstKey   int  // index in scanner.keys of this object's first key
	scratchLen int  // scanner.scratch length when the object opened
	unsorted   bool // keys did not arrive in strictly increasing order
}

type scanner struct {
	data    []byte
	pos     int
	stack   []frame
	keys    []keyRef
	scratch []byte
}

func (s *scanner) reset() {
	s.data = nil
	s.stack = s.stack[:0]
	s.keys = s.keys[:0]
	s.scratch = s.scratch[:0]
}

func (s *scanner) fail(base error, format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", base, s.pos, fmt.Sprintf(format, args...))
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// scan walks the document with an explicit stack and no recursion. Each step parses one value;
// a completed value is followed by afterValue, which closes what the input closes and consumes
// the separator before the next value.
func (s *scanner) scan(b []byte) error {
	s.data, s.pos = b, 0
	s.skipSpace()
	if s.pos >= len(s.data) {
		return s.fail(ErrNotObject, "empty body")
	}
	if s.data[s.pos] != '{' {
		return s.fail(ErrNotObject, "starts with %q", s.data[s.pos])
	}
	for {
		opened, err := s.value()
		if err != nil {
			return err
		}
		if opened {
			continue // the next value is the container's first element
		}
		if err := s.afterValue(); err != nil {
			return err
		}
		if len(s.stack) == 0 {
			s.skipSpace()
			if s.pos != len(s.data) {
				return s.fail(ErrTrailingData, "%d bytes follow the object", len(s.data)-s.pos)
			}
			return nil
		}
	}
}

// value consumes one value. For a non-empty container it only consumes the opening (and, for an
// object, the first key) and reports opened.
func (s *scanner) value() (opened bool, err error) {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return false, s.fail(ErrSyntax, "unexpected end of input")
	}
	switch c := s.data[s.pos]; {
	case c == '{' || c == '[':
		if len(s.stack) == MaxDepth {
			return false, s.fail(ErrTooDeep, "container %d levels deep", MaxDepth+1)
		}
		s.stack = append(s.stack, frame{object: c == '{', offset: s.pos, firstKey: len(s.keys), scratchLen: len(s.scratch)})
		s.pos++
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == c+2 { // '{'+2 == '}', '['+2 == ']'
			return false, nil // empty: afterValue closes it
		}
		if c == '{' {
			return true, s.memberHead()
		}
		return true, nil
	case c == '"':
		_, _, err := s.str()
		return false, err
	case c == '-' || (c >= '0' && c <= '9'):
		return false, s.number()
	case c == 't':
		return false, s.literal("true")
	case c == 'f':
		return false, s.literal("false")
	case c == 'n':
		return false, s.literal("null")
	default:
		return false, s.fail(ErrSyntax, "unexpected %q", c)
	}
}

// memberHead consumes `"key":`.
func (s *scanner) memberHead() error {
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return s.fail(ErrSyntax, "expected an object key")
	}
	if err := s.key(); err != nil {
		return err
	}
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return s.fail(ErrSyntax, "expected ':' after an object key")
	}
	s.pos++
	return nil
}

// afterValue closes containers and consumes the separator (and next key) before the next value.
func (s *scanner) afterValue() error {
	for len(s.stack) > 0 {
		s.skipSpace()
		if s.pos >= len(s.data) {
			return s.fail(ErrSyntax, "unexpected end of input")
		}
		top := &s.stack[len(s.stack)-1]
		c := s.data[s.pos]
		s.pos++
		switch {
		case c == ',' && top.object:
			return s.memberHead()
		case c == ',':
			return nil
		case c == '}' && top.object:
			if err := s.closeObject(top); err != nil {
				return err
			}
			s.stack = s.stack[:len(s.stack)-1]
		case c == ']' && !top.object:
			s.stack = s.stack[:len(s.stack)-1]
		default:
			s.pos--
			return s.fail(ErrSyntax, "unexpected %q after a value", c)
		}
	}
	return nil
}

// key records an object key and checks it against the previous key of the same object. celld
// serialises keys in sorted order, so the common case needs one comparison per key and no sort.
func (s *scanner) key() error {
	start := s.pos + 1
	end, plain, err := s.str()
	if err != nil {
		return err
	}
	ref := keyRef{start: start, end: end}
	if !plain {
		ref = keyRef{start: len(s.scratch), scratch: true}
		s.scratch = appendUnquoted(s.scratch, s.data[start:end])
		ref.end = len(s.scratch)
	}
	top := &s.stack[len(s.stack)-1]
	if n := len(s.keys); n > top.firstKey && !top.unsorted {
		switch bytes.Compare(s.keyBytes(s.keys[n-1]), s.keyBytes(ref)) {
		case 0:
			return s.fail(ErrDuplicateKey, "%q", s.keyBytes(ref))
		case 1:
			top.unsorted = true
		}
	}
	s.keys = append(s.keys, ref)
	return nil
}

func (s *scanner) keyBytes(k keyRef) []byte {
	if k.scratch {
		return s.scratch[k.start:k.end]
	}
	return s.data[k.start:k.end]
}

// closeObject finishes the duplicate check of the object on top of the stack and forgets its keys.
func (s *scanner) closeObject(f *frame) error {
	keys := s.keys[f.firstKey:]
	if f.unsorted {
		slices.SortFunc(keys, func(a, b keyRef) int { return bytes.Compare(s.keyBytes(a), s.keyBytes(b)) })
		for i := 1; i < len(keys); i++ {
			if bytes.Equal(s.keyBytes(keys[i-1]), s.keyBytes(keys[i])) {
				return fmt.Errorf("%w: %q in the object at offset %d", ErrDuplicateKey, s.keyBytes(keys[i]), f.offset)
			}
		}
	}
	s.keys = s.keys[:f.firstKey]
	s.scratch = s.scratch[:f.scratchLen]
	return nil
}

// str consumes a string starting at the opening quote. It returns the offset of the closing quote
// and whether the raw bytes are already the decoded form (no escapes, valid UTF-8).
func (s *scanner) str() (end int, plain bool, err error) {
	s.pos++ // opening quote
	start := s.pos
	plain, ascii := true, true
	for {
		for s.pos < len(s.data) && plainByte[s.data[s.pos]] {
			s.pos++
		}
		if s.pos >= len(s.data) {
			break
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			end = s.pos
			s.pos++
			if !ascii && plain {
				plain = utf8.Valid(s.data[start:end])
			}
			return end, plain, nil
		case c == '\\':
			plain = false
			if err := s.escape(); err != nil {
				return 0, false, err
			}
			continue
		case c < 0x20:
			return 0, false, s.fail(ErrSyntax, "control character %#x in a string", c)
		default: // c >= utf8.RuneSelf
			ascii = false
		}
		s.pos++
	}
	return 0, false, s.fail(ErrSyntax, "unterminated string")
}

// plainByte marks the bytes a string holds without a second look: printable ASCII except the
// quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escape consumes one backslash escape.
func (s *scanner) escape() error {
	if s.pos+1 >= len(s.data) {
		return s.fail(ErrSyntax, "unterminated escape")
	}
	switch s.data[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
		return nil
	case 'u':
		if s.pos+6 > len(s.data) || hex4(s.data[s.pos+2:s.pos+6]) < 0 {
			return s.fail(ErrSyntax, "invalid \\u escape")
		}
		s.pos += 6
		return nil
	default:
		return s.fail(ErrSyntax, "invalid escape \\%c", s.data[s.pos+1])
	}
}

// hex4 decodes four hex digits, or returns -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendUnquoted appends the decoded form of the raw (already validated) string contents raw,
// replacing invalid UTF-8 and unpaired surrogates with U+FFFD as encoding/json does.
func appendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			switch e := raw[i+1]; e {
			case 'u':
				r := hex4(raw[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if pair := utf16.DecodeRune(r, hex4(raw[i+2:])); pair != utf8.RuneError {
							dst = utf8.AppendRune(dst, pair)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
			default:
				dst = append(dst, unescaped[e])
				i += 2
			}
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			dst = utf8.AppendRune(dst, r) // RuneError for an invalid byte
			i += n
		}
	}
	return dst
}

var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// number consumes -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.data) && s.data[s.pos] == '0':
		s.pos++
	case s.digits() == 0:
		return s.fail(ErrSyntax, "invalid number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return s.fail(ErrSyntax, "invalid number fraction")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return s.fail(ErrSyntax, "invalid number exponent")
		}
	}
	return nil
}

func (s *scanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

func (s *scanner) literal(word string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return s.fail(ErrSyntax, "invalid literal")
	}
	s.pos += len(word)
	return nil
}
