package celldsim

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CELLD_SIM_STATE_MODE values (comma list, evaluated per request):
//
//	normal                  the document
//	slow:<ms>               wait before the headers
//	slow-body:<ms>          send headers and half the body, then wait
//	hang                    never answer
//	reset                   close the connection without a response
//	status:<code>           that status (503 says "predecessor recovery in progress", 307 has a Location)
//	oversized               a valid object larger than 1 MiB
//	malformed               the body cut in half
//	duplicate-key[:path]    repeat one key (default shutdown.runtime_generation)
//	trailing                a valid object followed by {}
//	array | null | scalar   top level not an object
//	deep                    nesting deeper than 64
//	missing:<path>          drop a field (dotted path); null:<path> sets it to null
//	schema:<n>              shutdown.schema_version = n
//	generation:<str>        shutdown.runtime_generation = str
//	wrong-type:<path>       a string where the schema has another type
//	bad-deployment          generation 0, empty version, a cell ahead of the generation
//	invalid-utf8            invalid bytes inside a string value
func (p *proc) serveState(w http.ResponseWriter, r *http.Request, doc map[string]any, mode string) {
	body := encode(doc, "", mutateDocument(doc, mode))
	for _, m := range strings.Split(mode, ",") {
		name, arg, _ := strings.Cut(strings.TrimSpace(m), ":")
		ms, _ := strconv.Atoi(arg)
		switch name {
		case "slow":
			if !sleepCtx(r, time.Duration(ms)*time.Millisecond) {
				return
			}
		case "hang":
			<-r.Context().Done()
			return
		case "reset":
			resetConn(w)
			return
		case "status":
			writeStatus(w, arg)
			return
		case "malformed":
			body = body[:len(body)/2]
		case "trailing":
			body = append(body, []byte("{}")...)
		case "array":
			body = append(append([]byte("["), body...), ']')
		case "null":
			if arg == "" {
				body = []byte("null")
			}
		case "scalar":
			body = []byte("42")
		case "slow-body":
			slowBody(w, r, body, time.Duration(ms)*time.Millisecond)
			return
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// mutateDocument applies the field-level modes to doc and returns the dotted path of a key to
// duplicate ("" for none).
func mutateDocument(doc map[string]any, mode string) string {
	var dup string
	for _, m := range strings.Split(mode, ",") {
		name, arg, _ := strings.Cut(strings.TrimSpace(m), ":")
		switch name {
		case "missing":
			setPath(doc, arg, nil, true)
		case "null":
			setPath(doc, arg, nil, false)
		case "schema":
			n, _ := strconv.Atoi(arg)
			setPath(doc, "shutdown.schema_version", n, false)
		case "generation":
			setPath(doc, "shutdown.runtime_generation", arg, false)
		case "wrong-type":
			setPath(doc, arg, "wrong-type", false)
		case "oversized":
			doc["shedding"] = strings.Repeat("x", 1<<20+1024)
		case "deep":
			var v any = map[string]any{}
			for range 70 {
				v = map[string]any{"d": v}
			}
			doc["deep"] = v
		case "bad-deployment":
			doc["deployment"] = map[string]any{"version": "", "prefix": "deploy/app/", "generation": 0, "swapping": 0,
				"cells": map[string]any{"Cell:" + strings.Repeat("0", 64): 7}, "draining": []any{}}
		case "invalid-utf8":
			doc["shedding"] = rawString("bad\xff\xfeutf8")
		case "duplicate-key":
			dup = arg
			if dup == "" {
				dup = "shutdown.runtime_generation"
			}
		}
	}
	return dup
}

func writeStatus(w http.ResponseWriter, arg string) {
	code, _ := strconv.Atoi(arg)
	if code == http.StatusTemporaryRedirect {
		w.Header().Set("Location", "http://127.0.0.1:1/state")
	}
	msg := []byte(`{"error":"simulated"}`)
	if code == http.StatusServiceUnavailable {
		msg = []byte("predecessor recovery in progress")
	}
	writeJSON(w, code, msg)
}

// slowBody sends the headers and half the body, stalls, then sends the rest.
func slowBody(w http.ResponseWriter, r *http.Request, body []byte, d time.Duration) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body[:len(body)/2])
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if sleepCtx(r, d) {
		_, _ = w.Write(body[len(body)/2:])
	}
}

// rawString is written into the JSON as is, so it can carry invalid UTF-8.
type rawString string

// encode writes v as JSON with sorted keys; at the dotted path dup it writes the key twice.
func encode(v any, path, dup string) []byte {
	var b bytes.Buffer
	encodeTo(&b, v, path, dup)
	return b.Bytes()
}

func encodeTo(b *bytes.Buffer, v any, path, dup string) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			child := k
			if path != "" {
				child = path + "." + k
			}
			n := 1
			if child == dup {
				n = 2
			}
			for j := range n {
				if i > 0 || j > 0 {
					b.WriteByte(',')
				}
				kb, _ := json.Marshal(k)
				b.Write(kb)
				b.WriteByte(':')
				encodeTo(b, t[k], child, dup)
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeTo(b, e, path, dup)
		}
		b.WriteByte(']')
	case rawString:
		b.WriteString(`"` + string(t) + `"`)
	default:
		vb, _ := json.Marshal(t)
		b.Write(vb)
	}
}

// setPath sets (or with remove deletes) the field at a dotted path, if its parents exist.
func setPath(doc map[string]any, path string, v any, remove bool) {
	parts := strings.Split(path, ".")
	cur := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return
		}
		cur = next
	}
	if remove {
		delete(cur, parts[len(parts)-1])
		return
	}
	cur[parts[len(parts)-1]] = v
}

func sleepCtx(r *http.Request, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
		return false
	}
}

// resetConn closes the TCP connection with a RST and no response.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
