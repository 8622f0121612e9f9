package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/tests/localcluster"
)

// StartOperator, when set (by the lead's operator wiring, typically in an init function of a
// _test.go file in tests/e2e), runs the operator in-process against the cluster until ctx
// ends. Only Ginkgo process 1 calls it, once, after the cluster is ready; other processes see
// its effects through the API. Returning an error fails the suite.
var StartOperator func(ctx context.Context, cfg *rest.Config) error

// Handle is what every Ginkgo process knows about the shared cluster.
type Handle struct {
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	Faults     *localcluster.Faults
	Zones      []string
	Nodes      []string
}

// shared is what process 1 hands to the others (serialised through Ginkgo).
type shared struct {
	Kubeconfig string   `json:"kubeconfig"`
	Zones      []string `json:"zones"`
	Nodes      []string `json:"nodes"`
}

// Cluster is this process's handle, set by Connect.
var Cluster *Handle

// local is the cluster process 1 started; nil elsewhere.
var local *localcluster.Cluster

// operatorCancel stops the in-process operator.
var operatorCancel context.CancelFunc

// StartCluster starts the suite's cluster (process 1 only) in DIR (default
// tests/e2e/.artifacts/cluster, or $CELLD_E2E_DIR) and runs StartOperator if set. It returns
// the bytes to pass to Connect in every process.
func StartCluster(ctx context.Context) ([]byte, error) {
	dir := os.Getenv("CELLD_E2E_DIR")
	if dir == "" {
		dir = filepath.Join(".artifacts", "cluster")
	}
	// CELLD_E2E_NODES_PER_ZONE sizes the simulated nodes (250 Pods each, three zones; default
	// 2): the 1,000-fleet run needs 3,000 members' room.
	perZone, _ := strconv.Atoi(os.Getenv("CELLD_E2E_NODES_PER_ZONE"))
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, Log: os.Stderr, StartTimeout: 3 * time.Minute, NodesPerZone: perZone})
	if err != nil {
		return nil, err
	}
	local = c
	if StartOperator != nil {
		opCtx, cancel := context.WithCancel(context.Background())
		operatorCancel = cancel
		errc := make(chan error, 1)
		go func() { errc <- StartOperator(opCtx, c.RESTConfig()) }()
		select {
		case err := <-errc: // an operator that returns at once failed to start
			if err != nil {
				return nil, fmt.Errorf("operator: %w", err)
			}
		case <-time.After(time.Second):
		}
	}
	return json.Marshal(shared{Kubeconfig: c.KubeconfigPath(), Zones: c.Zones(), Nodes: c.Nodes()})
}

// Connect builds this process's Handle from what StartCluster returned.
func Connect(data []byte) error {
	var s shared
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	Cluster = &Handle{
		Kubeconfig: s.Kubeconfig, Config: cfg, Client: cs, Dynamic: dynamic.NewForConfigOrDie(cfg),
		Faults: localcluster.NewFaults(cs), Zones: s.Zones, Nodes: s.Nodes,
	}
	return nil
}

// StopCluster stops the operator and the cluster (process 1 only; a no-op elsewhere).
func StopCluster() {
	if operatorCancel != nil {
		operatorCancel()
	}
	if local != nil {
		local.Stop()
	}
}
