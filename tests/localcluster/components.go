package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ports are the loopback ports of one cluster, chosen fresh per start so several clusters
// (a `make run` and a test suite) can share the machine.
type ports struct {
	etcdClient, etcdPeer, etcdMetrics int
	apiserver, kcm, scheduler, kwok   int
	metricsServer                     int
}

func choosePorts() (ports, error) {
	p, err := freePorts(8)
	if err != nil {
		return ports{}, err
	}
	return ports{etcdClient: p[0], etcdPeer: p[1], etcdMetrics: p[2], apiserver: p[3], kcm: p[4], scheduler: p[5], kwok: p[6],
		metricsServer: p[7]}, nil
}

func (p ports) etcdURL() string   { return "http://127.0.0.1:" + strconv.Itoa(p.etcdClient) }
func (p ports) serverURL() string { return "https://127.0.0.1:" + strconv.Itoa(p.apiserver) }

func etcdArgs(dir string, p ports) []string {
	peer := "http://127.0.0.1:" + strconv.Itoa(p.etcdPeer)
	return []string{
		"--name", "localcluster", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", p.etcdURL(), "--advertise-client-urls", p.etcdURL(),
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "localcluster=" + peer,
		"--listen-metrics-urls", "http://127.0.0.1:" + strconv.Itoa(p.etcdMetrics),
		// a throwaway cluster: durability buys nothing and fsync costs seconds under load
		"--unsafe-no-fsync", "--quota-backend-bytes", "2147483648", "--log-level", "warn",
	}
}

func apiserverArgs(k *pki, p ports) []string {
	return []string{
		"--etcd-servers", p.etcdURL(),
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(p.apiserver), "--advertise-address", "127.0.0.1",
		// the default reconciler would publish 127.0.0.1 as the kubernetes Service endpoint,
		// which Endpoints validation rejects (loopback), so it would loop on errors
		"--endpoint-reconciler-type", "none",
		"--tls-cert-file", k.path("apiserver.crt"), "--tls-private-key-file", k.path("apiserver.key"),
		"--client-ca-file", k.path("ca.crt"),
		"--kubelet-client-certificate", k.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key", k.path("apiserver-kubelet-client.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", k.path("sa.pub"), "--service-account-signing-key-file", k.path("sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/20", // room for the read-model benchmark's 300 fleets
		// defaults (including PodSecurity) stay on; NodeRestriction is added on top
		"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
		"--allow-privileged=true",
		// the aggregation layer (metrics.k8s.io): the aggregator authenticates to extension
		// servers with front-proxy-client and passes the user in these headers. No
		// --enable-aggregator-routing: it resolves Endpoints, which cannot hold 127.0.0.1, and
		// refuses ExternalName Services; the default routing dials an ExternalName Service's
		// name (see installMetricsServerAccess)
		"--requestheader-client-ca-file", k.path("front-proxy-ca.crt"),
		"--requestheader-allowed-names", frontProxyClientName,
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", k.path("front-proxy-client.crt"),
		"--proxy-client-key-file", k.path("front-proxy-client.key"),
	}
}

// kcmControllers is the controller set of a real cluster minus what cannot work here: the
// endpoints controllers (EndpointSlices reject loopback pod IPs) and everything that needs a
// cloud, a kubelet or CSRs.
var kcmControllers = []string{
	"statefulset-controller", "deployment-controller", "replicaset-controller",
	"persistentvolume-binder-controller", "persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller", "garbage-collector-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "disruption-controller",
	"namespace-controller", "serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"pod-garbage-collector-controller", "clusterrole-aggregation-controller",
	// reads the Metrics API (metrics-server) and writes /scale, as in production
	"horizontal-pod-autoscaler-controller",
}

func kcmArgs(dir string, k *pki, p ports) []string {
	kc := filepath.Join(dir, "cfg", "kcm.kubeconfig")
	return []string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(p.kcm),
		"--leader-elect=false", "--use-service-account-credentials=true",
		"--root-ca-file", k.path("ca.crt"),
		"--cluster-signing-cert-file", k.path("ca.crt"), "--cluster-signing-key-file", k.path("ca.key"),
		"--controllers", strings.Join(kcmControllers, ","),
		// NotReady 20 s after the last lease renewal, checked every 2 s: fail-node is quick
		"--node-monitor-period", "2s", "--node-monitor-grace-period", "20s",
		// HPAs recompute every 5 s instead of 15 s, so e2e specs see them act in seconds
		"--horizontal-pod-autoscaler-sync-period", "5s",
		// the default client QPS (20) caps pod creation at about 20 pods/s
		"--kube-api-qps", "200", "--kube-api-burst", "400",
	}
}

func schedulerArgs(dir string, p ports) []string {
	kc := filepath.Join(dir, "cfg", "scheduler.kubeconfig")
	return []string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(p.scheduler), "--leader-elect=false",
	}
}

func kwokArgs(dir string) []string {
	return []string{
		"--kubeconfig", filepath.Join(dir, "cfg", "kwok.kubeconfig"),
		"--config", filepath.Join(dir, "cfg", "kwok.yaml"),
		// Stages are API objects, so they can be changed without restarting kwok (a restart
		// hands out duplicate pod IPs)
		"--enable-crds=Stage",
	}
}

// kwokConfig is kwok's own configuration. With --config kwok does not default the four
// parallelism options and exits ("parallelism must be greater than 0"), so all are explicit.
// The server address is every node's kubelet endpoint: plain HTTP (healthz) and HTTPS with
// kwok-serving on the same port, which nodePort publishes as the node's kubelet port. The
// Metric and ClusterResourceUsage documents after it (kwokMetrics) are the emulated
// /metrics/resource endpoints metrics-server scrapes.
func kwokConfig(k *pki, p ports) string {
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 127.100.0.0/16
  nodeIP: 127.0.0.1
  nodePort: %d
  manageNodesWithLabelSelector: %s=%s
  nodeLeaseDurationSeconds: 10
  serverAddress: 127.0.0.1:%d
  tlsCertFile: %s
  tlsPrivateKeyFile: %s
  nodeLeaseParallelism: 4
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  podsOnNodeSyncParallelism: 1
`, p.kwok, ManagedNodeLabel, ManagedNodeValue, p.kwok, k.path("kwok-serving.crt"), k.path("kwok-serving.key")) + kwokMetrics
}

// writeKubeconfig writes a kubeconfig for one client identity with the certificates embedded,
// so the file stays usable when copied elsewhere.
func writeKubeconfig(path string, k *pki, server, identity string) error {
	ca, err := os.ReadFile(k.path("ca.crt"))
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(k.path(identity + ".crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(k.path(identity + ".key"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[identity] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: identity}
	cfg.CurrentContext = "localcluster"
	return clientcmd.WriteToFile(*cfg, path)
}
