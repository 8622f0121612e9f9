package celld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Transport rules for the internal listener (celld-runtime.md §2.6).
const (
	// InternalPort is celld's internal listener, where /state lives.
	InternalPort = 8081
	// DialTimeout bounds the TCP connect. A listener that is bound but not yet accepting
	// (celld binds early in startup) accepts the SYN and then hangs, so the call timeout below
	// is what actually ends such a read.
	DialTimeout = time.Second
	// CallTimeout bounds one request from dial to the last body byte, so eight workers get
	// through 100 members well inside the observer's 10 s deadline even when some hang.
	CallTimeout = 2 * time.Second
	// MaxBody is the largest /state body accepted. A node with a large deployment stays far
	// below it; anything larger is refused rather than truncated, because a truncated
	// document could parse as a different, smaller one.
	MaxBody = 1 << 20
	// maxConnsPerHost keeps the observer from opening more than two connections to one pod.
	maxConnsPerHost = 2
)

var (
	// ErrInvalidAddress means the caller passed something other than a pod IP.
	ErrInvalidAddress = errors.New("not a pod IP address")
	// ErrRedirect means celld answered with a redirect, which the client never follows: the
	// operator must read the pod it addressed, not wherever the answer points.
	ErrRedirect = errors.New("celld answered with a redirect")
	// ErrStatus means celld answered with a non-2xx status other than 501.
	ErrStatus = errors.New("celld answered with an unexpected status")
	// ErrTooLarge means the body exceeded MaxBody.
	ErrTooLarge = fmt.Errorf("celld response exceeds %d bytes", MaxBody)
	// ErrTimeout means the call did not complete within CallTimeout or the caller's deadline.
	ErrTimeout = errors.New("celld did not answer in time")
	// ErrTransport means the connection failed (refused, reset, closed early).
	ErrTransport = errors.New("celld could not be reached")
)

// Reading is one decoded /state answer and when it was taken.
type Reading struct {
	State
	// Sent is when the request was started and Received when the whole body had arrived. An
	// observation is fresh if Received is recent; it belongs to the current container only if
	// the container started before Sent, since an answer to a request sent earlier could have
	// come from the previous incarnation.
	Sent, Received time.Time
}

// Client reads celld's internal API. It is safe for concurrent use; share one per operator so
// connections are reused.
type Client struct {
	http *http.Client
	port uint16
	now  func() time.Time
}

// Option configures a Client.
type Option func(*Client)

// WithPort reads /state from another port than InternalPort (tests bind random ports).
func WithPort(port uint16) Option { return func(c *Client) { c.port = port } }

// WithClock replaces time.Now for the Sent and Received stamps.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// NewClient returns a client with the transport rules of this package.
func NewClient(opts ...Option) *Client {
	t := &http.Transport{
		Proxy:                 nil, // never a proxy: the pod network is reached directly
		DialContext:           (&net.Dialer{Timeout: DialTimeout}).DialContext,
		MaxConnsPerHost:       maxConnsPerHost,
		MaxIdleConnsPerHost:   maxConnsPerHost,
		IdleConnTimeout:       30 * time.Second, // pods come and go; do not hold their sockets
		ResponseHeaderTimeout: CallTimeout,
		DisableCompression:    true, // the cap applies to the bytes celld sent
		ForceAttemptHTTP2:     false,
	}
	c := &Client{
		http: &http.Client{
			Transport: t,
			Timeout:   CallTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return ErrRedirect
			},
		},
		port: InternalPort,
		now:  time.Now,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// CloseIdleConnections releases idle connections, e.g. after a sweep.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// URL returns the /state address for a pod IP. The host must be an IP literal: a Service name
// or node name would go through DNS and kube-proxy, which may route to another member or to
// none, and the observation must describe the exact pod it is attributed to.
func (c *Client) URL(podIP string) (string, error) {
	addr, err := netip.ParseAddr(podIP)
	if err != nil {
		return "", fmt.Errorf("%w: %q", ErrInvalidAddress, podIP)
	}
	if addr.Zone() != "" || addr.IsUnspecified() || addr.IsMulticast() {
		return "", fmt.Errorf("%w: %q cannot address a pod", ErrInvalidAddress, podIP)
	}
	return "http://" + netip.AddrPortFrom(addr.Unmap(), c.port).String() + "/state", nil
}

// ReadState fetches and decodes GET /state from the pod at podIP. Errors wrap one of the
// package's sentinels: ErrInvalidAddress, ErrTimeout, ErrTransport, ErrRedirect, ErrStatus,
// ErrUnsupported, ErrTooLarge or ErrMalformed (with its finer kinds).
func (c *Client) ReadState(ctx context.Context, podIP string) (Reading, error) {
	url, err := c.URL(podIP)
	if err != nil {
		return Reading{}, err
	}
	buf := bodies.Get().(*[]byte)
	sent := c.now()
	body, err := c.get(ctx, url, *buf)
	defer func() {
		if cap(body) <= pooledBody {
			*buf = body[:0] // the buffer, or the one it grew into, is reused
			bodies.Put(buf)
		}
	}()
	if err != nil {
		return Reading{}, err
	}
	received := c.now()
	st, err := DecodeState(body)
	if err != nil {
		return Reading{}, fmt.Errorf("GET %s: %w", url, err)
	}
	return Reading{State: st, Sent: sent, Received: received}, nil
}

// Read buffers: a body is read into a pooled buffer of pooledBody bytes, which a typical /state
// answer fits, and grows (doubling) up to MaxBody+1 only for a larger one; the extra byte is how
// an oversized body is told apart. Only buffers of pooledBody bytes or less go back to the pool,
// so a fleet of large nodes does not leave eight idle megabytes behind (the pool held 1 MiB
// buffers before: 13 MiB of the operator's heap at 300 fleets).
const pooledBody = 16 << 10

var bodies = sync.Pool{New: func() any { b := make([]byte, 0, pooledBody); return &b }}

// get performs the request and reads the body into buf, growing it as needed, and returns the
// filled buffer; on an error it returns buf emptied, so the caller can pool it again.
func (c *Client) get(ctx context.Context, url string, buf []byte) ([]byte, error) {
	body, err := c.fetch(ctx, url, buf[:0])
	if err != nil {
		return buf[:0], err
	}
	return body, nil
}

func (c *Client) fetch(ctx context.Context, url string, buf []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "celld-operator")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, classify(ctx, err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotImplemented:
		return nil, fmt.Errorf("GET %s: %w: status 501", url, ErrUnsupported)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("GET %s: %w %d", url, ErrStatus, resp.StatusCode)
	case resp.ContentLength > MaxBody:
		return nil, fmt.Errorf("GET %s: %w (Content-Length %d)", url, ErrTooLarge, resp.ContentLength)
	}
	if resp.ContentLength > int64(cap(buf)) {
		buf = make([]byte, 0, resp.ContentLength+1) // +1: a body longer than declared is seen
	}
	body, err := readBody(resp.Body, buf)
	switch {
	case errors.Is(err, ErrTooLarge):
		return nil, fmt.Errorf("GET %s: %w", url, ErrTooLarge)
	case err != nil:
		return nil, fmt.Errorf("GET %s: reading the body: %w", url, classify(ctx, err))
	}
	return body, nil
}

// readBody reads r to its end into buf, doubling it when full, and fails with ErrTooLarge as
// soon as more than MaxBody bytes arrived: an oversized body is never read whole.
func readBody(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(cap(buf), 512), MaxBody+1-len(buf)))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), MaxBody+1)])
		buf = buf[:len(buf)+n]
		switch {
		case len(buf) > MaxBody:
			return nil, ErrTooLarge
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
}

// classify wraps a transport error with ErrTimeout, ErrRedirect or ErrTransport.
func classify(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, ErrRedirect):
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	default:
		return fmt.Errorf("%w: %w", ErrTransport, err)
	}
}
