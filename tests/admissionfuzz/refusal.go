package admissionfuzz

import (
	"errors"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Refusal is what the API server said when it refused an object: the whole message and the
// causes (each a field path, a kind of error and a message).
type Refusal struct {
	Message string
	Causes  []metav1.StatusCause
}

// RefusalOf extracts the refusal from a client error; ok is false for an error that is not an
// API status (a transport failure).
func RefusalOf(err error) (Refusal, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return Refusal{}, false
	}
	s := status.Status()
	r := Refusal{Message: s.Message}
	if s.Details != nil {
		r.Causes = s.Details.Causes
	}
	return r, true
}

// genericKeys are field names too common to identify a field when a message spells them
// without their path.
var genericKeys = map[string]bool{"name": true, "key": true, "value": true, "": true}

var index = regexp.MustCompile(`\[[^]]*\]`)

// Names reports whether the refusal names one of the mutated fields, and which: a cause's
// field is the mutated path, lies inside it (a required field of a deleted object), or is an
// ancestor of it below spec (a rule on the list or object that holds it); or a message spells
// the mutated path, or the field's own name as a word (a cross-field rule reported at the
// other field, such as the zones refused for a changed region).
func (r Refusal) Names(ms []Mutation) (Mutation, bool) {
	for _, m := range ms {
		for _, c := range r.Causes {
			if pathRelated(c.Field, m.Path) || mentions(c.Message, m) {
				return m, true
			}
		}
		if mentions(r.Message, m) {
			return m, true
		}
	}
	return Mutation{}, false
}

// pathRelated: one path contains the other. An ancestor counts only below the top-level
// object (not "spec" or "metadata" alone), which would name every field.
func pathRelated(cause, mutated string) bool {
	if cause == "" {
		return false
	}
	c, m := index.ReplaceAllString(cause, "[]"), index.ReplaceAllString(mutated, "[]")
	switch {
	case c == m, cause == mutated:
		return true
	case within(cause, mutated) || within(c, m): // the cause is inside the mutated field
		return true
	case within(mutated, cause) || within(m, c): // the cause is an ancestor
		return strings.Count(c, ".") >= 1
	}
	return false
}

// within: path lies strictly inside parent.
func within(path, parent string) bool {
	return strings.HasPrefix(path, parent+".") || strings.HasPrefix(path, parent+"[")
}

func mentions(message string, m Mutation) bool {
	if message == "" {
		return false
	}
	if strings.Contains(message, m.Path) || strings.Contains(message, index.ReplaceAllString(m.Path, "")) {
		return true
	}
	// A metadata field of the wrong JSON type fails decoding into the Go type, and the API
	// server names it by its Go struct: "Go struct field ObjectMeta.name".
	if rest, ok := strings.CutPrefix(m.Path, "metadata."); ok && strings.Contains(message, "ObjectMeta."+rest) {
		return true
	}
	if genericKeys[m.Key] {
		return false
	}
	return word(message, m.Key)
}

// word: key occurs in s delimited by characters that cannot continue a field name.
func word(s, key string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], key)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(key)
		if (start == 0 || !identChar(s[start-1])) && (end == len(s) || !identChar(s[end])) {
			return true
		}
		i = start + 1
	}
}

func identChar(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
