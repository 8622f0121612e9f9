package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// downMonitor is a continuous safety monitor: it follows every change of a fleet's member Pods
// through a watch, not a poll, and records the first moment fewer than want-maxDown members were
// serving (Ready and not terminating). A transient state between two polls cannot hide from it,
// and no Eventually can retry it away: Check fails on the first violation it saw.
type downMonitor struct {
	mu        sync.Mutex
	want      int
	maxDown   int
	pods      map[string]*corev1.Pod
	violation string
	events    int
}

// monitorDown starts watching the Pods of fleet f in ns until the spec ends. want is the number
// of members the fleet should have; Check fails if more than maxDown of them were down at once.
func monitorDown(ctx context.Context, ns string, f *v1.CelldFleet, want, maxDown int) *downMonitor {
	GinkgoHelper()
	m := &downMonitor{want: want, maxDown: maxDown, pods: map[string]*corev1.Pod{}}
	sel := metav1.ListOptions{LabelSelector: v1.LabelFleetUID + "=" + string(f.UID)}
	pods := framework.Cluster.Client.CoreV1().Pods(ns)
	list, err := pods.List(ctx, sel)
	Expect(err).NotTo(HaveOccurred())
	for i := range list.Items {
		m.pods[list.Items[i].Name] = &list.Items[i]
	}
	// The state the watch starts from is judged too, and counts as followed: a spec in which
	// nothing changes (a policy-only change, say) has still had its members checked.
	m.events = len(list.Items)
	m.judge(watch.EventType("LIST"), fmt.Sprintf("%d Pods", len(list.Items)))
	sel.ResourceVersion = list.ResourceVersion
	w, err := pods.Watch(ctx, sel)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			m.mu.Lock()
			m.events++
			if ev.Type == watch.Deleted {
				delete(m.pods, p.Name)
			} else {
				m.pods[p.Name] = p
			}
			m.judge(ev.Type, p.Name)
			m.mu.Unlock()
		}
	}()
	return m
}

// judge records the first state with too few members serving. Caller holds mu.
func (m *downMonitor) judge(t watch.EventType, name string) {
	if m.violation != "" {
		return
	}
	var serving []string
	for n, p := range m.pods {
		if p.DeletionTimestamp == nil && framework.IsReady(p) && p.Status.Phase == corev1.PodRunning {
			serving = append(serving, n)
		}
	}
	if down := m.want - len(serving); down > m.maxDown {
		sort.Strings(serving)
		m.violation = fmt.Sprintf("at %s (after %s %s) %d of %d members were down; serving: [%s]",
			time.Now().Format(time.RFC3339Nano), t, name, down, m.want, strings.Join(serving, " "))
	}
}

// Check fails the spec if the monitor saw more than maxDown members down at any moment, from the
// state it started in on, and reports how many Pod states it judged.
func (m *downMonitor) Check(during string) {
	GinkgoHelper()
	m.mu.Lock()
	defer m.mu.Unlock()
	Expect(m.violation).To(BeEmpty(), "safety during %s: %s", during, m.violation)
	Expect(m.events).To(BeNumerically(">", 0), "the monitor saw no change during %s; it watched nothing", during)
	AddReportEntry("member changes followed during "+during, m.events)
}

// recordReplicas follows a fleet's workload (a StatefulSet, or a Deployment when deployment
// is true) through a watch from now on and returns a func giving every distinct spec.replicas
// it held, in order, the current one first. A watch sees every write, so a step the operator
// holds for a moment is seen where a poll could miss it.
func recordReplicas(ctx context.Context, ns, name string, deployment bool) func() []int32 {
	GinkgoHelper()
	var mu sync.Mutex
	var seen []int32
	note := func(u *unstructured.Unstructured) {
		r, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if !found || err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 || seen[len(seen)-1] != int32(r) {
			seen = append(seen, int32(r))
		}
	}
	resource := appsv1.SchemeGroupVersion.WithResource("statefulsets")
	if deployment {
		resource = appsv1.SchemeGroupVersion.WithResource("deployments")
	}
	workloads := framework.Cluster.Dynamic.Resource(resource).Namespace(ns)
	current, err := workloads.Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	note(current)
	w, err := workloads.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: current.GetResourceVersion()})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				note(u)
			}
		}
	}()
	return func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int32(nil), seen...)
	}
}
