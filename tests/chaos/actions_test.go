package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/tests/celldsim"
	"github.com/celld/celld-operator/tests/chaos/schedule"
	"github.com/celld/celld-operator/tests/localcluster"
)

// campaignFleet is one fleet of the campaign: its layout, its namespace and its bucket.
type campaignFleet struct {
	spec    schedule.Fleet
	layout  string // PersistentFleet, Bucket/Deployment, Bucket/Ordered
	ns      string
	bucket  string
	secret  string
	deleted atomic.Bool // between a delete-fleet and the re-creation's create
}

// render is the fleet as the campaign creates it (at start and at every re-creation): the
// local cluster's storage class, a short shutdown so rollouts take seconds, and one env
// variable from a Secret whose value must never leak.
func (f *campaignFleet) render() *v1.CelldFleet {
	fl := corpus.Persistent()
	fl.Namespace, fl.Name = f.ns, f.spec.Name
	fl.Spec.Replicas = new(int32(f.spec.Replicas))
	fl.Spec.Storage.Bucket = f.bucket
	fl.Spec.Storage.StorageClassName = new(localcluster.StorageClassName)
	fl.Spec.Lifecycle = &v1.LifecycleSpec{ShutdownSeconds: 2, TerminationGraceSeconds: 10}
	fl.Spec.Env = []v1.EnvVar{{Name: "CELLD_CHAOS_TOKEN", SecretKeyRef: &v1.SecretKeyRef{Name: "chaos-env", Key: "token"}}}
	switch f.layout {
	case "Bucket/Deployment":
		fl.Spec.Profile, fl.Spec.BucketWorkload, fl.Spec.Storage.StorageClassName = v1.ProfileBucket, v1.BucketWorkloadDeployment, nil
	case "Bucket/Ordered":
		fl.Spec.Profile, fl.Spec.BucketWorkload, fl.Spec.Storage.StorageClassName = v1.ProfileBucket, v1.BucketWorkloadOrdered, nil
	}
	return fl
}

// members returns the fleet's current member Pods that are not terminating, by name.
func (c *campaign) members(ctx context.Context, f *campaignFleet) ([]corev1.Pod, error) {
	fl := &v1.CelldFleet{}
	if err := c.cl.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.spec.Name}, fl); err != nil {
		return nil, err
	}
	list, err := c.cs.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID + "=" + string(fl.UID)})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// execute runs one action and returns what it did, for the action log. An action whose target
// is gone (a member that was just replaced) is a no-op, said so in the log.
func (c *campaign) execute(ctx context.Context, a schedule.Action) string {
	var f *campaignFleet
	if a.Fleet >= 0 {
		f = c.fleets[a.Fleet]
		if f.deleted.Load() && a.Kind != schedule.Recreate {
			return "skipped: the fleet is deleted"
		}
	}
	cfg := c.cfg
	switch a.Kind {
	case schedule.FailNode:
		node := cfg.Nodes[a.Node]
		ends := c.faultNode(ctx, a.Seq, node)
		c.openers[a.Seq] = ends
		return errText(c.faults.FailNode(ctx, node))
	case schedule.RecoverNode:
		err := c.faults.RecoverNode(ctx, cfg.Nodes[a.Node])
		c.close(a.Closes)
		return errText(err)
	case schedule.CordonZone:
		c.mon.setCordon(true)
		return errText(c.faults.CordonZone(ctx, cfg.Zones[a.Zone]))
	case schedule.UncordonZone:
		err := c.faults.UncordonZone(ctx, cfg.Zones[a.Zone])
		c.mon.setCordon(false)
		return errText(err)
	case schedule.LoseVolume, schedule.DeleteClaim, schedule.KillMember, schedule.DeleteMemberPod, schedule.UnhealthyOn, schedule.CrashLoopMember:
		return c.memberFault(ctx, a, f)
	case schedule.UnhealthyOff:
		pod := c.unhealthy[a.Closes]
		c.close(a.Closes)
		if pod == "" {
			return "skipped: nothing was made unhealthy"
		}
		return pod + ": " + errText(ignoreNotFound(c.faults.Unhealthy(ctx, f.ns, pod, false)))
	case schedule.RogueWorkload:
		c.mon.addFault(a.Seq, f.ns, "workload", true)
		kind := "statefulsets"
		if f.layout == "Bucket/Deployment" {
			kind = "deployments"
		}
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"chaos.celld.eric.dev/rogue":%q}}}}}`, a.Value)
		return errText(c.rogue(ctx, "apps", kind, f.ns, f.spec.Name, patch))
	case schedule.RogueNetworkPolicy:
		patch := fmt.Sprintf(`{"spec":{"podSelector":{"matchLabels":{"chaos.celld.eric.dev/rogue":%q}}}}`, a.Value)
		return errText(c.rogue(ctx, "networking.k8s.io", "networkpolicies", f.ns, f.spec.Name, patch))
	case schedule.RoguePDB:
		return errText(c.rogue(ctx, "policy", "poddisruptionbudgets", f.ns, f.spec.Name, `{"spec":{"maxUnavailable":3}}`))
	case schedule.RestartAPIServer:
		return c.restartAPIServer()
	case schedule.KillLeader:
		return c.ops.KillLeader(ctx)
	case schedule.KillLeaderOnDelete:
		c.ops.Arm()
		return "armed: the replica sending the next member or workload DELETE dies before its answer"
	case schedule.StopLeader:
		return c.ops.StopLeader(ctx)
	case schedule.RestartToken:
		return errText(c.patchFleet(ctx, f, fmt.Sprintf(`{"spec":{"maintenance":{"restartToken":%q}}}`, a.Value)))
	case schedule.RuntimeImage:
		image := corpus.Image[:strings.Index(corpus.Image, "@sha256:")] + "@sha256:" + a.Value
		return errText(c.patchFleet(ctx, f, fmt.Sprintf(`{"spec":{"runtimeImage":%q}}`, image)))
	case schedule.ScaleIn, schedule.ScaleOut:
		return errText(c.patchFleet(ctx, f, fmt.Sprintf(`{"spec":{"replicas":%s}}`, a.Value)))
	case schedule.Pause:
		err := c.patchFleet(ctx, f, `{"spec":{"maintenance":{"paused":true}}}`)
		if err == nil {
			c.mon.setPaused(f.ns, true)
		}
		return errText(err)
	case schedule.RoutingOn:
		return errText(c.patchFleet(ctx, f, fmt.Sprintf(`{"spec":{"routing":{"hostnames":["%s.chaos.example.com"],`+
			`"gateway":{"name":"public","namespace":"edge","sectionName":"https"},"source":{"namespace":"edge","podLabels":{"app":"public-gateway"}}}}}`, f.spec.Name)))
	case schedule.RoutingOff:
		return errText(c.patchFleet(ctx, f, `{"spec":{"routing":null}}`))
	case schedule.MeshOn, schedule.MeshOff:
		return errText(c.patchFleet(ctx, f, meshPatch(a.Kind == schedule.MeshOn)))
	case schedule.FullStop:
		return c.fullStop(ctx, a, f)
	case schedule.FullStart:
		return c.fullStart(ctx, a, f)
	case schedule.Unpause:
		c.mon.setPaused(f.ns, false)
		return errText(c.patchFleet(ctx, f, `{"spec":{"maintenance":{"paused":false}}}`))
	case schedule.DeleteFleet:
		fl := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.spec.Name}}
		err := c.cl.Delete(ctx, fl)
		f.deleted.Store(err == nil)
		if err == nil {
			c.mon.setDeleting(f.ns)
		}
		return errText(err)
	case schedule.Recreate:
		return c.recreate(ctx, f, a.Value)
	}
	return "unknown action"
}

// restartAPIServer restarts kube-apiserver and returns once it serves again; actions due in
// the meantime run after it. It runs in the campaign's context, not the storm's, so a
// violation that stops the storm still finds a serving API server for the report.
func (c *campaign) restartAPIServer() string {
	end := c.mon.addAPIRestart()
	r, err := c.cluster.RestartAPIServer(c.runCtx)
	end()
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("stopped in %s, serving again %s after the SIGTERM", r.Stopped.Round(100*time.Millisecond), r.Down.Round(100*time.Millisecond))
}

// memberFault resolves the action's member among the fleet's Pods and injects the fault,
// after recording it in the fault journal.
func (c *campaign) memberFault(ctx context.Context, a schedule.Action, f *campaignFleet) string {
	pods, err := c.members(ctx, f)
	if err != nil || len(pods) == 0 {
		return "skipped: no member (" + errText(err) + ")"
	}
	target := pods[a.Member%len(pods)]
	pod := target.Name
	claim := "data-" + pod
	switch a.Kind {
	case schedule.LoseVolume:
		c.mon.addFault(a.Seq, f.ns, "claim:"+claim, true)
		c.mon.addFault(a.Seq, f.ns, "pod:"+pod, true)
		return claim + ": " + errText(c.faults.LoseVolume(ctx, f.ns, claim))
	case schedule.DeleteClaim:
		c.mon.addFault(a.Seq, f.ns, "pod:"+pod, true)
		return claim + ": " + errText(c.cs.CoreV1().PersistentVolumeClaims(f.ns).Delete(ctx, claim, metav1.DeleteOptions{}))
	case schedule.KillMember:
		c.mon.addFault(a.Seq, f.ns, "pod:"+pod, true)
		return pod + ": " + errText(c.faults.KillMember(ctx, f.ns, pod))
	case schedule.DeleteMemberPod:
		c.mon.addFault(a.Seq, f.ns, "pod:"+pod, true)
		return pod + ": " + errText(c.cs.CoreV1().Pods(f.ns).Delete(ctx, pod, metav1.DeleteOptions{}))
	case schedule.UnhealthyOn:
		c.openers[a.Seq] = c.mon.addFault(a.Seq, f.ns, "pod:"+pod, false)
		c.unhealthy[a.Seq] = pod
		return pod + ": " + errText(c.faults.Unhealthy(ctx, f.ns, pod, true))
	case schedule.CrashLoopMember:
		// In force until this Pod is gone (the member's next Pod starts clean) or its knob is
		// cleared (heal); the monitor ends it when it sees either.
		end := c.mon.addCrashLoop(a.Seq, f.ns, pod, string(target.UID))
		if err := c.faults.SetKnob(ctx, f.ns, pod, celldsim.KnobCrashAfterMS, "0"); err != nil {
			end()
			return pod + ": " + errText(err)
		}
		return pod + ": exits at every start from now on, killed once: " + errText(c.faults.KillMember(ctx, f.ns, pod))
	}
	return "unknown member fault"
}

// faultNode records a node failure against every campaign fleet with a member on the node.
func (c *campaign) faultNode(ctx context.Context, seq int, node string) func() {
	var ends []func()
	for _, f := range c.fleets {
		pods, _ := c.members(ctx, f)
		for _, p := range pods {
			if p.Spec.NodeName == node {
				ends = append(ends, c.mon.addFault(seq, f.ns, "node:"+node+"/"+p.Name, false))
			}
		}
	}
	return func() {
		for _, e := range ends {
			e()
		}
	}
}

func (c *campaign) close(opener int) {
	if end := c.openers[opener]; end != nil {
		end()
		delete(c.openers, opener)
	}
}

func (c *campaign) patchFleet(ctx context.Context, f *campaignFleet, patch string) error {
	fl := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.spec.Name}}
	return c.cl.Patch(ctx, fl, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// rogue is a writer that is not the operator editing one of its objects in place.
func (c *campaign) rogue(ctx context.Context, group, resource, ns, name, patch string) error {
	gvr := schemaGVR(group, resource)
	_, err := c.dyn.Resource(gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "chaos-rogue"})
	return ignoreNotFound(err)
}

// recreate creates the fleet again under a new bucket once the deleted one is gone. It waits
// in the background so the storm goes on; a fleet whose deletion never finishes fails
// invariant f.
func (c *campaign) recreate(ctx context.Context, f *campaignFleet, suffix string) string {
	f.bucket = f.ns + "-" + f.spec.Name + "-" + suffix
	fl := f.render()
	go func() {
		deadline := time.Now().Add(deletionBound)
		for {
			err := c.cl.Create(ctx, fl.DeepCopy())
			if err == nil {
				c.logf("recreate-fleet %s/%s: created under bucket %s", f.ns, f.spec.Name, f.bucket)
				f.deleted.Store(false)
				return
			}
			if ctx.Err() != nil {
				return
			}
			if !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
				c.mon.mu.Lock()
				c.mon.violate(ruleConvergence, "fleet %s/%s could not be re-created %s after its deletion: %v", f.ns, f.spec.Name, deletionBound, err)
				c.mon.mu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond): // poll until the old fleet's finalizer is released
			}
		}
	}()
	return "waiting for the deleted fleet to be released, then creating it under bucket " + f.bucket
}

func errText(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func clientRawMerge(patch string) client.Patch {
	return client.RawPatch(types.MergePatchType, []byte(patch))
}
