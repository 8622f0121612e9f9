package celld

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// serve starts h on 127.0.0.1 and returns a client aimed at it.
func serve(t testing.TB, h http.Handler) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := NewClient(WithPort(uint16(port)))
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func body(b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}
}

// padded returns the fixture grown to exactly size bytes by a leading padding member.
func padded(t *testing.T, size int) []byte {
	doc := readFixture(t)
	head := []byte(`{"_padding":"`)
	tail := append([]byte(`",`), doc[1:]...)
	n := size - len(head) - len(tail)
	out := append(append(head, bytes.Repeat([]byte("p"), n)...), tail...)
	if len(out) != size {
		t.Fatalf("padded document is %d bytes, want %d", len(out), size)
	}
	return out
}

// insertMember adds a raw member at the start of the fixture.
func insertMember(t *testing.T, member string) []byte {
	doc := readFixture(t)
	return append([]byte("{"+member+","), doc[1:]...)
}

func TestReadStateOutcomes(t *testing.T) {
	fixture := readFixture(t)
	for _, tc := range []struct {
		name    string
		handler http.Handler
		want    error // nil: success
	}{
		{name: "a valid document is read", handler: body(fixture)},
		{name: "a body of exactly 1 MiB is accepted", handler: body(padded(t, MaxBody))},
		{name: "nesting of 64 is accepted", handler: body(insertMember(t, `"deep":`+nested(MaxDepth-1)))},
		{name: "any 2xx status is accepted", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			w.Write(fixture)
		})},
		{name: "501 is unsupported", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "not implemented", http.StatusNotImplemented)
		}), want: ErrUnsupported},
		{name: "500 is refused", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}), want: ErrStatus},
		{name: "503 during predecessor recovery is refused", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "predecessor recovery in progress", http.StatusServiceUnavailable)
		}), want: ErrStatus},
		{name: "a body of 1 MiB + 1 is too large", handler: body(padded(t, MaxBody+1)), want: ErrTooLarge},
		{name: "a streamed body beyond 1 MiB is too large", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			doc := padded(t, MaxBody+1)
			w.Write(doc[:1000])
			w.(http.Flusher).Flush() // no Content-Length: the cap must hold while reading
			w.Write(doc[1000:])
		}), want: ErrTooLarge},
		{name: "a declared length beyond 1 MiB is refused before reading", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			doc := padded(t, MaxBody+1)
			w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
			w.Write(doc)
		}), want: ErrTooLarge},
		{name: "duplicate keys are malformed", handler: body(insertMember(t, `"occupied":9`)), want: ErrDuplicateKey},
		{name: "trailing data is malformed", handler: body(append(bytes.Clone(fixture), "{}"...)), want: ErrTrailingData},
		{name: "nesting of 65 is malformed", handler: body(insertMember(t, `"deep":`+nested(MaxDepth))), want: ErrTooDeep},
		{name: "a truncated body is malformed", handler: body(fixture[:len(fixture)/2]), want: ErrSyntax},
		{name: "a top-level array is malformed", handler: body([]byte(`[]`)), want: ErrNotObject},
		{name: "an empty 200 is malformed", handler: body(nil), want: ErrNotObject},
		{name: "a missing deployment is unsupported", handler: body(edited(t, func(doc, _ map[string]any) { delete(doc, "deployment") })), want: ErrUnsupported},
		{name: "a cell beyond the current generation is malformed", handler: body(edited(t, func(_, dep map[string]any) {
			dep["cells"] = map[string]any{"Cell:x": 4}
		})), want: ErrInvalidDeployment},
		{name: "a reset connection is a transport error", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}), want: ErrTransport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, tc.handler)
			before := time.Now()
			r, err := c.ReadState(context.Background(), "127.0.0.1")
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("ReadState = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadState = %v", err)
			}
			if r.Deployment.Version != "9b7d21f0c4e8a365" || r.Deployment.ResidentCells != 3 {
				t.Fatalf("unexpected deployment %+v", r.Deployment)
			}
			if r.Sent.Before(before) || r.Received.Before(r.Sent) || r.Received.After(time.Now()) {
				t.Fatalf("receipt times are not within the call: sent %v, received %v", r.Sent, r.Received)
			}
		})
	}
}

func TestReadStateDoesNotFollowRedirects(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/state", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
		w.Write(readFixture(t))
	})
	c := serve(t, mux)
	if _, err := c.ReadState(context.Background(), "127.0.0.1"); !errors.Is(err, ErrRedirect) {
		t.Fatalf("ReadState = %v, want ErrRedirect", err)
	}
	if followed.Load() != 0 {
		t.Fatal("the client followed a redirect away from the pod it addressed")
	}
}

func TestReadStateGivesUpAfterTheCallTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"no headers", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{"stalled mid-body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "4096")
			w.Write([]byte(`{"occupied":`))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := serve(t, tc.handler)
			start := time.Now()
			_, err := c.ReadState(context.Background(), "127.0.0.1")
			elapsed := time.Since(start)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("ReadState = %v, want ErrTimeout", err)
			}
			if elapsed < CallTimeout || elapsed > CallTimeout+time.Second {
				t.Fatalf("the call ended after %v, want about %v", elapsed, CallTimeout)
			}
		})
	}
}

func TestReadStateHonoursTheCallersDeadline(t *testing.T) {
	c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.ReadState(ctx, "127.0.0.1"); !errors.Is(err, ErrTimeout) {
		t.Fatalf("ReadState = %v, want ErrTimeout", err)
	}
	if elapsed := time.Since(start); elapsed > CallTimeout {
		t.Fatalf("the call outlived the caller's 100ms deadline: %v", elapsed)
	}
}

func TestReadStateAddressesOnlyPodIPs(t *testing.T) {
	c := NewClient()
	for _, host := range []string{"celld.default.svc", "celld-0.celld", "10.0.0.7:8081", "", "0.0.0.0", "::", "fe80::1%eth0", "224.0.0.1", "http://10.0.0.7"} {
		if _, err := c.ReadState(context.Background(), host); !errors.Is(err, ErrInvalidAddress) {
			t.Errorf("ReadState(%q) = %v, want ErrInvalidAddress", host, err)
		}
	}
	for ip, want := range map[string]string{
		"10.0.0.7":        "http://10.0.0.7:8081/state",
		"fd00::7":         "http://[fd00::7]:8081/state",
		"::ffff:10.0.0.7": "http://10.0.0.7:8081/state",
	} {
		if got, err := c.URL(ip); err != nil || got != want {
			t.Errorf("URL(%q) = %q, %v; want %q", ip, got, err, want)
		}
	}
}

func TestClientTransportRules(t *testing.T) {
	c := NewClient()
	tr, ok := c.http.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport is %T", c.http.Transport)
	}
	if tr.Proxy != nil {
		t.Error("the transport consults a proxy; pods must be reached directly")
	}
	if tr.MaxConnsPerHost != 2 {
		t.Errorf("MaxConnsPerHost = %d, want 2", tr.MaxConnsPerHost)
	}
	if c.http.Timeout != 2*time.Second || c.http.CheckRedirect == nil {
		t.Errorf("call timeout %v and redirect check %v do not match the rules", c.http.Timeout, c.http.CheckRedirect != nil)
	}
}

func TestReadStateOpensAtMostTwoConnectionsToAPod(t *testing.T) {
	var conns atomic.Int32
	arrived, release := make(chan struct{}), make(chan struct{})
	fixture := readFixture(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Write(fixture)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewClient(WithPort(uint16(srv.Listener.Addr().(*net.TCPAddr).Port)))
	defer c.CloseIdleConnections()

	const calls = 5
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := c.ReadState(context.Background(), "127.0.0.1")
			errs <- err
		}()
	}
	for range calls { // serve the calls one at a time while the others wait
		<-arrived
		release <- struct{}{}
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n > 2 {
		t.Fatalf("%d concurrent calls opened %d connections to one pod, want at most 2", calls, n)
	}
}
