package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
)

// A replacement records the claim it gives up and deletes it with UID and resourceVersion
// preconditions. Other controllers write the claim while the replacement runs: on Kubernetes
// 1.37 the unused-since controller sets the claim's Unused condition as soon as the victim
// Pod stops running, which moved the resourceVersion between the Pod delete and the claim
// delete in 3 of 5 runs on the local cluster; the delete conflicted, the conflict was taken
// for "already gone", and the member came back on its old disk after MemberReplaced was told.
// These tests write the claim at exactly that moment (the first claim delete the operator
// sends) against a real API server, and check what the replacement does about it.
func TestAReplacementDeletesTheRecordedClaimOnlyWhileNothingThatMattersChanged(t *testing.T) {
	unused := func(c *corev1.PersistentVolumeClaim) { // a status write, as the unused-since controller's
		c.Status.Conditions = append(c.Status.Conditions, corev1.PersistentVolumeClaimCondition{
			Type: "Unused", Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	}
	cases := []struct {
		name string
		// change edits the claim at the first delete; status says it is a status write
		change func(*corev1.PersistentVolumeClaim)
		status bool
		// every: the change is made before every delete, not only the first
		every   bool
		lonely  bool // no Pod holds the claim: the claim delete is the whole replacement
		deleted bool
		// abandoned is a fragment of the abandonment's message; empty when none is expected
		abandoned string
		failed    bool
	}{
		{name: "another controller writes the claim's status", change: unused, status: true, deleted: true},
		{name: "another controller annotates the claim", change: func(c *corev1.PersistentVolumeClaim) {
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, "volume.kubernetes.io/selected-node", "node-a")
		}, deleted: true},
		{name: "the status moves before the lone claim's delete", change: unused, status: true, lonely: true, deleted: true},
		{name: "the claim is bound to a volume meanwhile", change: func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = "pv-elsewhere"
		}, abandoned: `it is now bound to volume "pv-elsewhere", not ""`},
		{name: "the lone claim is bound to a volume meanwhile", lonely: true, change: func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = "pv-elsewhere"
		}, abandoned: `it is now bound to volume "pv-elsewhere"`},
		{name: "the claim stops carrying the fleet's label", change: func(c *corev1.PersistentVolumeClaim) {
			delete(c.Labels, v1.LabelFleetUID)
		}, abandoned: "it no longer carries the label " + v1.LabelFleetUID},
		{name: "the status keeps moving at every attempt", change: unused, status: true, every: true, failed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHandoffHarness(t, !tc.lonely)
			first := true
			h.beforeClaimDelete = func(c client.WithWatch) {
				if !first && !tc.every {
					return
				}
				first = false
				h.editClaim(t, c, tc.change, tc.status)
			}
			d := h.decision(t)
			committed, err := h.r.replace(ctx, h.s, d)
			if tc.failed {
				if err == nil || !apierrors.IsConflict(err) {
					t.Fatalf("a claim whose resourceVersion never stops moving must end the replacement with the conflict, got %v", err)
				}
				if !tc.lonely {
					pod := h.pod(t)
					in, ok := readIntent(pod)
					if !ok || !in.Committed || !controllerutil.ContainsFinalizer(pod, v1.FinalizerReplacingDisk) {
						t.Fatalf("the committed hold must stay for the next pass to finish, got %+v on %v", in, pod.Finalizers)
					}
				}
				if h.claimGoing(t) {
					t.Fatal("the claim was deleted although every delete conflicted")
				}
				return
			}
			if err != nil {
				t.Fatalf("replace: %v", err)
			}
			if got := h.claimGoing(t); got != tc.deleted {
				t.Fatalf("claim deleted = %v, want %v (a conflict must never be taken for success, nor a changed claim deleted)", got, tc.deleted)
			}
			if !tc.lonely {
				if !committed {
					t.Fatal("the Pod delete commits the replacement")
				}
				if p := h.podOrNil(t); p != nil && controllerutil.ContainsFinalizer(p, v1.FinalizerReplacingDisk) {
					t.Fatalf("the hold must be released, finalizers %v", p.Finalizers)
				}
			}
			events := h.events()
			if tc.abandoned == "" {
				if h.s.abandoned != nil {
					t.Fatalf("nothing that matters changed, yet the replacement was abandoned: %s", h.s.abandoned.Message)
				}
				if !strings.Contains(events, v1.EventMemberReplaced) {
					t.Fatalf("the replacement's event is missing: %s", events)
				}
				return
			}
			if h.s.abandoned == nil {
				t.Fatal("a changed claim was kept without saying so")
			}
			for _, want := range []string{v1.EventReplacementAbandoned, h.member(), "data-" + h.member(), tc.abandoned} {
				if !strings.Contains(events, want) {
					t.Fatalf("the abandonment's event must name %q, got %s", want, events)
				}
			}
			if !strings.Contains(h.s.abandoned.Message, tc.abandoned) || !strings.Contains(h.s.abandoned.Message, h.member()) {
				t.Fatalf("the status message must name the member and the change, got %q", h.s.abandoned.Message)
			}
		})
	}
}

// An intent written by the previous release records no claim spec: if its claim moved, the
// operator cannot tell a status write from a change that matters, so it keeps the claim and
// says why, rather than guessing.
func TestAHandoffRecordedByTheEarlierReleaseIsAbandonedWhenItsClaimMoved(t *testing.T) {
	ctx := context.Background()
	h := newHandoffHarness(t, true)
	claim := h.claim(t)
	in, err := json.Marshal(intent{FleetUID: h.s.fleet.UID, ClaimUID: claim.UID, ClaimName: claim.Name,
		ClaimResourceVersion: claim.ResourceVersion, Committed: true, Event: v1.EventMemberReplaced, Message: "Replacing member"})
	if err != nil {
		t.Fatal(err)
	}
	pod := h.pod(t)
	pod.Annotations = map[string]string{v1.AnnotationReplacementClaim: string(in)}
	controllerutil.AddFinalizer(pod, v1.FinalizerReplacingDisk)
	if err := h.admin.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	h.editClaim(t, h.admin, func(c *corev1.PersistentVolumeClaim) {
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, "touched", "yes")
	}, false)

	if err := h.r.finishReplacement(ctx, h.s, pod); err != nil {
		t.Fatal(err)
	}
	if h.claimGoing(t) {
		t.Fatal("a claim that moved since an earlier release recorded it was deleted without verification")
	}
	if h.s.abandoned == nil || !strings.Contains(h.s.abandoned.Message, "earlier operator release") {
		t.Fatalf("the abandonment must say why, got %+v", h.s.abandoned)
	}
	if p := h.podOrNil(t); p != nil && controllerutil.ContainsFinalizer(p, v1.FinalizerReplacingDisk) {
		t.Fatalf("the hold must be released, finalizers %v", p.Finalizers)
	}
}

// The Pod delete commits a replacement, and the Committed mark is a separate write after it.
// The fault campaign's leader kill can land between the two: the next leader then finds a held
// Pod that is terminating with an uncommitted hold. MemberReplaced was already told, so the
// replacement must be finished (the claim goes), not aborted (the claim kept).
func TestAHeldPodAlreadyTerminatingIsACommittedReplacement(t *testing.T) {
	ctx := context.Background()
	h := newHandoffHarness(t, true)
	in, err := json.Marshal(intent{FleetUID: h.s.fleet.UID, ClaimName: h.claim(t).Name, ClaimUID: h.claim(t).UID,
		ClaimResourceVersion: h.claim(t).ResourceVersion, ClaimSpecHash: claimSpecHash(h.claim(t)),
		Event: v1.EventMemberReplaced, Message: "Replacing member " + h.member()})
	if err != nil {
		t.Fatal(err)
	}
	pod := h.pod(t)
	pod.Annotations = map[string]string{v1.AnnotationReplacementClaim: string(in)}
	controllerutil.AddFinalizer(pod, v1.FinalizerReplacingDisk)
	if err := h.admin.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.Delete(ctx, pod); err != nil { // the replacement's Pod delete; the pass stops here
		t.Fatal(err)
	}
	h.s.held = []corev1.Pod{*h.pod(t)}

	if _, err := h.r.resumeReplacements(ctx, h.s); err != nil {
		t.Fatal(err)
	}
	if !h.claimGoing(t) {
		t.Fatal("a replacement whose Pod was already deleted was aborted: the member keeps its old disk after MemberReplaced was told")
	}
	if events := h.events(); !strings.Contains(events, v1.EventMemberReplaced) {
		t.Fatalf("the finishing pass must tell the replacement, got %q", events)
	}
	if p := h.podOrNil(t); p != nil && controllerutil.ContainsFinalizer(p, v1.FinalizerReplacingDisk) {
		t.Fatalf("the hold must be released, finalizers %v", p.Finalizers)
	}
}

// A Pod changed between the hold and the replacement's Pod delete (someone deleted it, say)
// makes the delete conflict: nothing is committed, so the hold goes at once and the claim stays.
// A later pass must not mistake that Pod, terminating, for one the replacement deleted.
func TestAReplacementWhosePodDeleteConflictsReleasesItsHoldAtOnce(t *testing.T) {
	ctx := context.Background()
	h := newHandoffHarness(t, true)
	h.beforePodDelete = func(c client.WithWatch) {
		h.beforePodDelete = nil
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: h.member()}, p); err != nil {
			t.Fatal(err)
		}
		metav1.SetMetaDataLabel(&p.ObjectMeta, "someone", "else")
		if err := c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := h.r.replace(ctx, h.s, h.decision(t))
	if committed || err == nil || !apierrors.IsConflict(err) {
		t.Fatalf("a Pod delete that conflicts commits nothing and returns the conflict, got committed=%v err=%v", committed, err)
	}
	if p := h.pod(t); controllerutil.ContainsFinalizer(p, v1.FinalizerReplacingDisk) || p.Annotations[v1.AnnotationReplacementClaim] != "" {
		t.Fatalf("the uncommitted hold must be released at once, got finalizers %v annotations %v", p.Finalizers, p.Annotations)
	}
	if h.claimGoing(t) {
		t.Fatal("the claim of a replacement that never committed was deleted")
	}
	if strings.Contains(h.events(), v1.EventMemberReplaced) {
		t.Fatal("a replacement that never committed was told")
	}
}

// handoffHarness is a fleet with one member's Pod and claim on a real API server, and a
// reconciler whose direct client calls beforeClaimDelete before each claim delete it sends.
type handoffHarness struct {
	r                 *Reconciler
	admin             client.Client
	s                 *scope
	ns                string
	withPod           bool
	recorder          *events.FakeRecorder
	beforeClaimDelete func(client.WithWatch)
	beforePodDelete   func(client.WithWatch)
}

func newHandoffHarness(t *testing.T, withPod bool) *handoffHarness {
	t.Helper()
	ctx := context.Background()
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	h := &handoffHarness{r: r, admin: admin, withPod: withPod, recorder: events.NewFakeRecorder(32)}
	r.Recorder = h.recorder
	inner, err := client.NewWithWatch(testCfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	r.Direct = interceptor.NewClient(inner, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.PersistentVolumeClaim); ok && h.beforeClaimDelete != nil {
				h.beforeClaimDelete(c)
			}
			if _, ok := obj.(*corev1.Pod); ok && h.beforePodDelete != nil {
				h.beforePodDelete(c)
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	h.ns = setup(t, admin)
	f := createFleet(t, admin, h.ns, "ho", h.ns+"-ho", nil)
	live := &v1.CelldFleet{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	h.s = newScope(live, time.Now())
	labels := map[string]string{v1.LabelFleetUID: string(live.UID)}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "data-" + h.member(), Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := admin.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if withPod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: h.member(), Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "celld", Image: "celld"}}}}
		if err := admin.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *handoffHarness) member() string { return "ho-1" }

// decision is the healing chain's ReplaceMember for the member, as confirmed.
func (h *handoffHarness) decision(t *testing.T) lifecycle.Decision {
	t.Helper()
	claim := h.claim(t)
	msg := "Replacing member " + h.member() + ": down while the rest of the fleet is ready; it returns on a fresh disk"
	d := lifecycle.Decision{Action: lifecycle.ReplaceMember, Ordinal: 1,
		Claim:  lifecycle.Ref{Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion},
		Reason: v1.ReasonLifecycleProgress, Message: msg, Event: v1.EventMemberReplaced, EventMessage: msg}
	if h.withPod {
		p := h.pod(t)
		d.Pod = lifecycle.Ref{Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion}
	}
	return d
}

func (h *handoffHarness) claim(t *testing.T) *corev1.PersistentVolumeClaim {
	t.Helper()
	c := &corev1.PersistentVolumeClaim{}
	if err := h.admin.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "data-" + h.member()}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// claimGoing: the claim the harness created is gone or being deleted.
func (h *handoffHarness) claimGoing(t *testing.T) bool {
	t.Helper()
	c := &corev1.PersistentVolumeClaim{}
	err := h.admin.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "data-" + h.member()}, c)
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.DeletionTimestamp != nil
}

// editClaim changes the claim through c, in its status or its object.
func (h *handoffHarness) editClaim(t *testing.T, c client.Client, change func(*corev1.PersistentVolumeClaim), status bool) {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "data-" + h.member()}, claim); err != nil {
		t.Fatal(err)
	}
	change(claim)
	var err error
	if status {
		err = c.Status().Update(context.Background(), claim)
	} else {
		err = c.Update(context.Background(), claim)
	}
	if err != nil {
		t.Fatalf("edit the claim: %v", err)
	}
}

func (h *handoffHarness) pod(t *testing.T) *corev1.Pod {
	t.Helper()
	p := h.podOrNil(t)
	if p == nil {
		t.Fatal("the member's Pod is gone")
	}
	return p
}

func (h *handoffHarness) podOrNil(t *testing.T) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	err := h.admin.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: h.member()}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// events drains the recorded events into one string.
func (h *handoffHarness) events() string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// TestAReplacementIsAnnouncedBeforeItsFirstWrite: with a Pod and without one, the operator's
// "replacement" line naming the fleet, the member and the claim is in the log before the first
// write of the replacement is sent (the hold, or the lone claim's delete), so a replacement
// whose operator dies while sending it still has a record.
func TestAReplacementIsAnnouncedBeforeItsFirstWrite(t *testing.T) {
	for _, withPod := range []bool{true, false} {
		t.Run(fmt.Sprintf("with a Pod: %v", withPod), func(t *testing.T) {
			h := newHandoffHarness(t, withPod)
			ctx, lines := loggedContext()
			announced := func() bool {
				for _, l := range *lines {
					if strings.Contains(l, `"msg"="replacement"`) && strings.Contains(l, `"member"="`+h.member()+`"`) &&
						strings.Contains(l, `"claim"="data-`+h.member()+`"`) && strings.Contains(l, `"fleet"="`+h.ns+`/ho"`) {
						return true
					}
				}
				return false
			}
			checked := false
			check := func(what string) {
				checked = true
				if !announced() {
					t.Errorf("the %s was sent before the replacement was announced: %v", what, *lines)
				}
			}
			inner := h.r.Direct
			h.r.Direct = interceptor.NewClient(inner.(client.WithWatch), interceptor.Funcs{
				Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					if _, ok := obj.(*corev1.Pod); ok && !checked {
						check("hold of the Pod")
					}
					return c.Update(ctx, obj, opts...)
				},
			})
			h.beforeClaimDelete = func(client.WithWatch) {
				if !checked {
					check("lone claim's delete")
				}
			}
			committed, err := h.r.replace(ctx, h.s, h.decision(t))
			if err != nil || !committed {
				t.Fatalf("replace: committed=%v err=%v", committed, err)
			}
			if !checked {
				t.Fatal("no write of the replacement was seen: the check above proves nothing")
			}
		})
	}
}
