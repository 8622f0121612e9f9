package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // the Ginkgo DSL reads best unqualified
	. "github.com/onsi/gomega"    //nolint:revive

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Deadlines for Eventually. They are generous multiples of what the local cluster measured,
// so a slow CI machine does not flake, while a real hang still fails in bounded time.
const (
	// Short covers one controller round trip: a pod Ready, a status patch, a PVC Lost.
	Short = 20 * time.Second
	// Medium covers a rollout of a few pods.
	Medium = 45 * time.Second
	// NodeLoss covers a node going NotReady (20 s grace) plus a toleration and eviction.
	NodeLoss = 90 * time.Second
	// Poll is the polling interval of every Eventually here.
	Poll = 100 * time.Millisecond
)

// NewNamespace creates a namespace for the current spec and deletes it when the spec ends
// (without waiting: the namespace controller takes seconds and nothing depends on it).
func NewNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: strings.ToLower(prefix) + "-",
		Labels:       map[string]string{"e2e.celld.eric.dev/spec": "true"},
	}}
	got, err := Cluster.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "create namespace")
	specNamespaces = append(specNamespaces, got.Name)
	DeferCleanup(func(ctx context.Context) {
		_ = Cluster.Client.CoreV1().Namespaces().Delete(ctx, got.Name, metav1.DeleteOptions{})
	})
	return got.Name
}

// specNamespaces are the namespaces the running spec created; the safety monitor checks each.
var specNamespaces []string

// SpecNamespaces returns the namespaces the current spec created and forgets them.
func SpecNamespaces() []string {
	out := specNamespaces
	specNamespaces = nil
	return out
}

// EventuallyWithin polls f every Poll until it succeeds or d passes.
func EventuallyWithin(ctx context.Context, d time.Duration, f any) AsyncAssertion {
	return Eventually(ctx, f).WithTimeout(d).WithPolling(Poll)
}

// Pod fetches a pod; it fails the spec on any error but NotFound, where it returns nil.
func Pod(ctx context.Context, ns, name string) *corev1.Pod {
	GinkgoHelper()
	p, err := Cluster.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		Expect(err).To(MatchError(ContainSubstring("not found")))
		return nil
	}
	return p
}

// Condition returns a pod condition ("" status if absent).
func Condition(p *corev1.Pod, t corev1.PodConditionType) corev1.PodCondition {
	if p != nil {
		for _, c := range p.Status.Conditions {
			if c.Type == t {
				return c
			}
		}
	}
	return corev1.PodCondition{Type: t}
}

// IsReady reports whether the pod's Ready condition is True.
func IsReady(p *corev1.Pod) bool { return Condition(p, corev1.PodReady).Status == corev1.ConditionTrue }

// NodeZone returns the zone of a node.
func NodeZone(ctx context.Context, node string) string {
	GinkgoHelper()
	zone, err := Cluster.Faults.ZoneOf(ctx, node)
	Expect(err).NotTo(HaveOccurred())
	return zone
}

// Describef is fmt.Sprintf, for failure messages that state the violated rule.
func Describef(format string, args ...any) string { return fmt.Sprintf(format, args...) }
