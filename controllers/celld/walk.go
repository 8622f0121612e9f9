package celld

import "bytes"

// The functions in this file walk bytes that ValidObject has already accepted. They do no error
// checking of their own; on anything else their result is meaningless (but they do not panic on
// an accepted document, which FuzzDecodeState holds them to).

// eachMember calls fn with the decoded key and the raw value of every member of the object at
// the start of obj. A null value is passed as nil, so the decoders treat null as missing.
func eachMember(obj []byte, fn func(key, value []byte)) {
	i := skipSpace(obj, 1) // past '{'
	if obj[i] == '}' {
		return
	}
	var buf [64]byte
	for {
		end := skipString(obj, i)
		key := obj[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			// an escaped spelling of a key we look for must still match it: "\u0064eployment"
			// is "deployment" to every other JSON reader
			key = appendUnquoted(buf[:0], key)
		}
		i = skipSpace(obj, end)
		i = skipSpace(obj, i+1) // past ':'
		end = skipValue(obj, i)
		v := obj[i:end]
		if v[0] == 'n' {
			v = nil
		}
		fn(key, v)
		i = skipSpace(obj, end)
		if obj[i] == '}' {
			return
		}
		i = skipSpace(obj, i+1) // past ','
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset just past the string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; ; {
		q := i + bytes.IndexByte(b[i:], '"')
		// the quote ends the string unless an odd run of backslashes escapes it
		n := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// skipValue returns the offset just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}
