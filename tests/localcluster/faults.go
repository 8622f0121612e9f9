package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/celld/celld-operator/tests/celldsim"
)

// Faults injects failures into a running local cluster. Every fault is a plain API write
// (labels, annotations, deletes), so it works from any process holding the admin kubeconfig:
// the test process that started the cluster, a parallel Ginkgo process, or the command.
type Faults struct{ client kubernetes.Interface }

// NewFaults returns a fault injector using client.
func NewFaults(client kubernetes.Interface) *Faults { return &Faults{client: client} }

// FailNode makes node's kubelet die: kwok stops managing it (no lease renewal, no pod
// updates) and the simulator powers off its fleet pods. About 20 s later the node controller
// marks it NotReady and taints it unreachable; after the pods' toleration the taint manager
// deletes them and they stay Terminating, since no kubelet confirms the deletion.
func (f *Faults) FailNode(ctx context.Context, node string) error {
	return f.patchNode(ctx, node, map[string]any{"metadata": map[string]any{"labels": map[string]any{ManagedNodeLabel: nil}}})
}

// RecoverNode gives node its kubelet back: kwok renews its lease (Ready again within a
// second) and finishes the deletions that were pending there.
func (f *Faults) RecoverNode(ctx context.Context, node string) error {
	return f.patchNode(ctx, node, map[string]any{"metadata": map[string]any{"labels": map[string]any{ManagedNodeLabel: ManagedNodeValue}}})
}

// CordonZone marks every node of zone unschedulable; new pods that can only go there stay
// Pending with PodScheduled=False and the scheduler's message ("node(s) were unschedulable").
func (f *Faults) CordonZone(ctx context.Context, zone string) error {
	return f.setZoneCordon(ctx, zone, true)
}

// UncordonZone undoes CordonZone.
func (f *Faults) UncordonZone(ctx context.Context, zone string) error {
	return f.setZoneCordon(ctx, zone, false)
}

func (f *Faults) setZoneCordon(ctx context.Context, zone string, cordon bool) error {
	nodes, err := f.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: zoneLabel + "=" + zone})
	if err != nil {
		return err
	}
	if len(nodes.Items) == 0 {
		return fmt.Errorf("no node in zone %q", zone)
	}
	for _, n := range nodes.Items {
		if err := f.patchNode(ctx, n.Name, map[string]any{"spec": map[string]any{"unschedulable": cordon}}); err != nil {
			return err
		}
	}
	return nil
}

// LoseVolume deletes the PV bound to namespace/claim and strips its pv-protection finalizer,
// as if the disk were destroyed; the PV binder turns the claim Lost within a second.
func (f *Faults) LoseVolume(ctx context.Context, namespace, claim string) error {
	pvc, err := f.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pv := pvc.Spec.VolumeName
	if pv == "" {
		return fmt.Errorf("claim %s/%s is not bound to a volume yet", namespace, claim)
	}
	if err := f.client.CoreV1().PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete PV %s: %w", pv, err)
	}
	body := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := f.client.CoreV1().PersistentVolumes().Patch(ctx, pv, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("remove finalizers of PV %s: %w", pv, err)
	}
	return nil
}

// KillMember makes the simulated celld of namespace/pod exit (code CELLD_SIM_CRASH_CODE,
// default 1): the pod turns not Ready at once, and the container restarts after
// CELLD_SIM_RESTART_MS with a new runtime_generation and a higher restartCount.
func (f *Faults) KillMember(ctx context.Context, namespace, pod string) error {
	return f.annotate(ctx, namespace, pod, celldsim.KillAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
}

// Unhealthy makes the health route of namespace/pod answer 503 (on) or follow the simulated
// process again (off); the pod's Ready follows within about a second.
func (f *Faults) Unhealthy(ctx context.Context, namespace, pod string, on bool) error {
	v := ""
	if on {
		v = "fail"
	}
	return f.SetKnob(ctx, namespace, pod, celldsim.KnobHealthMode, v)
}

// SetKnob overrides one CELLD_SIM_* knob of namespace/pod through its annotation; an empty
// value removes the override, so the pod's env (or the default) applies again.
func (f *Faults) SetKnob(ctx context.Context, namespace, pod, knob, value string) error {
	if !strings.HasPrefix(knob, "CELLD_") {
		return fmt.Errorf("knob %q: knobs are CELLD_SIM_* (or CELLD_*) names", knob)
	}
	return f.annotate(ctx, namespace, pod, celldsim.AnnotationPrefix+knob, value)
}

// SetLoad makes the celld container of namespace/pod use cpu and memory: the Metrics API
// (PodMetrics of the pod, container "celld", and `kubectl top pods`) reports them from
// metrics-server's next scrape on (within MetricResolution, 10 s; CPU to within a few
// millicores, as it is a rate over the scrape window; a pod younger than two scrapes has no
// PodMetrics yet), and
// the simulator's /state node_load follows at once (rss_bytes = memory, in_use_bytes = 4/5 of
// it, cpu_percent_x100 = millicores x 10). It writes the pod annotations
// celldsim.UsageCPUAnnotation and celldsim.UsageMemoryAnnotation, so it works on any pod on a
// kwok node from any process with the admin kubeconfig; other containers of the pod keep 1m
// and 1Mi.
func (f *Faults) SetLoad(ctx context.Context, namespace, pod string, cpu, memory resource.Quantity) error {
	return f.setLoad(ctx, namespace, pod, map[string]string{
		celldsim.UsageCPUAnnotation: cpu.String(), celldsim.UsageMemoryAnnotation: memory.String(),
	})
}

// ClearLoad removes what SetLoad set: the container uses celldsim.DefaultUsageCPU and
// DefaultUsageMemory again.
func (f *Faults) ClearLoad(ctx context.Context, namespace, pod string) error {
	return f.setLoad(ctx, namespace, pod, map[string]string{celldsim.UsageCPUAnnotation: "", celldsim.UsageMemoryAnnotation: ""})
}

// SetUsage writes some of the usage annotations (celldsim.UsageCPUAnnotation,
// UsageMemoryAnnotation) in one patch, leaving the others as they are; an empty value removes
// one. SetLoad sets both.
func (f *Faults) SetUsage(ctx context.Context, namespace, pod string, usage map[string]string) error {
	return f.setLoad(ctx, namespace, pod, usage)
}

// setLoad writes usage annotations in one patch; an empty value removes one.
func (f *Faults) setLoad(ctx context.Context, namespace, pod string, usage map[string]string) error {
	for k, v := range usage {
		if k != celldsim.UsageCPUAnnotation && k != celldsim.UsageMemoryAnnotation {
			return fmt.Errorf("%s is not a usage annotation", k)
		}
		if _, err := resource.ParseQuantity(v); v != "" && err != nil {
			return fmt.Errorf("%s=%q: %w", k, v, err)
		}
	}
	return f.annotateAll(ctx, namespace, pod, usage)
}

func (f *Faults) annotate(ctx context.Context, namespace, pod, key, value string) error {
	return f.annotateAll(ctx, namespace, pod, map[string]string{key: value})
}

// annotateAll sets annotations in one merge patch; an empty value removes one.
func (f *Faults) annotateAll(ctx context.Context, namespace, pod string, kv map[string]string) error {
	annotations := map[string]any{}
	for k, v := range kv {
		annotations[k] = v
		if v == "" {
			annotations[k] = nil
		}
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	_, err := f.client.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotate pod %s/%s: %w", namespace, pod, err)
	}
	return nil
}

func (f *Faults) patchNode(ctx context.Context, node string, patch map[string]any) error {
	body, _ := json.Marshal(patch)
	if _, err := f.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch node %s: %w", node, err)
	}
	return nil
}

// ZoneOf returns the zone label of node.
func (f *Faults) ZoneOf(ctx context.Context, node string) (string, error) {
	n, err := f.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return n.Labels[corev1.LabelTopologyZone], nil
}
