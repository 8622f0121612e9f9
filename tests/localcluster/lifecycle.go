package localcluster

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/celld/celld-operator/tests/celldsim"
)

// ReadyFile is the marker Start writes into Dir once the cluster is usable, and Stop removes.
const ReadyFile = "ready"

// Info is what DIR/cluster.json records about a running cluster for other processes.
type Info struct {
	Server     string   `json:"server"`
	Kubeconfig string   `json:"kubeconfig"`
	Nodes      []string `json:"nodes"`
	Zones      []string `json:"zones"`
	Region     string   `json:"region"`
	PID        int      `json:"pid"`
}

// Stop stops the simulator and the provisioner, then every process in reverse start order
// (SIGTERM to its process group, SIGKILL after 5 s), and removes DIR/ready.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		_ = os.Remove(filepath.Join(c.dir, ReadyFile))
		if c.closing != nil {
			close(c.closing)
		}
		if c.cancel != nil {
			c.cancel()
		}
		if c.sim != nil {
			c.sim.Stop()
		}
		c.wg.Wait()
		c.procMu.Lock()
		defer c.procMu.Unlock()
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].stop(5 * time.Second)
			_ = os.Remove(filepath.Join(c.dir, "run", c.procs[i].name+".pid"))
		}
		if c.loopback != nil {
			_ = c.loopback.Close() // releases the pod address block for the next cluster
		}
	})
}

// RESTConfig returns a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.cfg) }

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// KubeconfigPath is the admin kubeconfig, DIR/kubeconfig.
func (c *Cluster) KubeconfigPath() string { return filepath.Join(c.dir, "kubeconfig") }

// Dir is the absolute state directory.
func (c *Cluster) Dir() string { return c.dir }

// Nodes lists the node names, zone by zone.
func (c *Cluster) Nodes() []string { return append([]string(nil), c.nodes...) }

// Zones lists the zones.
func (c *Cluster) Zones() []string { return append([]string(nil), c.opts.Zones...) }

// Faults returns the fault injector of this cluster.
func (c *Cluster) Faults() *Faults { return NewFaults(c.client) }

// Simulator is the in-process celld simulator.
func (c *Cluster) Simulator() *celldsim.Simulator { return c.sim }

// startInProcess runs the zonal provisioner and the celld simulator inside this process.
func (c *Cluster) startInProcess(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		runProvisioner(runCtx, c.client)
	}()
	sim, err := celldsim.Start(ctx, celldsim.Options{
		Client:           c.client,
		ManagedNodeLabel: ManagedNodeLabel,
		ManagedNodeValue: ManagedNodeValue,
		Log:              openLog(filepath.Join(c.dir, "logs", "celldsim.log")),
	})
	if err != nil {
		return fmt.Errorf("celld simulator: %w", err)
	}
	c.sim = sim
	return nil
}

func (c *Cluster) writeConfigs(k *pki, p ports) error {
	if err := writeKubeconfig(c.KubeconfigPath(), k, p.serverURL(), "admin"); err != nil {
		return err
	}
	for _, id := range []string{"kcm", "scheduler", "kwok", "metrics-server"} {
		if err := writeKubeconfig(filepath.Join(c.dir, "cfg", id+".kubeconfig"), k, p.serverURL(), id); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(c.dir, "cfg", "kwok.yaml"), []byte(kwokConfig(k, p)), 0o644)
}

func (c *Cluster) writeReady(p ports) error {
	info := Info{Server: p.serverURL(), Kubeconfig: c.KubeconfigPath(), Nodes: c.nodes, Zones: c.opts.Zones, Region: c.opts.Region, PID: os.Getpid()}
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(filepath.Join(c.dir, "cluster.json"), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dir, ReadyFile), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// ReadInfo reads DIR/cluster.json of a running cluster.
func ReadInfo(dir string) (*Info, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return nil, err
	}
	info := &Info{}
	return info, json.Unmarshal(b, info)
}

// WaitReady blocks until DIR/ready exists or ctx ends.
func WaitReady(ctx context.Context, dir string) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(filepath.Join(dir, ReadyFile)); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no %s in %s: %w", ReadyFile, dir, ctx.Err())
		case <-tick.C:
		}
	}
}

// prepareDir makes dir absolute, kills what a crashed previous cluster left running there,
// and clears the entries a cluster writes (never anything else: dir may be shared).
func prepareDir(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	killStale(dir)
	for _, e := range []string{"pki", "cfg", "etcd", "logs", "run", "kubeconfig", ReadyFile, "cluster.json"} {
		if err := os.RemoveAll(filepath.Join(dir, e)); err != nil {
			return "", err
		}
	}
	for _, d := range []string{"pki", "cfg", "logs", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// killStale stops processes recorded in DIR/run/*.pid by a cluster that did not shut down.
// A PID is only trusted if that process's command line still names this directory, so a
// recycled PID is never signalled.
func killStale(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// redirectKlog sends client-go and provisioner-library logging to a file instead of the
// terminal or the test output.
func redirectKlog(path string) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(openLog(path))
}

func openLog(path string) *os.File {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return os.Stderr
	}
	return f
}
