package celldctl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func setReady(f *v1.CelldFleet, status metav1.ConditionStatus, reason, message string, since time.Duration) {
	for i := range f.Status.Conditions {
		switch f.Status.Conditions[i].Type {
		case v1.ConditionReady, v1.ConditionProgressing:
			f.Status.Conditions[i].Reason, f.Status.Conditions[i].Message = reason, message
			f.Status.Conditions[i].LastTransitionTime = ago(since)
			if f.Status.Conditions[i].Type == v1.ConditionReady {
				f.Status.Conditions[i].Status = status
			}
		}
	}
}

func setBlocked(f *v1.CelldFleet, reason, message string, since time.Duration) {
	setReady(f, metav1.ConditionFalse, reason, message, since)
	for i := range f.Status.Conditions {
		if f.Status.Conditions[i].Type == v1.ConditionBlocked {
			f.Status.Conditions[i] = metav1.Condition{Type: v1.ConditionBlocked, Status: metav1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: ago(since)}
		}
	}
	f.Status.BlockedSince = new(ago(since))
}

func pause(s *Snapshot) {
	s.Fleet.Spec.Maintenance.Paused = true
	setBlocked(s.Fleet, v1.ReasonMaintenancePaused, "spec.maintenance.paused is true: the operator writes no workload change and replaces no member; clear it to resume", 5*time.Minute)
	for i := range s.Fleet.Status.Conditions {
		if s.Fleet.Status.Conditions[i].Type == v1.ConditionMaintenancePaused {
			s.Fleet.Status.Conditions[i] = metav1.Condition{Type: v1.ConditionMaintenancePaused, Status: metav1.ConditionTrue, Reason: v1.ReasonMaintenancePaused, LastTransitionTime: ago(5 * time.Minute)}
		}
	}
}

// scenarios are the states docs/lifecycle.md names, each a snapshot the status screen must
// describe.
var scenarios = map[string]func() *Snapshot{
	"provisioned": provisioned,
	"rolling": func() *Snapshot {
		s := provisioned()
		s.Fleet.Spec.Maintenance.RestartToken = "r2"
		s.StatefulSet.Status.UpdateRevision = "pf-7f9c"
		s.Pods[2] = fixturePod(2, "pf-7f9c", time.Minute)
		s.Pods[1] = fixturePod(1, "pf-7f9c", 10*time.Second)
		notReady(&s.Pods[1], "")
		s.Fleet.Status.ReadyReplicas = 2
		setReady(s.Fleet, metav1.ConditionFalse, v1.ReasonProvisioning, "Rolling out revision pf-7f9c: 2 of 3 members updated", time.Minute)
		return s
	},
	"blocked": func() *Snapshot {
		s := provisioned()
		s.Fleet.Spec.Env = append(s.Fleet.Spec.Env, v1.EnvVar{Name: "CELLD_MAX_BODY", Value: new("-1")})
		s.StatefulSet.Status.UpdateRevision = "pf-7f9c"
		s.Pods[2] = fixturePod(2, "pf-7f9c", 12*time.Minute)
		notReady(&s.Pods[2], "CrashLoopBackOff")
		s.Fleet.Status.ReadyReplicas = 2
		setBlocked(s.Fleet, v1.ReasonMemberCrashLooping, "Member pf-2 keeps exiting on revision pf-7f9c, which no Ready member runs: container celld exited with code 2 (invalid CELLD_MAX_BODY); correct the fleet's last change", 12*time.Minute)
		s.Events = append(s.Events, fixtureEvent("Warning", v1.ReasonMemberCrashLooping, "CelldFleet/pf", "", "Member pf-2 keeps exiting on revision pf-7f9c", 12*time.Minute),
			fixtureEvent("Warning", "BackOff", "Pod/pf-2", "", "Back-off restarting failed container celld", 30*time.Second))
		sortEvents(s.Events)
		return s
	},
	"paused": func() *Snapshot {
		s := provisioned()
		pause(s)
		return s
	},
	"stopped": func() *Snapshot {
		s := provisioned()
		pause(s)
		s.StatefulSet.Spec.Replicas = new(int32(0))
		s.Pods = nil
		s.Fleet.Status.ReadyReplicas, s.Fleet.Status.ObservedReplicas = 0, 0
		return s
	},
	"healing": func() *Snapshot {
		s := provisioned()
		s.Claims[0].Status.Phase = corev1.ClaimLost
		s.Pods[0].Finalizers = []string{v1.FinalizerReplacingDisk}
		notReady(&s.Pods[0], "")
		s.Fleet.Status.ReadyReplicas = 2
		setReady(s.Fleet, metav1.ConditionFalse, v1.ReasonLifecycleProgress, "Replacing member pf-0 on a fresh disk: its claim data-pf-0 is Lost", 3*time.Second)
		s.Events = append(s.Events, fixtureEvent("Warning", v1.EventMemberDiskLost, "CelldFleet/pf", "Pod/pf-0", "The volume of claim data-pf-0 of member pf-0 no longer exists; replacing the member on a fresh disk", 3*time.Second))
		sortEvents(s.Events)
		return s
	},
	"scaled-in": func() *Snapshot {
		s := provisioned()
		s.Fleet.Spec.Replicas = new(int32(2))
		s.StatefulSet.Spec.Replicas = new(int32(2))
		s.Pods = s.Pods[:2]
		s.Fleet.Status.DesiredReplicas, s.Fleet.Status.AppliedReplicas, s.Fleet.Status.ReadyReplicas = 2, 2, 2
		return s
	},
	"deployment": func() *Snapshot {
		s := provisioned()
		f := s.Fleet
		f.Spec.Profile, f.Spec.BucketWorkload, f.Spec.Storage.StorageClassName = v1.ProfileBucket, v1.BucketWorkloadDeployment, nil
		f.Spec.Routing, f.Spec.Previews, f.Spec.Capacity, f.Status.Capacity = nil, nil, nil, nil
		f.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{}}
		s.Previews, s.Claims, s.StatefulSet = nil, nil, nil
		s.Reservation = fixtureReservation(f)
		delete(s.Reservation.Annotations, v1.AnnotationCurrentOperation)
		s.Deployment = &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNS, Name: fixtureName, Generation: 3},
			Spec:       appsv1.DeploymentSpec{Replicas: new(int32(3))},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1},
		}
		s.ReplicaSets = []appsv1.ReplicaSet{
			{ObjectMeta: metav1.ObjectMeta{Name: "pf-5c8d", Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "5c8d"}, Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "pf-9a1e", Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "9a1e"}, Annotations: map[string]string{"deployment.kubernetes.io/revision": "2"}}},
		}
		names := []string{"pf-5c8d-abcde", "pf-5c8d-fghij", "pf-9a1e-klmno"}
		for i := range s.Pods {
			p := &s.Pods[i]
			p.Name = names[i]
			p.Labels = map[string]string{v1.LabelFleetUID: fixtureUID, appsv1.DefaultDeploymentUniqueLabelKey: names[i][3:7]}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy"})
		}
		s.Fleet.Status.Application.Nodes = nil
		setReady(f, metav1.ConditionFalse, v1.ReasonProvisioning, "Rolling out: 1 of 3 members updated", time.Minute)
		return s
	},
	// What a user with only a RoleBinding to view sees: nodes and the reservation are
	// cluster-scoped and refused.
	"view-role": func() *Snapshot {
		s := provisioned()
		s.Zones, s.Reservation = map[string]string{}, nil
		s.Problems = []Problem{
			{What: "Nodes (members' zones)", Why: `forbidden: nodes "kwok-us-east-1a-0" is forbidden: User "dev" cannot get resource "nodes" in API group "" at the cluster scope` + clusterScopedHint},
			{What: "CelldStorageReservation " + s.Fleet.Status.Reservation, Why: `forbidden: celldstoragereservations.celld.eric.dev is forbidden: User "dev" cannot get resource "celldstoragereservations" in API group "celld.eric.dev" at the cluster scope` + clusterScopedHint},
		}
		return s
	},
}

func TestStatusScreenGolden(t *testing.T) {
	for name, build := range scenarios {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Render(&out, BuildStatus(build(), now)); err != nil {
				t.Fatal(err)
			}
			golden(t, "status-"+name+".golden", out.String())
		})
	}
}

func TestStatusJSONGolden(t *testing.T) {
	st := BuildStatus(scenarios["rolling"](), now)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status-rolling.json", string(b)+"\n")
}

func TestStatesNamedByTheDocs(t *testing.T) {
	want := map[string]string{
		"provisioned": StateProvisioned, "rolling": StateRolling, "blocked": StateBlocked, "paused": StatePaused,
		"stopped": StateStopped, "healing": StateHealing, "scaled-in": StateProvisioned, "deployment": StateRolling,
		"view-role": StateProvisioned,
	}
	for name, build := range scenarios {
		if got := BuildStatus(build(), now).State; got != want[name] {
			t.Errorf("%s: state %s, want %s", name, got, want[name])
		}
	}
}

func TestRolloutNamesTheNextMemberHighestOrdinalFirst(t *testing.T) {
	s := provisioned()
	s.StatefulSet.Status.UpdateRevision = "new"
	s.Pods[2].Labels[appsv1.ControllerRevisionHashLabelKey] = "new"
	r := BuildStatus(s, now).Rollout
	if r == nil || r.Updated != 1 || r.Total != 3 || r.Next != "pf-1" || r.Waiting != "" {
		t.Fatalf("rollout %+v, want 1/3 with pf-1 next", r)
	}
	notReady(&s.Pods[2], "")
	if r := BuildStatus(s, now).Rollout; r.Waiting != "pf-2" {
		t.Fatalf("rollout %+v, want it to wait for pf-2", r)
	}
	s.StatefulSet.Generation = 8 // the controller has not observed a new template yet
	if r := BuildStatus(s, now).Rollout; r == nil || r.Note == "" {
		t.Fatalf("rollout %+v, want a note that the template is not observed", r)
	}
}

func TestLastHealingMatchesTheMemberNotItsPrefix(t *testing.T) {
	events := []Event{fixtureEvent("Warning", v1.EventMemberReplaced, "CelldFleet/pf", "", "Member pf-10 was replaced", time.Minute)}
	if h := lastHealing(events, "pf-1"); h != nil {
		t.Fatalf("pf-1 took pf-10's replacement: %+v", h)
	}
	if h := lastHealing(events, "pf-10"); h == nil || h.Reason != v1.EventMemberReplaced {
		t.Fatalf("pf-10's replacement not found: %+v", h)
	}
}

func TestNormalizeMakesEveryAgeZero(t *testing.T) {
	st := BuildStatus(scenarios["blocked"](), now)
	st.Normalize()
	var out bytes.Buffer
	if err := Render(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, stale := range []string{"12m", "20m", "3h", "40m"} {
		if strings.Contains(out.String(), stale) {
			t.Errorf("normalized screen still shows the age %s:\n%s", stale, out.String())
		}
	}
	if !strings.Contains(out.String(), "for 0s, since 2026-01-01T00:00:00Z") {
		t.Errorf("normalized Blocked line missing:\n%s", out.String())
	}
}
