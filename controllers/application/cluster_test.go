package application

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/celld"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/tests/apiserver"
)

// The tests in this file run against a real kube-apiserver (envtest, binaries from bin/), since
// field ownership and server-side apply merging are the API server's behaviour, not ours. The
// server starts on first use, so the pure tests of the package do not wait for it.
var env = apiserver.Shared{Dirs: []string{"config/crd/bases"},
	Schemes: []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme}}

func TestMain(m *testing.M) {
	code := m.Run()
	env.Stop()
	os.Exit(code)
}

// apiServer returns a client of the package's API server, starting it once.
func apiServer(t *testing.T) client.Client { return env.Client(t) }

func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "app-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// bucketFleet creates a Bucket fleet with a layout: Ordered runs a StatefulSet without claims,
// Deployment a Deployment.
func bucketFleet(t *testing.T, c client.Client, ns string, layout v1.BucketWorkload) *v1.CelldFleet {
	t.Helper()
	f := corpus.Bucket()
	f.Namespace, f.Name = ns, "f"
	f.Spec.BucketWorkload = layout
	if err := c.Create(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	return f
}

var podTemplate = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "celld", Image: corpus.Image}}}}

// statefulSetOf creates the fleet's StatefulSet as the reconciler would label it.
func statefulSetOf(t *testing.T, c client.Client, f *v1.CelldFleet, replicas int32) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{v1.LabelFleetUID: string(f.UID)}
	tpl := podTemplate.DeepCopy()
	tpl.Labels = labels
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Name, Labels: labels},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: *tpl}}
	if err := c.Create(t.Context(), sts); err != nil {
		t.Fatal(err)
	}
	return sts
}

// runningPod creates a Ready member Pod controlled by owner, as a kubelet would report it.
func runningPod(t *testing.T, c client.Client, f *v1.CelldFleet, name, ip string, owner client.Object, kind string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: name,
		Labels:          map[string]string{v1.LabelFleetUID: string(f.UID)},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: new(true)}}},
		Spec: podTemplate.Spec}
	if err := c.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "celld", Image: corpus.Image, ImageID: "sha256:1", Ready: true,
			ContainerID: "containerd://" + name + "-0", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{
				StartedAt: metav1.NewTime(time.Now().Add(-time.Minute))}}}}}
	if err := c.Status().Update(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeReader answers /state for pod IPs with one version; during lets a test act while a
// given IP is being read.
type fakeReader struct {
	versions map[string]string
	during   map[string]func(context.Context)
}

func (r *fakeReader) ReadState(ctx context.Context, ip string) (celld.Reading, error) {
	sent := time.Now()
	if fn := r.during[ip]; fn != nil {
		fn(ctx)
	}
	v, ok := r.versions[ip]
	if !ok {
		return celld.Reading{}, fmt.Errorf("no pod at %s", ip)
	}
	return reading(v, sent), nil
}

func fleetNow(t *testing.T, c client.Client, f *v1.CelldFleet) *v1.CelldFleet {
	t.Helper()
	live := &v1.CelldFleet{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	return live
}

// reading is a fresh answer of a node on version v.
func reading(v string, sent time.Time) celld.Reading {
	return celld.Reading{Sent: sent, Received: time.Now(), State: celld.State{RuntimeGeneration: "g",
		Deployment: celld.Deployment{Version: v, Prefix: "deploy/app/" + v, Generation: 1}}}
}

// reportedFleet writes what the fleet reconciler's first pass would (a Ready condition and
// every member Ready) so the observer's scan takes the fleet up, and returns the fleet.
func reportedFleet(t *testing.T, c client.Client, f *v1.CelldFleet, members int32) *v1.CelldFleet {
	t.Helper()
	live := &v1.CelldFleet{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	live.Status.DesiredReplicas, live.Status.ReadyReplicas = members, members
	live.Status.Conditions = append(live.Status.Conditions, metav1.Condition{Type: v1.ConditionReady,
		Status: metav1.ConditionTrue, Reason: v1.ReasonProvisioned, Message: "ready", LastTransitionTime: metav1.Now()})
	if err := c.Status().Update(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	return live
}
