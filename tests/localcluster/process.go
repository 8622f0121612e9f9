package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// process is one control-plane binary the cluster started. It runs in its own process group
// so a stop reaches anything it forked, and it carries Pdeathsig so a test binary killed by
// `go test -timeout` does not leave orphans behind.
type process struct {
	name string
	bin  string
	args []string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// stopping is set by stop: the exit that follows was asked for, and is not restarted.
	stopping atomic.Bool
}

// startProcess launches bin with args, logging to DIR/logs/NAME.log and recording the PID in
// DIR/run/NAME.pid so an operator can find it.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	return launchProcess(dir, name, bin, os.O_TRUNC, args)
}

// relaunch starts p's binary again with the same arguments, appending to its log, once p has
// exited. The returned process replaces p.
func (p *process) relaunch() (*process, error) {
	if done, _ := p.exited(); !done {
		return nil, fmt.Errorf("%s is still running", p.name)
	}
	return launchProcess(p.dir, p.name, p.bin, os.O_APPEND, p.args)
}

func launchProcess(dir, name, bin string, logMode int, args []string) (*process, error) {
	logf, err := os.OpenFile(filepath.Join(dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|logMode, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, bin: bin, args: args, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	pidFile := filepath.Join(dir, "run", name+".pid")
	_ = os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	return p, nil
}

// exited reports the exit error if the process has already ended.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group and escalates to SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	p.stopping.Store(true)
	if ok, _ := p.exited(); ok {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// waitHealthy polls url until it answers 200, the process exits, or ctx ends. The component's
// log tail goes into the error because that is where the reason is.
func waitHealthy(ctx context.Context, p *process, url string, client *http.Client) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if done, perr := p.exited(); done {
			return fmt.Errorf("%s exited before it was healthy (%v); see its log", p.name, perr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy at %s: %w", p.name, url, ctx.Err())
		case <-tick.C:
		}
	}
}

// insecureClient probes the health endpoints of components that serve a self-signed cert.
func insecureClient(certs ...tls.Certificate) *http.Client {
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, //nolint:gosec // loopback health probes of our own components
			Certificates:       certs,
		}},
	}
}

// freePorts reserves n distinct loopback ports. The listeners stay open until all are chosen
// so the kernel cannot hand the same port out twice.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// errStopped is returned by Start when ctx ended during bring-up.
var errStopped = errors.New("localcluster: start interrupted")
