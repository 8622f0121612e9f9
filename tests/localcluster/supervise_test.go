package localcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/internal/testsupport/syncbuf"
)

func TestRestartBackoffDoublesToThirtySeconds(t *testing.T) {
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second} {
		if got := restartBackoff(n); got != want {
			t.Errorf("restartBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}

// A component that dies on its own is started again with the same arguments, the restart is
// recorded and logged; a component stopped on purpose is not, and nothing is started after Stop.
func TestSupervisorRestartsAComponentThatExitsOnItsOwn(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("the test needs sleep(1): %v", err)
	}
	dir := t.TempDir()
	for _, d := range []string{"logs", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := &syncbuf.Buffer{}
	c := &Cluster{opts: Options{Log: log}, dir: dir, closing: make(chan struct{})}
	defer c.Stop()
	crasher, err := startProcess(dir, "kube-scheduler", sleep, "300")
	if err != nil {
		t.Fatal(err)
	}
	c.addProc(crasher)
	quiet, err := startProcess(dir, "kwok", sleep, "300")
	if err != nil {
		t.Fatal(err)
	}
	c.addProc(quiet)

	// Stopped on purpose first: were it relaunched, that would happen before the crasher's
	// relaunch, which the test waits for.
	quiet.stop(time.Second)
	if err := syscall.Kill(crasher.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	var restarts []ComponentRestart
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		restarts = c.ComponentRestarts()
		return len(restarts) > 0, nil
	})
	if err != nil || len(restarts) != 1 {
		t.Fatalf("restarts = %v, want exactly the killed kube-scheduler", restarts)
	}
	r := restarts[0]
	if r.Component != "kube-scheduler" || r.RelaunchErr != "" || !strings.Contains(r.Err, "killed") || r.Backoff != time.Second {
		t.Fatalf("restart = %+v, want kube-scheduler killed, relaunched after 1s", r)
	}
	c.procMu.Lock()
	relaunched := c.procs[0]
	c.procMu.Unlock()
	if relaunched == crasher {
		t.Fatal("the cluster still holds the dead process")
	}
	if done, _ := relaunched.exited(); done {
		t.Fatal("the relaunched kube-scheduler is not running")
	}
	if relaunched.bin != sleep || strings.Join(relaunched.args, " ") != "300" {
		t.Fatalf("relaunched %s %v, want the same binary and arguments", relaunched.bin, relaunched.args)
	}
	if !strings.Contains(log.String(), "kube-scheduler exited at") {
		t.Fatalf("the cluster log does not say what happened: %q", log.String())
	}

	c.Stop()
	if done, _ := relaunched.exited(); !done {
		t.Fatal("Stop left the relaunched process running")
	}
	for _, r := range c.ComponentRestarts() {
		if r.Component == "kwok" {
			t.Fatalf("a component stopped on purpose was restarted: %v", r)
		}
	}
	if n := len(c.ComponentRestarts()); n != 1 {
		t.Fatalf("%d restarts after Stop, want 1", n)
	}
}
