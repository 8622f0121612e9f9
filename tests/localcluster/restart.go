package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"
)

// apiserverStopGrace bounds the API server's graceful shutdown: it closes watches at once and
// waits for in-flight requests (at most the 60 s request timeout); past this it is killed.
const apiserverStopGrace = 20 * time.Second

// APIServerRestart is what RestartAPIServer measured.
type APIServerRestart struct {
	// Stopped is how long the graceful stop took (SIGTERM to exit).
	Stopped time.Duration
	// Down is from the SIGTERM until /readyz answered 200 again: the time clients could not
	// count on an answer.
	Down time.Duration
}

// RestartAPIServer stops kube-apiserver (SIGTERM, SIGKILL after apiserverStopGrace) and starts
// it again with the same flags, certificates and port, as an upgrade or a crash of the
// control plane would; it returns once /readyz answers again. Every client of the cluster sees
// its requests refused and its watches end, and re-lists when the server is back; etcd keeps
// every object. The other components are not restarted (unless they exit on their own: supervise.go).
func (c *Cluster) RestartAPIServer(ctx context.Context) (APIServerRestart, error) {
	var r APIServerRestart
	c.procMu.Lock()
	defer c.procMu.Unlock()
	i := c.procIndex("kube-apiserver")
	if i < 0 {
		return r, fmt.Errorf("no kube-apiserver process")
	}
	admin, err := tls.LoadX509KeyPair(c.pki.path("admin.crt"), c.pki.path("admin.key"))
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	c.procs[i].stop(apiserverStopGrace)
	r.Stopped = time.Since(t0)
	pr, err := c.procs[i].relaunch()
	if err != nil {
		return r, err
	}
	c.procs[i] = pr
	c.supervise(pr)
	if err := waitHealthy(ctx, pr, c.ports.serverURL()+"/readyz", insecureClient(admin)); err != nil {
		return r, err
	}
	r.Down = time.Since(t0)
	return r, nil
}

// procIndex returns the index of the named process in procs, or -1. Caller holds procMu.
func (c *Cluster) procIndex(name string) int {
	for i, p := range c.procs {
		if p.name == name {
			return i
		}
	}
	return -1
}

// addProc records a started process for Stop and supervises it: an exit nobody asked for is
// relaunched (supervise.go).
func (c *Cluster) addProc(p *process) {
	c.procMu.Lock()
	c.procs = append(c.procs, p)
	c.procMu.Unlock()
	c.supervise(p)
}
