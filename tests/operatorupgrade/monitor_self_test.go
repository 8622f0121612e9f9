package operatorupgrade

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// The monitor must be able to fail: each rule is broken on purpose here, without a cluster,
// and must be reported; the same events within the rules must not be.

const selfUID = types.UID("fleet-uid")

func selfMonitor(t *testing.T) (*monitor, *fake.Clientset) {
	t.Helper()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f", Labels: map[string]string{v1.LabelFleetUID: string(selfUID)}},
		Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": "1"}}}}}
	cs := fake.NewClientset(sts)
	m := newMonitor(cs, nil)
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f", UID: selfUID},
		Spec: v1.CelldFleetSpec{Profile: v1.ProfilePersistentFleet, Replicas: new(int32(3))}}
	if err := m.track(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if err := m.startPhase(context.Background(), "self-test"); err != nil {
		t.Fatal(err)
	}
	// The members as run() lists them before it watches.
	for i := range 3 {
		p := member(i, "u")
		m.fleets[selfUID].pods[p.Name] = p
	}
	m.onPod(watch.Modified, member(0, "u"))
	if v := m.Violations(); len(v) > 0 {
		t.Fatalf("three serving members judged unsafe: %v", v)
	}
	return m, cs
}

func member(i int, uid string) *corev1.Pod {
	name := "f-" + string(rune('0'+i))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid + name), Labels: map[string]string{v1.LabelFleetUID: string(selfUID)}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func changeTemplate(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	ctx := context.Background()
	sts, err := cs.AppsV1().StatefulSets("ns").Get(ctx, "f", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sts.Spec.Template.Annotations["a"] = "2"
	if _, err := cs.AppsV1().StatefulSets("ns").Update(ctx, sts, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func expectViolation(t *testing.T, m *monitor, want string) {
	t.Helper()
	v := m.Violations()
	if len(v) == 0 || !strings.Contains(v[0], want) {
		t.Fatalf("want a first violation containing %q, got %v", want, v)
	}
}

func TestMonitorRefusesARestartWithoutATemplateChange(t *testing.T) {
	m, _ := selfMonitor(t)
	m.onPod(watch.Deleted, member(1, "u"))
	expectViolation(t, m, "while the StatefulSet template of fleet ns/f is unchanged")
}

func TestMonitorAllowsOneMemberDownInARollout(t *testing.T) {
	m, cs := selfMonitor(t)
	changeTemplate(t, cs)
	m.onPod(watch.Deleted, member(2, "u"))
	m.onPod(watch.Added, member(2, "v"))
	if v := m.Violations(); len(v) > 0 {
		t.Fatalf("a rollout of one member judged unsafe: %v", v)
	}
	if r := m.report(); len(r) != 1 || !r[0].TemplateChanged || r[0].MaxMembersDown != 1 {
		t.Fatalf("report %+v", r)
	}
}

func TestMonitorRefusesTwoMembersDown(t *testing.T) {
	m, cs := selfMonitor(t)
	changeTemplate(t, cs)
	m.onPod(watch.Deleted, member(2, "u"))
	m.onPod(watch.Deleted, member(1, "u"))
	expectViolation(t, m, "2 of 3 members of fleet ns/f down at once")
}

func TestMonitorRefusesANotReadyMemberWithoutATemplateChange(t *testing.T) {
	m, _ := selfMonitor(t)
	p := member(0, "u")
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	m.onPod(watch.Modified, p)
	expectViolation(t, m, "a member of fleet ns/f is down")
}

func TestMonitorRefusesAClaimDelete(t *testing.T) {
	m, _ := selfMonitor(t)
	m.onClaim(watch.Deleted, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data-f-0", UID: "c"}})
	expectViolation(t, m, "claim ns/data-f-0 (uid c) was deleted")
}

func TestMonitorRefusesAnOperatorDelete(t *testing.T) {
	m, _ := selfMonitor(t)
	m.onWrite(writeRecord{Operator: "current", Method: "DELETE", Path: "/api/v1/namespaces/ns/services/f"})
	expectViolation(t, m, "operator current sent DELETE /api/v1/namespaces/ns/services/f")
}

func TestMonitorRefusesABlockedFleet(t *testing.T) {
	m, _ := selfMonitor(t)
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f", UID: selfUID, ResourceVersion: "7"},
		Status: v1.CelldFleetStatus{Conditions: []metav1.Condition{
			{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonStorageScopeConflict},
			{Type: v1.ConditionBlocked, Status: metav1.ConditionTrue, Reason: v1.ReasonStorageScopeConflict, Message: "held by another fleet"},
		}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(f)
	if err != nil {
		t.Fatal(err)
	}
	m.onFleetStatus(&unstructured.Unstructured{Object: obj})
	expectViolation(t, m, "fleet ns/f is Blocked: StorageScopeConflict: held by another fleet")
}

func TestMonitorRefusesAFleetLeavingReadyWithoutATemplateChange(t *testing.T) {
	m, _ := selfMonitor(t)
	for i, st := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse} {
		f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f", UID: selfUID, ResourceVersion: string(rune('1' + i))},
			Status: v1.CelldFleetStatus{Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: st, Reason: v1.ReasonLifecycleProgress}}}}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(f)
		if err != nil {
			t.Fatal(err)
		}
		m.onFleet(watch.Modified, &unstructured.Unstructured{Object: obj})
	}
	expectViolation(t, m, "fleet ns/f left Ready (False/LifecycleProgress) while its template is unchanged")
}

func TestParsePath(t *testing.T) {
	for path, want := range map[string][4]string{
		"/api/v1/namespaces/ns/pods/p":                                     {"ns", "pods", "p", ""},
		"/apis/celld.eric.dev/v1alpha1/namespaces/ns/celldfleets/f/status": {"ns", "celldfleets", "f", "status"},
		"/apis/coordination.k8s.io/v1/namespaces/celld-system/leases":      {"celld-system", "leases", "", ""},
		"/apis/celld.eric.dev/v1alpha1/celldstoragereservations/r":         {"", "celldstoragereservations", "r", ""},
	} {
		ns, res, name, sub := parsePath(path)
		if got := [4]string{ns, res, name, sub}; got != want {
			t.Errorf("parsePath(%s) = %v, want %v", path, got, want)
		}
	}
}
