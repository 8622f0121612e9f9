package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/tests/celldsim"
)

// Options configures a cluster. The zero value is usable: defaults fill every field.
type Options struct {
	// Dir holds certificates, kubeconfigs, logs, etcd data and the ready marker. Default
	// ".localcluster". Start removes what a previous cluster left there.
	Dir string
	// BinDir holds the pinned binaries; see ResolveBinDir for the default and the build.
	BinDir string
	// Zones get NodesPerZone nodes each. Default us-east-1a, us-east-1b, us-east-1c.
	Zones []string
	// Region is the topology.kubernetes.io/region label of every node. Default us-east-1.
	Region string
	// NodesPerZone defaults to 2.
	NodesPerZone int
	// Log receives progress lines. Default os.Stderr.
	Log io.Writer
	// StartTimeout bounds the bring-up once the binaries exist. Default 2 minutes.
	StartTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Dir == "" {
		o.Dir = ".localcluster"
	}
	if len(o.Zones) == 0 {
		o.Zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.NodesPerZone <= 0 {
		o.NodesPerZone = 2
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 2 * time.Minute
	}
}

// Cluster is a running local cluster. Stop it exactly once; Stop is safe to call twice.
type Cluster struct {
	opts   Options
	dir    string
	procMu sync.Mutex // guards procs: RestartAPIServer replaces an entry
	procs  []*process // in start order; stopped in reverse
	// restarts are the components' unrequested exits and relaunches (supervise.go), under
	// procMu; closing is closed when Stop begins, so nothing is relaunched after it.
	restarts []ComponentRestart
	closing  chan struct{}
	ports    ports
	cfg      *rest.Config
	client   kubernetes.Interface
	nodes    []string
	pki      *pki
	cancel   context.CancelFunc // stops the in-process provisioner and simulator
	wg       sync.WaitGroup
	sim      *celldsim.Simulator
	stopOnce sync.Once
	// loopback holds the lock on the cluster's pod address block until Stop.
	loopback *os.File
	// Timings records how long each bring-up step took, for docs/performance.md.
	Timings []Timing
}

// Timing is one bring-up step and its duration.
type Timing struct {
	Step     string
	Duration time.Duration
}

// Start brings a cluster up and returns once every node is Ready and the provisioner and the
// celld simulator run; it then writes DIR/ready. On error everything started is stopped.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	o.defaults()
	bin, err := ResolveBinDir(o.BinDir, o.Log)
	if err != nil {
		return nil, err
	}
	dir, err := prepareDir(o.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, dir: dir, closing: make(chan struct{})}
	redirectKlog(filepath.Join(dir, "logs", "inprocess.log"))
	startCtx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	if err := c.bringUp(startCtx, bin); err != nil {
		c.Stop()
		if ctx.Err() != nil {
			return nil, errors.Join(errStopped, err)
		}
		return nil, fmt.Errorf("localcluster: %w (logs in %s)", err, filepath.Join(dir, "logs"))
	}
	return c, nil
}

func (c *Cluster) bringUp(ctx context.Context, bin string) error {
	t0 := time.Now()
	step := func(name string, since time.Time) { c.Timings = append(c.Timings, Timing{name, time.Since(since)}) }
	k, err := generatePKI(filepath.Join(c.dir, "pki"))
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	c.pki = k
	p, err := choosePorts()
	if err != nil {
		return err
	}
	c.ports = p
	if err := c.writeConfigs(k, p); err != nil {
		return err
	}
	step("certificates and kubeconfigs", t0)
	t := time.Now()
	if _, err := c.launch(ctx, bin, "etcd", p.etcdURL()+"/health", insecureClient(), etcdArgs(c.dir, p)...); err != nil {
		return err
	}
	step("etcd", t)
	t = time.Now()
	admin, err := tls.LoadX509KeyPair(k.path("admin.crt"), k.path("admin.key"))
	if err != nil {
		return err
	}
	if _, err := c.launch(ctx, bin, "kube-apiserver", p.serverURL()+"/readyz", insecureClient(admin), apiserverArgs(k, p)...); err != nil {
		return err
	}
	step("kube-apiserver", t)
	t = time.Now()
	if c.cfg, err = clientcmd.BuildConfigFromFlags("", c.KubeconfigPath()); err != nil {
		return err
	}
	c.cfg.QPS, c.cfg.Burst = 200, 400
	c.client = kubernetes.NewForConfigOrDie(c.cfg)
	if err := installStages(ctx, dynamic.NewForConfigOrDie(c.cfg)); err != nil {
		return err
	}
	if err := installStorage(ctx, c.client); err != nil {
		return err
	}
	if err := installMetricsServerAccess(ctx, c.client); err != nil {
		return err
	}
	block, lock, err := claimLoopbackBlock()
	if err != nil {
		return err
	}
	c.loopback = lock
	nodes := nodeManifests(c.opts.Zones, c.opts.Region, c.opts.NodesPerZone, block)
	for _, n := range nodes {
		c.nodes = append(c.nodes, n.Name)
	}
	if err := registerNodes(ctx, c.client, nodes); err != nil {
		return err
	}
	step("stages, storage class, nodes", t)
	t = time.Now()
	if err := c.launchControllers(ctx, bin, p); err != nil {
		return err
	}
	step("controller-manager, scheduler, kwok, metrics-server", t)
	t = time.Now()
	if err := waitNodesReady(ctx, c.client, c.nodes, time.Minute); err != nil {
		return err
	}
	step("nodes Ready", t)
	t = time.Now()
	if err := waitMetricsAPIAvailable(ctx, dynamic.NewForConfigOrDie(c.cfg), time.Minute); err != nil {
		return err
	}
	step("metrics API Available", t)
	if err := c.startInProcess(ctx); err != nil {
		return err
	}
	step("total", t0)
	return c.writeReady(p)
}

// launchControllers starts KCM, scheduler, kwok and metrics-server together (they only need
// the API server), waits for all four to be healthy, then registers the Metrics API.
func (c *Cluster) launchControllers(ctx context.Context, bin string, p ports) error {
	probe := insecureClient()
	type spec struct {
		name, url string
		args      []string
	}
	specs := []spec{
		{"kube-controller-manager", "https://127.0.0.1:" + strconv.Itoa(p.kcm) + "/healthz", kcmArgs(c.dir, c.pki, p)},
		{"kube-scheduler", "https://127.0.0.1:" + strconv.Itoa(p.scheduler) + "/readyz", schedulerArgs(c.dir, p)},
		{"kwok", "http://127.0.0.1:" + strconv.Itoa(p.kwok) + "/healthz", kwokArgs(c.dir)},
		// livez, not readyz: metrics-server is ready only once it holds a scrape of every node
		{"metrics-server", p.metricsServerURL() + "/livez", metricsServerArgs(c.dir, c.pki, p)},
	}
	procs := make([]*process, len(specs))
	for i, s := range specs {
		pr, err := startProcess(c.dir, s.name, filepath.Join(bin, s.name), s.args...)
		if err != nil {
			return err
		}
		procs[i] = pr
		c.addProc(pr)
	}
	for i, s := range specs {
		if err := waitHealthy(ctx, procs[i], s.url, probe); err != nil {
			return err
		}
	}
	return registerMetricsAPI(ctx, dynamic.NewForConfigOrDie(c.cfg), c.pki, p)
}

// launch starts one binary and waits for its health URL.
func (c *Cluster) launch(ctx context.Context, bin, name, url string, probe *http.Client, args ...string) (*process, error) {
	pr, err := startProcess(c.dir, name, filepath.Join(bin, name), args...)
	if err != nil {
		return nil, err
	}
	c.addProc(pr)
	return pr, waitHealthy(ctx, pr, url, probe)
}
