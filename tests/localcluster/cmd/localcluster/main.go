// Command localcluster runs the local test cluster in the foreground and injects faults into
// a running one. Run `localcluster help` for the subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/tests/celldsim"
	"github.com/celld/celld-operator/tests/localcluster"
)

const usage = `localcluster: a real Kubernetes control plane with kwok nodes, zonal storage and the celld simulator.

  localcluster up [--dir DIR] [--bin DIR] [--zones a,b,c] [--region R] [--nodes-per-zone N]
        start a cluster and stay in the foreground; Ctrl-C (SIGINT/SIGTERM) stops it
  localcluster wait [--dir DIR] [--timeout 10m]   block until DIR/ready exists
  localcluster fail-node NODE                     kubelet dies: NotReady after ~20 s, pods stuck Terminating
  localcluster recover-node NODE                  kubelet back
  localcluster lose-volume NAMESPACE/PVC          delete the claim's PV: the claim turns Lost
  localcluster cordon-zone ZONE | uncordon-zone ZONE
  localcluster kill-member NAMESPACE/POD          simulated celld exits; restarts after CELLD_SIM_RESTART_MS
  localcluster unhealthy NAMESPACE/POD on|off     health route answers 503 (on) or follows celld (off)
  localcluster sim-knob NAMESPACE/POD KNOB=VALUE  override a CELLD_SIM_* knob (KNOB= removes it)
  localcluster load [-n NAMESPACE] POD [cpu=300m] [memory=900Mi]
        set what the pod's celld container uses: the Metrics API (kubectl top pods) reports it
        from metrics-server's next scrape (10 s), /state node_load at once; cpu= or memory=
        with no value goes back to the default (1m, 50Mi); no key prints the current load
  localcluster bench [--replicas 300]             pods/s of a Deployment on the running cluster

Every subcommand but up acts on the cluster found through --dir (default .localcluster).`

func main() {
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Println(usage)
		return
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	dir := fs.String("dir", ".localcluster", "cluster state directory")
	bin := fs.String("bin", "", "directory of the pinned binaries (default $CELLD_BIN_DIR or <repo>/bin)")
	zones := fs.String("zones", "us-east-1a,us-east-1b,us-east-1c", "comma-separated zones")
	region := fs.String("region", "us-east-1", "region label of every node")
	perZone := fs.Int("nodes-per-zone", 2, "nodes in each zone")
	timeout := fs.Duration("timeout", 10*time.Minute, "wait: how long to wait for the ready marker")
	replicas := fs.Int("replicas", 300, "bench: Deployment replicas")
	namespace := fs.String("n", "default", "load: namespace of the pod (or give POD as NAMESPACE/POD)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "up":
		return up(ctx, stop, localcluster.Options{Dir: *dir, BinDir: *bin, Zones: strings.Split(*zones, ","), Region: *region, NodesPerZone: *perZone})
	case "wait":
		wctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		return localcluster.WaitReady(wctx, *dir)
	}
	cs, err := connect(*dir)
	if err != nil {
		return err
	}
	if cmd == "bench" {
		res, err := localcluster.BenchDeployment(ctx, cs, *replicas)
		if err == nil {
			fmt.Println(res)
		}
		return err
	}
	if cmd == "load" {
		return load(ctx, cs, *namespace, pos)
	}
	return fault(ctx, localcluster.NewFaults(cs), cmd, pos)
}

// load sets (or with no key, prints) the usage annotations of a pod.
func load(ctx context.Context, cs kubernetes.Interface, ns string, pos []string) error {
	if len(pos) == 0 {
		return fmt.Errorf("load: want POD [cpu=Q] [memory=Q]")
	}
	name := pos[0]
	if n, p, ok := strings.Cut(name, "/"); ok {
		ns, name = n, p
	}
	keys := map[string]string{"cpu": celldsim.UsageCPUAnnotation, "memory": celldsim.UsageMemoryAnnotation}
	usage := map[string]string{}
	for _, kv := range pos[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || keys[k] == "" {
			return fmt.Errorf("load: want cpu=QUANTITY or memory=QUANTITY, got %q", kv)
		}
		usage[keys[k]] = v
	}
	if len(usage) > 0 {
		if err := localcluster.NewFaults(cs).SetUsage(ctx, ns, name, usage); err != nil {
			return err
		}
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	show := func(key, def string) string {
		if v, ok := p.Annotations[key]; ok {
			return v
		}
		return def + " (default)"
	}
	fmt.Printf("%s/%s: cpu=%s memory=%s\n", ns, name, show(celldsim.UsageCPUAnnotation, celldsim.DefaultUsageCPU),
		show(celldsim.UsageMemoryAnnotation, celldsim.DefaultUsageMemory))
	return nil
}

func fault(ctx context.Context, f *localcluster.Faults, cmd string, pos []string) error {
	need := map[string]int{"fail-node": 1, "recover-node": 1, "lose-volume": 1, "cordon-zone": 1, "uncordon-zone": 1,
		"kill-member": 1, "unhealthy": 2, "sim-knob": 2}
	n, ok := need[cmd]
	if !ok {
		return fmt.Errorf("unknown subcommand %q\n\n%s", cmd, usage)
	}
	if len(pos) != n {
		return fmt.Errorf("%s takes %d argument(s), got %q", cmd, n, pos)
	}
	switch cmd {
	case "fail-node":
		return f.FailNode(ctx, pos[0])
	case "recover-node":
		return f.RecoverNode(ctx, pos[0])
	case "cordon-zone":
		return f.CordonZone(ctx, pos[0])
	case "uncordon-zone":
		return f.UncordonZone(ctx, pos[0])
	}
	ns, name, ok := strings.Cut(pos[0], "/")
	if !ok {
		return fmt.Errorf("%s: want NAMESPACE/NAME, got %q", cmd, pos[0])
	}
	switch cmd {
	case "lose-volume":
		return f.LoseVolume(ctx, ns, name)
	case "kill-member":
		return f.KillMember(ctx, ns, name)
	case "unhealthy":
		if pos[1] != "on" && pos[1] != "off" {
			return fmt.Errorf("unhealthy: want on or off, got %q", pos[1])
		}
		return f.Unhealthy(ctx, ns, name, pos[1] == "on")
	default: // sim-knob
		k, v, _ := strings.Cut(pos[1], "=")
		return f.SetKnob(ctx, ns, name, k, v)
	}
}

// up runs a cluster until the first signal; a second signal kills the process at once
// (its children die with it through Pdeathsig).
func up(ctx context.Context, restoreSignals func(), o localcluster.Options) error {
	start := time.Now()
	c, err := localcluster.Start(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		t := time.Now()
		c.Stop()
		fmt.Fprintf(os.Stderr, "localcluster: stopped in %.1fs\n", time.Since(t).Seconds())
	}()
	for _, t := range c.Timings {
		fmt.Fprintf(os.Stderr, "localcluster: %-38s %6.2fs\n", t.Step, t.Duration.Seconds())
	}
	fmt.Printf(`localcluster: ready in %.1fs (%d nodes in %s)
  export KUBECONFIG=%s
  kubectl get nodes -L topology.kubernetes.io/zone
  logs: %s/logs   stop: Ctrl-C
`, time.Since(start).Seconds(), len(c.Nodes()), strings.Join(c.Zones(), ", "), c.KubeconfigPath(), c.Dir())
	<-ctx.Done()
	restoreSignals()
	fmt.Fprintln(os.Stderr, "localcluster: stopping (again to kill)")
	return nil
}

func connect(dir string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", dir+"/kubeconfig")
	if err != nil {
		return nil, fmt.Errorf("no running cluster in %s (start one with `localcluster up --dir %s`): %w", dir, dir, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return kubernetes.NewForConfig(cfg)
}

// parseInterleaved accepts flags before and after positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Println(usage)
			}
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
