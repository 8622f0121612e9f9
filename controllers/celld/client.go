package celld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
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
	defer bodies.Put(buf)
	sent := c.now()
	body, err := c.get(ctx, url, *buf)
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

// bodies holds read buffers of MaxBody+1 bytes, so concurrent sweeps do not allocate a
// megabyte per call; the extra byte is how an oversized body is told apart.
var bodies = sync.Pool{New: func() any { b := make([]byte, MaxBody+1); return &b }}

// get performs the request and reads the body into buf, returning the filled prefix.
func (c *Client) get(ctx context.Context, url string, buf []byte) ([]byte, error) {
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
	n, err := io.ReadFull(resp.Body, buf[:MaxBody+1])
	switch {
	case n > MaxBody:
		return nil, fmt.Errorf("GET %s: %w", url, ErrTooLarge)
	case err != nil && err != io.ErrUnexpectedEOF && err != io.EOF:
		return nil, fmt.Errorf("GET %s: reading the body: %w", url, classify(ctx, err))
	}
	return buf[:n], nil
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
