package localcluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/celld/celld-operator/tests/celldsim"
)

// The Metrics API of the local cluster is the production one: metrics-server behind the
// aggregation layer, scraping each node's kubelet resource-metrics endpoint, which kwok
// emulates. Usage comes from pod annotations (celldsim.UsageCPUAnnotation and
// UsageMemoryAnnotation), which the celld simulator's /state load view follows too.
const (
	metricsServerNamespace = "kube-system"
	metricsServerService   = "metrics-server"
	metricsServerUser      = "system:metrics-server"
	// MetricsAPIService is the APIService the aggregator routes metrics.k8s.io/v1beta1 through.
	MetricsAPIService = "v1beta1.metrics.k8s.io"
	// MetricResolution is metrics-server's scrape interval, the smallest it accepts (10 s). A
	// PodMetrics window is the time between the last two scrapes, so about this long; a load
	// change shows in memory after the next scrape and in CPU (a rate over the window) then too.
	MetricResolution = 10 * time.Second
	// ResourceMetricsPathAnnotation tells metrics-server where a node serves its resource
	// metrics; kwok serves every node's under one address, per node name.
	ResourceMetricsPathAnnotation = "metrics.k8s.io/resource-metrics-path"
)

// resourceMetricsPath is the path of node's emulated /metrics/resource on kwok's server.
func resourceMetricsPath(node string) string { return "/metrics/nodes/" + node + "/metrics/resource" }

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// kwokMetrics configures kwok's kubelet emulation for metrics-server: the Metric serves the
// series metrics-server reads from /metrics/resource (kubelet names), and the
// ClusterResourceUsage says what each container uses. The celld container uses what its pod's
// usage annotations say (a small default without them); every other container 1m and 1Mi,
// which metrics-server needs non-zero to report the pod at all. A node reports its pods plus
// 50m and 256Mi for its "system". CPU counters are integrated by kwok at each scrape from the
// usage at that moment, so a changed annotation is a changed rate from the next scrape on.
// kwok starts a container's counter at 0 on its first scrape, and metrics-server drops a
// container whose counter is 0 (and with it the pod); the 1 µs offset keeps that first sample,
// so a new pod has PodMetrics after two scrapes, not three. A container's start time is its
// pod's creation (whole seconds), rounded so that it is the same at every scrape: one that
// moves back by a microsecond makes metrics-server skip the container ("unexpected decrease
// in startTime").
var kwokMetrics = fmt.Sprintf(`---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: celld-usage-from-annotations}
spec:
  usages:
  - containers: [%[3]s]
    usage:
      cpu:
        expression: '"%[1]s" in pod.metadata.annotations ? Quantity(pod.metadata.annotations["%[1]s"]) : Quantity("%[4]s")'
      memory:
        expression: '"%[2]s" in pod.metadata.annotations ? Quantity(pod.metadata.annotations["%[2]s"]) : Quantity("%[5]s")'
  - usage:
      cpu: {value: 1m}
      memory: {value: 1Mi}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Metric
metadata: {name: resource-metrics}
spec:
  path: /metrics/nodes/{nodeName}/metrics/resource
  metrics:
  - {name: scrape_error, dimension: node, kind: gauge, value: "0"}
  - name: node_cpu_usage_seconds_total
    dimension: node
    kind: counter
    value: 'node.CumulativeUsage("cpu") + 0.05 * node.SinceSecond()'
  - name: node_memory_working_set_bytes
    dimension: node
    kind: gauge
    value: 'node.Usage("memory") + 268435456.0'
  - name: pod_cpu_usage_seconds_total
    dimension: pod
    kind: counter
    labels: [{name: namespace, value: pod.metadata.namespace}, {name: pod, value: pod.metadata.name}]
    value: 'pod.CumulativeUsage("cpu") + 0.000001'
  - name: pod_memory_working_set_bytes
    dimension: pod
    kind: gauge
    labels: [{name: namespace, value: pod.metadata.namespace}, {name: pod, value: pod.metadata.name}]
    value: 'pod.Usage("memory")'
  - name: container_start_time_seconds
    dimension: container
    kind: gauge
    labels: [{name: container, value: container.name}, {name: namespace, value: pod.metadata.namespace}, {name: pod, value: pod.metadata.name}]
    value: 'double(int(UnixSecond(Now()) - pod.SinceSecond() + 0.5))'
  - name: container_cpu_usage_seconds_total
    dimension: container
    kind: counter
    labels: [{name: container, value: container.name}, {name: namespace, value: pod.metadata.namespace}, {name: pod, value: pod.metadata.name}]
    value: 'pod.CumulativeUsage("cpu", container.name) + 0.000001'
  - name: container_memory_working_set_bytes
    dimension: container
    kind: gauge
    labels: [{name: container, value: container.name}, {name: namespace, value: pod.metadata.namespace}, {name: pod, value: pod.metadata.name}]
    value: 'pod.Usage("memory", container.name)'
`, celldsim.UsageCPUAnnotation, celldsim.UsageMemoryAnnotation, celldsim.ContainerName,
	celldsim.DefaultUsageCPU, celldsim.DefaultUsageMemory)

// metricsServerArgs runs metrics-server as an extension API server on loopback. It
// authenticates callers (the aggregator's front-proxy-client, through the request headers)
// from the extension-apiserver-authentication ConfigMap kube-apiserver publishes, and checks
// them with SubjectAccessReviews. It scrapes each node at its InternalIP (127.0.0.1) and the
// kubelet port in node status (kwok's server), verifying kwok-serving against the cluster CA.
func metricsServerArgs(dir string, k *pki, p ports) []string {
	kc := filepath.Join(dir, "cfg", "metrics-server.kubeconfig")
	return []string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(p.metricsServer),
		"--tls-cert-file", k.path("metrics-server-serving.crt"), "--tls-private-key-file", k.path("metrics-server-serving.key"),
		"--kubelet-certificate-authority", k.path("ca.crt"),
		"--kubelet-use-node-status-port", "--kubelet-preferred-address-types", "InternalIP",
		"--metric-resolution", MetricResolution.String(),
		// must stay below 90% of the resolution; a loopback scrape takes milliseconds
		"--kubelet-request-timeout", "5s",
	}
}

func (p ports) metricsServerURL() string { return "https://127.0.0.1:" + strconv.Itoa(p.metricsServer) }

// installMetricsServerAccess creates what metrics-server's identity may do (the RBAC of its
// upstream manifest, bound to the certificate user instead of a service account) and its
// Service. The Service is an ExternalName one: Endpoints and EndpointSlices cannot hold
// 127.0.0.1, and without aggregator routing the aggregator dials an ExternalName Service's
// name at the APIService's port.
func installMetricsServerAccess(ctx context.Context, cs kubernetes.Interface) error {
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: metricsServerUser}}
	read := []string{"get", "list", "watch"}
	roles := []*rbacv1.ClusterRole{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:metrics-server"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
				{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: read},
			},
		},
		{
			// who may read the Metrics API: whoever holds view, edit or admin, as upstream
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregated-metrics-reader", Labels: map[string]string{
				"rbac.authorization.k8s.io/aggregate-to-view":  "true",
				"rbac.authorization.k8s.io/aggregate-to-edit":  "true",
				"rbac.authorization.k8s.io/aggregate-to-admin": "true",
			}},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods", "nodes"}, Verbs: read}},
		},
	}
	for _, r := range roles {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ClusterRole %s: %w", r.Name, err)
		}
	}
	bindings := []*rbacv1.ClusterRoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "system:metrics-server"}, Subjects: user,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:metrics-server"}},
		// TokenReviews and SubjectAccessReviews for the requests it serves
		{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server:system:auth-delegator"}, Subjects: user,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"}},
	}
	for _, b := range bindings {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	// the client and request-header CAs, from kube-system/extension-apiserver-authentication
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server-auth-reader", Namespace: metricsServerNamespace}, Subjects: user,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
	}
	if _, err := cs.RbacV1().RoleBindings(metricsServerNamespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create RoleBinding %s: %w", rb.Name, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerService, Namespace: metricsServerNamespace,
			Labels: map[string]string{"k8s-app": "metrics-server"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if _, err := cs.CoreV1().Services(metricsServerNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Service %s: %w", svc.Name, err)
	}
	return nil
}

// registerMetricsAPI creates the APIService once metrics-server answers, so the aggregator's
// first availability check succeeds instead of backing off.
func registerMetricsAPI(ctx context.Context, dyn dynamic.Interface, k *pki, p ports) error {
	ca, err := os.ReadFile(k.path("ca.crt"))
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": MetricsAPIService, "labels": map[string]any{"k8s-app": "metrics-server"}},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1",
			"service": map[string]any{"namespace": metricsServerNamespace, "name": metricsServerService,
				"port": int64(p.metricsServer)},
			"caBundle":             base64.StdEncoding.EncodeToString(ca),
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
		},
	}}
	if _, err := dyn.Resource(apiServiceGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create APIService %s: %w", MetricsAPIService, err)
	}
	return nil
}

// waitMetricsAPIAvailable waits until the aggregator reports the APIService Available, that
// is, it reached metrics-server through the Service and got its discovery document.
func waitMetricsAPIAvailable(ctx context.Context, dyn dynamic.Interface, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(apiServiceGVR).Get(ctx, MetricsAPIService, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprintf("Available=%v %v: %v", m["status"], m["reason"], m["message"])
				return m["status"] == "True", nil
			}
		}
		last = "no Available condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not Available (%s): %w", MetricsAPIService, last, err)
	}
	return nil
}
