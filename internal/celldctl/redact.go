package celldctl

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
)

// Redacted replaces every secret the support bundle would otherwise carry.
const Redacted = "REDACTED"

// lastApplied is kubectl's record of the last applied object; for a Secret it holds its data.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// sensitiveEnvName matches literal env values that are secrets by their name even though they
// are not read from a Secret.
var sensitiveEnvName = regexp.MustCompile(`(?i)(SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY)`)

// minScrubbed is the shortest secret value scrubbed from free text: shorter values would
// redact ordinary words and numbers, and protect nothing.
const minScrubbed = 4

// Redactor removes secrets from what the support bundle writes: structurally from objects
// (Secret data, every secret reference, kubectl's last-applied record, literal env values with
// a secret's name), and by value from every file (the values of the Secrets the fleet refers
// to, when they could be read, and their base64 forms), so a value that leaked into a log line
// or an event is removed too.
type Redactor struct {
	values []string
}

// AddSecretValues registers the values of a Secret to scrub from text.
func (r *Redactor) AddSecretValues(data map[string][]byte) {
	for _, v := range data {
		r.AddValue(string(v))
	}
}

// AddValue registers one secret value (and its base64 forms) to scrub from text.
func (r *Redactor) AddValue(v string) {
	v = strings.TrimSpace(v)
	if len(v) < minScrubbed {
		return
	}
	r.values = append(r.values, v,
		base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)),
		base64.URLEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)))
	// A multi-line value (a key file, librdkafka properties) also leaks line by line.
	for _, line := range strings.Split(v, "\n") {
		if line = strings.TrimSpace(line); len(line) >= minScrubbed && line != v {
			r.values = append(r.values, line)
		}
	}
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
}

// Text scrubs every registered value from s.
func (r *Redactor) Text(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	return s
}

// Object redacts an object (as decoded JSON) in place: a Secret's data, secret references of
// every shape the fleet, its Pods and its children use, kubectl's last-applied record, literal
// env values named like secrets, and managedFields (noise, and they name every field set).
func (r *Redactor) Object(obj map[string]any) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
		if ann, ok := md["annotations"].(map[string]any); ok {
			for k, v := range ann {
				if k == lastApplied {
					ann[k] = Redacted
					continue
				}
				// A JSON record in an annotation (the reservation's reserved-tuning record holds
				// the fleet's env) is redacted like the object itself.
				if text, ok := v.(string); ok && strings.HasPrefix(text, "{") {
					var rec map[string]any
					if json.Unmarshal([]byte(text), &rec) == nil {
						redactValue(rec)
						if b, err := json.Marshal(rec); err == nil {
							ann[k] = string(b)
						}
					}
				}
			}
		}
	}
	if obj["kind"] == "Secret" {
		for _, k := range []string{"data", "stringData"} {
			if d, ok := obj[k].(map[string]any); ok {
				for key := range d {
					d[key] = Redacted
				}
			}
		}
	}
	redactValue(obj)
}

// isSecretRefKey names the keys whose value refers to a Secret: env valueFrom.secretKeyRef and
// envFrom.secretRef on Pods, and the fleet API's secretKeyRef, headersSecretKeyRef,
// propertiesSecretKeyRef and credentialsSecretName.
func isSecretRefKey(k string) bool {
	return k == "secretKeyRef" || k == "secretRef" || strings.HasSuffix(k, "SecretKeyRef") || k == "credentialsSecretName"
}

func redactValue(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if isSecretRefKey(k) {
				t[k] = redactRef(child)
				continue
			}
			redactValue(child)
		}
		// An env entry {name, value} whose name says it is a secret.
		if name, ok := t["name"].(string); ok {
			if _, ok := t["value"].(string); ok && sensitiveEnvName.MatchString(name) {
				t["value"] = Redacted
			}
		}
	case []any:
		for _, child := range t {
			redactValue(child)
		}
	}
}

// redactRef replaces every string in a reference (name, key, optional) with Redacted.
func redactRef(v any) any {
	switch t := v.(type) {
	case string:
		return Redacted
	case map[string]any:
		out := map[string]any{}
		for k, child := range t {
			if _, isString := child.(string); isString {
				out[k] = Redacted
			} else {
				out[k] = child
			}
		}
		return out
	}
	return Redacted
}
