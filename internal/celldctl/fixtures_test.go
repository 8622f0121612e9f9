package celldctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// now is the fixtures' clock; ago(d) is a time d before it.
var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

const fixtureNS, fixtureName, fixtureUID = "shop", "pf", "0b6c6c2e-uid-pf"

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s (run go test -update to create it): %v", path, err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (go test ./internal/celldctl -update rewrites it after review)\n--- got:\n%s\n--- want:\n%s", path, got, want)
	}
}

// fixtureFleet is a Provisioned 3-member PersistentFleet as the operator reports it.
func fixtureFleet() *v1.CelldFleet {
	f := corpus.Persistent()
	f.Namespace, f.Name, f.UID = fixtureNS, fixtureName, fixtureUID
	f.Generation = 4
	f.CreationTimestamp = ago(3 * time.Hour)
	f.Spec.Replicas = new(int32(3))
	f.Spec.Storage.Bucket = "shop-pf"
	f.Spec.Maintenance = &v1.MaintenanceSpec{RestartToken: "r1"}
	f.Spec.Env = []v1.EnvVar{{Name: "CELLD_AUTH_TOKEN", SecretKeyRef: &v1.SecretKeyRef{Name: "pf-auth", Key: "token"}}}
	f.Spec.Routing = &v1.RoutingSpec{
		Hostnames: []string{"shop.example.com"},
		Source:    v1.RoutingSource{Namespace: "gateway", PodLabels: map[string]v1.LabelValue{"app": "envoy"}},
		Gateway:   &v1.GatewayRouting{Name: "public", Namespace: "gateway"},
	}
	f.Spec.Capacity = &v1.CapacityPolicy{Mode: v1.CapacityShadow}
	res := reservation.Desired(f)
	f.Status = v1.CelldFleetStatus{
		ObservedGeneration: 4, Replicas: 3, DesiredReplicas: 3, AppliedReplicas: 3, ObservedReplicas: 3, ReadyReplicas: 3,
		ReplicaObservationValid: true, LabelSelector: v1.LabelFleetUID + "=" + fixtureUID, Reservation: res.Name,
		Conditions: []metav1.Condition{
			{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonProvisioned, Message: "All 3 members are ready", LastTransitionTime: ago(40 * time.Minute)},
			{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: v1.ReasonProvisioned, LastTransitionTime: ago(40 * time.Minute)},
			{Type: v1.ConditionBlocked, Status: metav1.ConditionFalse, Reason: v1.ReasonProvisioned, LastTransitionTime: ago(2 * time.Hour)},
			{Type: v1.ConditionMaintenancePaused, Status: metav1.ConditionFalse, Reason: v1.ReasonNotPaused, LastTransitionTime: ago(3 * time.Hour)},
			{Type: v1.ConditionRoutingReady, Status: metav1.ConditionTrue, Reason: v1.ReasonRouteAccepted, Message: "Gateway gateway/public accepted HTTPRoute pf-routing", LastTransitionTime: ago(2 * time.Hour)},
			{Type: v1.ConditionApplicationConverged, Status: metav1.ConditionTrue, Reason: v1.ReasonConverged, Message: "All 3 members loaded v42", LastTransitionTime: ago(30 * time.Minute)},
		},
		Capacity: &v1.CapacityStatus{Mode: v1.CapacityShadow, Reason: "WithinThresholds", Message: "Every member is between the thresholds", DesiredReplicas: 3, UsefulReplicas: 3, CoveredReplicas: 3},
		Application: &v1.ApplicationStatus{
			ObservedAt: new(ago(5 * time.Second)), ExpectedNodes: 3, ObservedNodes: 3,
			ObservedVersion: &v1.ApplicationVersion{Version: "v42", Prefix: "apps/shop/v42"},
			Versions:        []v1.ApplicationVersionCount{{Version: "v42", Prefix: "apps/shop/v42", Nodes: 3}},
			Nodes: []v1.ApplicationNode{
				{Name: "pf-0", Version: "v42", Reason: "Converged"}, {Name: "pf-1", Version: "v42", Reason: "Converged"}, {Name: "pf-2", Version: "v42", Reason: "Converged"},
			},
		},
	}
	return f
}

func fixtureReservation(f *v1.CelldFleet) *v1.CelldStorageReservation {
	r := reservation.Desired(f)
	h := capacity.History{Declared: 3, LastScaleOut: now.Add(-2 * time.Hour)}
	raw, _ := json.Marshal(h)
	value, err := reservation.CapacityAnnotation(f.UID, raw)
	if err != nil {
		panic(err)
	}
	r.Annotations[v1.AnnotationCurrentOperation] = value
	r.CreationTimestamp = f.CreationTimestamp
	return r
}

func fixtureStatefulSet(replicas int32, current, updated string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNS, Name: fixtureName, Generation: 7, Labels: map[string]string{v1.LabelFleetUID: fixtureUID}},
		Spec:       appsv1.StatefulSetSpec{Replicas: new(replicas)},
		Status:     appsv1.StatefulSetStatus{ObservedGeneration: 7, Replicas: replicas, CurrentRevision: current, UpdateRevision: updated},
	}
}

var nodeOf = []string{"kwok-us-east-1a-0", "kwok-us-east-1b-0", "kwok-us-east-1c-0"}

func fixtureZones() map[string]string {
	return map[string]string{nodeOf[0]: "us-east-1a", nodeOf[1]: "us-east-1b", nodeOf[2]: "us-east-1c"}
}

// fixturePod is member i, Running and Ready on revision rev.
func fixturePod(i int, rev string, started time.Duration) corev1.Pod {
	name := fmt.Sprintf("%s-%d", fixtureName, i)
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNS, Name: name, UID: types.UID("uid-" + name),
			Labels:            map[string]string{v1.LabelFleetUID: fixtureUID, appsv1.ControllerRevisionHashLabelKey: rev},
			Annotations:       map[string]string{v1.AnnotationRestartToken: "r1"},
			CreationTimestamp: ago(started)},
		Spec: corev1.PodSpec{
			NodeName: nodeOf[i%3],
			Containers: []corev1.Container{{Name: "celld", Image: corpus.Image, Env: []corev1.EnvVar{
				{Name: "CELLD_DURABILITY", Value: "fleet"},
				{Name: "CELLD_AUTH_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "pf-auth"}, Key: "token"}}},
			}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", 10+i), StartTime: new(ago(started)),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "celld", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(started)}}}},
		},
	}
}

func notReady(p *corev1.Pod, waiting string) {
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	p.Status.ContainerStatuses[0].Ready = false
	if waiting != "" {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}}
		p.Status.ContainerStatuses[0].RestartCount = 6
	}
}

func fixtureClaim(i int, phase corev1.PersistentVolumeClaimPhase, created time.Duration) corev1.PersistentVolumeClaim {
	name := fmt.Sprintf("data-%s-%d", fixtureName, i)
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNS, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: ago(created),
			Labels: map[string]string{v1.LabelFleetUID: fixtureUID}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
}

func fixtureEvent(typ, reason, regarding, related, note string, at time.Duration) Event {
	return Event{Type: typ, Reason: reason, Regarding: regarding, Related: related, Note: note, Last: ago(at)}
}

func fixturePreview() v1.CelldPreview {
	return v1.CelldPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNS, Name: "pr-481"},
		Spec:       v1.CelldPreviewSpec{FleetRef: v1.PreviewFleetRef{Name: fixtureName}, TTLSeconds: 86400},
		Status: v1.CelldPreviewStatus{Phase: v1.PreviewReady, FleetName: "pv-3f2a9c", URL: "https://pv-3f2a9c.preview.example.com",
			ExpiresAt:  new(metav1.NewTime(now.Add(20 * time.Hour))),
			Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonPreviewReady}}},
	}
}

// provisioned is the snapshot of a settled fleet: every member Ready on its disk, one
// replacement 20 minutes ago, one preview.
func provisioned() *Snapshot {
	f := fixtureFleet()
	f.Spec.Previews = &v1.FleetPreviewsSpec{}
	s := &Snapshot{
		Fleet: f, StatefulSet: fixtureStatefulSet(3, "pf-6d5b", "pf-6d5b"), Zones: fixtureZones(),
		Reservation: fixtureReservation(f), Previews: []v1.CelldPreview{fixturePreview()},
	}
	for i := range 3 {
		s.Pods = append(s.Pods, fixturePod(i, "pf-6d5b", time.Hour))
		s.Claims = append(s.Claims, fixtureClaim(i, corev1.ClaimBound, 3*time.Hour))
	}
	s.Claims[1].CreationTimestamp = ago(20 * time.Minute) // replaced
	s.Pods[1].Status.StartTime = new(ago(19 * time.Minute))
	s.Events = []Event{
		fixtureEvent("Warning", v1.EventMemberReplaced, "CelldFleet/pf", "Pod/pf-1", "Member pf-1 was down for 10m0s while every other member was Ready; replaced it on a fresh disk", 20*time.Minute),
		fixtureEvent("Normal", v1.ReasonProvisioned, "CelldFleet/pf", "", "No longer blocked: All 3 members are ready", 2*time.Hour),
		fixtureEvent("Normal", v1.EventCapacityScaledOut, "CelldFleet/pf", "", "Added 1 member: 2 -> 3 (ScaleOutRecommended)", 2*time.Hour),
	}
	sortEvents(s.Events)
	return s
}
