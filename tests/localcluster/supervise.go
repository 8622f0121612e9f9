package localcluster

import (
	"fmt"
	"time"
)

// ComponentRestart is one exit of a control-plane component that nobody asked for, and what
// the cluster did about it. A kubelet restarts a crashed static Pod (kube-scheduler exits on
// purpose when it finds its cache corrupted, for one); the local cluster does the same, so a
// component's own crash does not stall every test that runs after it.
type ComponentRestart struct {
	Component string
	// Exited is when the exit was seen; Err is the exit status.
	Exited time.Time
	Err    string
	// Backoff is how long the cluster waited before the relaunch; RelaunchErr is set when the
	// relaunch itself failed (the component then stays down).
	Backoff     time.Duration
	RelaunchErr string
}

func (r ComponentRestart) String() string {
	s := fmt.Sprintf("%s exited at %s (%s)", r.Component, r.Exited.Format("15:04:05.000"), r.Err)
	if r.RelaunchErr != "" {
		return s + "; relaunch failed: " + r.RelaunchErr
	}
	return s + fmt.Sprintf(" and was started again after %s", r.Backoff)
}

// restartBackoff is the wait before the nth relaunch of one component (n from 0): 1 s doubling
// to 30 s, as a kubelet's crash-loop back-off does at a smaller scale.
func restartBackoff(n int) time.Duration {
	d := time.Second
	for range n {
		d *= 2
		if d >= 30*time.Second {
			return 30 * time.Second
		}
	}
	return d
}

// supervise relaunches p with the same arguments if it exits while nobody stopped it and the
// cluster is not stopping. The relaunched process is supervised in turn.
func (c *Cluster) supervise(p *process) {
	go func() {
		<-p.done
		if p.stopping.Load() {
			return
		}
		r := ComponentRestart{Component: p.name, Exited: time.Now(), Err: fmt.Sprint(p.err)}
		c.procMu.Lock()
		n := 0
		for _, prev := range c.restarts {
			if prev.Component == p.name {
				n++
			}
		}
		c.procMu.Unlock()
		r.Backoff = restartBackoff(n)
		select {
		case <-c.closing:
			return
		case <-time.After(r.Backoff):
		}
		c.procMu.Lock()
		defer c.procMu.Unlock()
		i := -1
		for j, q := range c.procs {
			if q == p {
				i = j
			}
		}
		select {
		case <-c.closing:
			return
		default:
		}
		if i < 0 {
			return // replaced meanwhile (RestartAPIServer)
		}
		pr, err := p.relaunch()
		if err != nil {
			r.RelaunchErr = err.Error()
		} else {
			c.procs[i] = pr
			c.supervise(pr)
		}
		c.restarts = append(c.restarts, r)
		fmt.Fprintf(c.opts.Log, "localcluster: %s\n", r)
	}()
}

// ComponentRestarts lists every unrequested exit of a component so far, oldest first.
func (c *Cluster) ComponentRestarts() []ComponentRestart {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	return append([]ComponentRestart(nil), c.restarts...)
}
