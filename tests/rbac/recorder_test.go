package rbac

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// access is one kind of request, as the API server's authorizer sees it: the verb comes from
// the same RequestInfoFactory the API server uses (GET of a collection is list, with
// ?watch=true it is watch, and so on).
type access struct {
	Namespace, Group, Resource, Verb string // Resource includes "/subresource"
}

func (a access) String() string {
	group := a.Group
	if group == "" {
		group = "core"
	}
	where := "cluster-wide"
	if a.Namespace != "" {
		where = "in namespace " + a.Namespace
	}
	return fmt.Sprintf("%s %s/%s %s", a.Verb, group, a.Resource, where)
}

// call is one recorded request and its outcome.
type call struct {
	access
	Name string
	Code int // HTTP status; 0 when the request failed before a response
}

// recorder collects every request an operator sends, through the transport of its rest.Config.
type recorder struct {
	info *request.RequestInfoFactory

	mu          sync.Mutex
	counts      map[access]int
	denied      []call
	nonResource map[string]int
}

func newRecorder() *recorder {
	return &recorder{
		info:        &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")},
		counts:      map[access]int{},
		nonResource: map[string]int{},
	}
}

// wrap is a rest.Config WrapTransport that records each request.
func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		r.record(req, code)
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (r *recorder) record(req *http.Request, code int) {
	info, err := r.info.NewRequestInfo(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || !info.IsResourceRequest {
		r.nonResource[req.Method+" "+req.URL.Path]++
		return
	}
	res := info.Resource
	if info.Subresource != "" {
		res += "/" + info.Subresource
	}
	a := access{Namespace: info.Namespace, Group: info.APIGroup, Resource: res, Verb: info.Verb}
	r.counts[a]++
	// A PATCH (server-side apply) or PUT that creates its object is authorized for create as
	// well: record the create it needed.
	if code == http.StatusCreated && (a.Verb == "patch" || a.Verb == "update") {
		c := a
		c.Verb = "create"
		r.counts[c]++
	}
	if code == http.StatusForbidden {
		r.denied = append(r.denied, call{access: a, Name: info.Name, Code: code})
	}
}

// accesses returns every distinct request kind recorded so far, sorted.
func (r *recorder) accesses() []access {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]access, 0, len(r.counts))
	for a := range r.counts {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// deniedCalls returns the 403 answers recorded so far, minus those expected says are fine.
func (r *recorder) deniedCalls(expected func(call) bool) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.denied {
		if expected == nil || !expected(c) {
			out = append(out, c)
		}
	}
	return out
}

// summary lists the recorded request kinds with their counts, for the test log.
func (r *recorder) summary() string {
	var b strings.Builder
	for _, a := range r.accesses() {
		r.mu.Lock()
		n := r.counts[a]
		r.mu.Unlock()
		fmt.Fprintf(&b, "  %5d  %s\n", n, a)
	}
	return b.String()
}

func describeDenied(calls []call) string {
	var b strings.Builder
	for _, c := range calls {
		fmt.Fprintf(&b, "\n  403 Forbidden: %s (object %q)", c.access, c.Name)
	}
	return b.String()
}
