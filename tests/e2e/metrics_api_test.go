package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/celld/celld-operator/tests/celldsim"
	"github.com/celld/celld-operator/tests/e2e/framework"
	"github.com/celld/celld-operator/tests/localcluster"
)

// metricsDeadline bounds how long a load change takes to reach the Metrics API: the next
// scrape (MetricResolution) and, for a new pod, the two scrapes a first rate needs, with room
// for a loaded machine.
const metricsDeadline = 6 * localcluster.MetricResolution

// cpuTolerance: CPU in PodMetrics is a rate over the scrape window, computed from kwok's
// counter and metrics-server's request times, so it may be a few millicores off.
const cpuTolerance = 10 // millicores

var _ = Describe("Metrics API", func() {
	It("reports the load set on a member in PodMetrics, kubectl top pods and /state", func(ctx context.Context) {
		ns := framework.NewNamespace(ctx, "metrics")
		pod := create(ctx, ns, fleetPod("load", nil)).(*corev1.Pod)
		var ip string
		framework.EventuallyWithin(ctx, framework.Short, func() bool {
			p := framework.Pod(ctx, ns, pod.Name)
			ip = p.Status.PodIP
			return framework.IsReady(p)
		}).Should(BeTrue(), "the simulator makes the member Ready")
		metrics, err := metricsclient.NewForConfig(framework.Cluster.Config)
		Expect(err).NotTo(HaveOccurred())

		// two loads, then back to the defaults
		for _, load := range []struct{ cpu, memory string }{{"300m", "900Mi"}, {"40m", "200Mi"}, {"", ""}} {
			if load.cpu == "" {
				By("clearing the member's load")
				Expect(framework.Cluster.Faults.ClearLoad(ctx, ns, pod.Name)).To(Succeed())
				load.cpu, load.memory = celldsim.DefaultUsageCPU, celldsim.DefaultUsageMemory
			} else {
				By(fmt.Sprintf("setting the member's load to cpu=%s memory=%s", load.cpu, load.memory))
				Expect(framework.Cluster.Faults.SetLoad(ctx, ns, pod.Name, resource.MustParse(load.cpu), resource.MustParse(load.memory))).To(Succeed())
			}
			cpu, memory := resource.MustParse(load.cpu), resource.MustParse(load.memory)

			framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
				l := nodeLoad(ctx, g, ip)
				g.Expect(l.CPUPercentX100).To(Equal(cpu.MilliValue()*10), "cpu_percent_x100 is millicores x 10")
				g.Expect(l.RSSBytes).To(Equal(memory.Value()), "rss_bytes is the memory usage")
				g.Expect(l.InUseBytes).To(Equal(memory.Value()*4/5), "in_use_bytes is 4/5 of it")
			}).Should(Succeed(), "/state node_load follows the load")

			framework.EventuallyWithin(ctx, metricsDeadline, func(g Gomega) {
				pm, err := metrics.MetricsV1beta1().PodMetricses(ns).Get(ctx, pod.Name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				var usage corev1.ResourceList
				for _, c := range pm.Containers {
					if c.Name == celldsim.ContainerName {
						usage = c.Usage
					}
				}
				g.Expect(usage).NotTo(BeNil(), "PodMetrics has the celld container: %+v", pm.Containers)
				g.Expect(usage.Memory().Value()).To(Equal(memory.Value()), "memory working set")
				g.Expect(usage.Cpu().MilliValue()).To(BeNumerically("~", cpu.MilliValue(), cpuTolerance), "CPU")
				g.Expect(pm.Window.Duration).To(BeNumerically(">=", 5*time.Second), "a window the capacity policy accepts")
				g.Expect(time.Since(pm.Timestamp.Time)).To(BeNumerically("<", 3*localcluster.MetricResolution), "a fresh sample")
			}).Should(Succeed(), "PodMetrics of container celld follow the load")

			framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
				bin, err := localcluster.ResolveBinDir("", GinkgoWriter)
				g.Expect(err).NotTo(HaveOccurred())
				out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", framework.Cluster.Kubeconfig,
					"top", "pods", "-n", ns, "--containers", pod.Name).CombinedOutput()
				g.Expect(err).NotTo(HaveOccurred(), "kubectl top pods: %s", out)
				m := regexp.MustCompile(`(?m)^` + pod.Name + `\s+celld\s+(\d+)m\s+(\d+)Mi\s*$`).FindStringSubmatch(string(out))
				g.Expect(m).NotTo(BeNil(), "kubectl top pods --containers shows the celld container:\n%s", out)
				g.Expect(strconv.ParseInt(m[1], 10, 64)).To(BeNumerically("~", cpu.MilliValue(), cpuTolerance), "CPU:\n%s", out)
				g.Expect(strconv.ParseInt(m[2], 10, 64)).To(Equal(memory.Value()>>20), "memory:\n%s", out)
			}).Should(Succeed(), "kubectl top pods shows the load")
		}
	})
})

// loadView is the part of /state's node_load the usage annotations drive.
type loadView struct {
	CPUPercentX100 int64 `json:"cpu_percent_x100"`
	RSSBytes       int64 `json:"rss_bytes"`
	InUseBytes     int64 `json:"in_use_bytes"`
}

func nodeLoad(ctx context.Context, g Gomega, ip string) loadView {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%d/state", ip, celldsim.InternalPort), nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var doc struct {
		NodeLoad loadView `json:"node_load"`
	}
	g.Expect(json.NewDecoder(resp.Body).Decode(&doc)).To(Succeed())
	return doc.NodeLoad
}
