package application

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// observer builds an Observer on the test API server with no cache in front of it.
func observer(c client.Client, r StateReader) *Observer {
	return New(c, c, c.Status(), Options{Reader: r})
}

func TestAStatefulSetFleetOnOneVersionIsPublishedConverged(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	sts := statefulSetOf(t, c, f, 2)
	runningPod(t, c, f, "f-0", "10.1.0.1", sts, "StatefulSet")
	runningPod(t, c, f, "f-1", "10.1.0.2", sts, "StatefulSet")
	o := observer(c, &fakeReader{versions: map[string]string{"10.1.0.1": "v1", "10.1.0.2": "v1"}})

	o.ObserveFleet(t.Context(), fleetNow(t, c, f))

	live := fleetNow(t, c, f)
	cond := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionApplicationConverged)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1.ReasonConverged || cond.Message != Message || cond.ObservedGeneration != live.Generation {
		t.Fatalf("ApplicationConverged %+v, want True/Converged with the fixed message and generation %d", cond, live.Generation)
	}
	app := live.Status.Application
	if app == nil || app.ObservedVersion == nil || app.ObservedVersion.Version != "v1" || app.ObservedNodes != 2 || app.ExpectedNodes != 2 {
		t.Fatalf("status.application %+v, want observedVersion v1 on 2 of 2 nodes", app)
	}
}

func TestARestartDuringSamplingIsMembershipChanged(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	sts := statefulSetOf(t, c, f, 2)
	runningPod(t, c, f, "f-0", "10.2.0.1", sts, "StatefulSet")
	p1 := runningPod(t, c, f, "f-1", "10.2.0.2", sts, "StatefulSet")
	restart := func(ctx context.Context) {
		// the kubelet reports a new container incarnation while its /state is being read
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p1), p); err != nil {
			t.Error(err)
			return
		}
		p.Status.ContainerStatuses[0].RestartCount++
		p.Status.ContainerStatuses[0].ContainerID = "containerd://f-1-1"
		if err := c.Status().Update(ctx, p); err != nil {
			t.Error(err)
		}
	}
	r := &fakeReader{versions: map[string]string{"10.2.0.1": "v1", "10.2.0.2": "v1"},
		during: map[string]func(context.Context){"10.2.0.2": restart}}

	got, err := observer(c, r).Observe(t.Context(), fleetNow(t, c, f))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != metav1.ConditionUnknown || got.Reason != v1.ReasonMembershipChanged || got.Application.ObservedVersion != nil {
		t.Fatalf("%s/%s observedVersion %v, want Unknown/MembershipChanged without observedVersion: the answer may be the previous container's",
			got.Status, got.Reason, got.Application.ObservedVersion)
	}

	// the next collection sees a stable membership again
	r.during = nil
	got, err = observer(c, r).Observe(t.Context(), fleetNow(t, c, f))
	if err != nil {
		t.Fatal(err)
	}
	if got.Reason != v1.ReasonConverged {
		t.Fatalf("second collection %s/%s, want True/Converged once membership holds still", got.Status, got.Reason)
	}
}

func TestADeploymentFleetsMembersAreTheReplicaSetsPods(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadDeployment)
	labels := map[string]string{v1.LabelFleetUID: string(f.UID)}
	tpl := podTemplate.DeepCopy()
	tpl.Labels = labels
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: f.Name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: *tpl}}
	if err := c.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f-abc", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: new(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: *tpl}}
	if err := c.Create(t.Context(), rs); err != nil {
		t.Fatal(err)
	}
	runningPod(t, c, f, "f-abc-x", "10.3.0.1", rs, "ReplicaSet")
	r := &fakeReader{versions: map[string]string{"10.3.0.1": "v1", "10.3.0.2": "v1"}}

	got, err := observer(c, r).Observe(t.Context(), fleetNow(t, c, f))
	if err != nil || got.Reason != v1.ReasonConverged {
		t.Fatalf("%s/%s (%v), want Converged for the Pod of the Deployment's ReplicaSet", got.Status, got.Reason, err)
	}

	// a Pod with the fleet's label that another controller runs is not a member to vouch for
	other := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign", Labels: labels},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: *tpl}}
	if err := c.Create(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	runningPod(t, c, f, "f-foreign", "10.3.0.2", other, "ReplicaSet")
	got, err = observer(c, r).Observe(t.Context(), fleetNow(t, c, f))
	if err != nil || got.Reason != v1.ReasonMembershipUnavailable {
		t.Fatalf("%s/%s (%v), want Unknown/MembershipUnavailable with a foreign Pod carrying the fleet label", got.Status, got.Reason, err)
	}
}

func TestAMissingWorkloadIsWorkloadUnavailable(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	got, err := observer(c, &fakeReader{}).Observe(t.Context(), fleetNow(t, c, f))
	if err != nil || got.Status != metav1.ConditionUnknown || got.Reason != v1.ReasonWorkloadUnavailable {
		t.Fatalf("%s/%s (%v), want Unknown/WorkloadUnavailable", got.Status, got.Reason, err)
	}
}

func TestTheLeaderOnlyRunnableObservesFleetsUntilStopped(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	sts := statefulSetOf(t, c, f, 1)
	runningPod(t, c, f, "f-0", "10.4.0.1", sts, "StatefulSet")
	reportedFleet(t, c, f, 1)
	o := New(c, c, c.Status(), Options{Reader: &fakeReader{versions: map[string]string{"10.4.0.1": "v1"}},
		Scan: 20 * time.Millisecond, Interval: 50 * time.Millisecond})
	if !o.NeedLeaderElection() {
		t.Fatal("the observer must run in the leader only")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- o.Start(ctx) }()

	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		cond := meta.FindStatusCondition(fleetNow(t, c, f).Status.Conditions, v1.ConditionApplicationConverged)
		return cond != nil && cond.Reason == v1.ReasonConverged, nil
	})
	if err != nil {
		t.Fatal("the runnable did not publish Converged for a fleet on one version")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start returned %v when its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
}
