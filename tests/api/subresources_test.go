package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

func createFleet(t *testing.T, name string) *v1.CelldFleet {
	t.Helper()
	f := corpus.Persistent()
	f.Namespace, f.Name = namespace(t), name
	if err := k8s.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestScaleSubresourceWritesSpecReplicasAndReadsStatus is what `kubectl scale` and an HPA do.
func TestScaleSubresourceWritesSpecReplicasAndReadsStatus(t *testing.T) {
	ctx := context.Background()
	f := createFleet(t, "scaled")
	f.Status.Replicas, f.Status.LabelSelector = 3, v1.LabelFleetUID+"="+string(f.UID)
	if err := k8s.Status().Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{}
	if err := k8s.SubResource("scale").Get(ctx, f, scale); err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 3 || scale.Status.Replicas != 3 || scale.Status.Selector != f.Status.LabelSelector {
		t.Fatalf("/scale must read spec.replicas, status.replicas and status.labelSelector, got %+v", scale)
	}
	scale.Spec.Replicas = 6
	if err := k8s.SubResource("scale").Update(ctx, f, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(f), f); err != nil {
		t.Fatal(err)
	}
	if *f.Spec.Replicas != 6 {
		t.Fatalf("a /scale write must change spec.replicas, got %d", *f.Spec.Replicas)
	}
	scale.Spec.Replicas = 2 // below azCount: /scale passes the same admission rules
	if err := k8s.SubResource("scale").Update(ctx, f, client.WithSubResourceBody(scale)); err == nil || !strings.Contains(err.Error(), v1.MsgReplicasBelowAZCount) {
		t.Fatalf("a /scale write below azCount must be refused with the CEL message, got %v", err)
	}
}

// TestStatusIsOnlyWritableThroughTheSubresource: status edits through the main resource are
// dropped, so a user editing status authorizes nothing.
func TestStatusIsOnlyWritableThroughTheSubresource(t *testing.T) {
	ctx := context.Background()
	f := createFleet(t, "status")
	f.Status.ReadyReplicas = 3
	if err := k8s.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(f), f); err != nil {
		t.Fatal(err)
	}
	if f.Status.ReadyReplicas != 0 {
		t.Fatal("status written through the main resource must be ignored")
	}
	f.Status.ReadyReplicas = 3
	if err := k8s.Status().Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(f), f); err != nil || f.Status.ReadyReplicas != 3 {
		t.Fatalf("status must be writable through /status: %v %d", err, f.Status.ReadyReplicas)
	}
}

// TestPrinterColumnsRender asks the server for the table kubectl get prints; -o wide adds the
// columns of priority 1 (the image, the zones and the application version).
func TestPrinterColumnsRender(t *testing.T) {
	ctx := context.Background()
	f := createFleet(t, "printed")
	f.Status.DesiredReplicas, f.Status.ReadyReplicas = 3, 2
	f.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonProvisioning, Message: "m", LastTransitionTime: metav1.Now()}}
	f.Status.Application = &v1.ApplicationStatus{ObservedVersion: &v1.ApplicationVersion{Version: "2024.06.1", Prefix: "apps/shop/"}}
	if err := k8s.Status().Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(restCfg)
	raw, err := cs.RESTClient().Get().AbsPath("/apis/celld.eric.dev/v1alpha1/namespaces", f.Namespace, "celldfleets", f.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var names, wide []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
		if c.Priority > 0 {
			wide = append(wide, c.Name)
		}
	}
	if got := strings.Join(names, ","); got != "Name,Profile,Desired,Ready,Reason,Age,Image,Zones,App-Version" {
		t.Fatalf("printer columns: got %s", got)
	}
	if got := strings.Join(wide, ","); got != "Image,Zones,App-Version" {
		t.Fatalf("the columns only -o wide prints (priority 1) must be Image, Zones and App-Version, got %s", got)
	}
	row := table.Rows[0].Cells
	if row[1] != "PersistentFleet" || row[2] != float64(3) || row[3] != float64(2) || row[4] != v1.ReasonProvisioning {
		t.Fatalf("printer column values: got %v", row)
	}
	if row[6] != corpus.Image || row[8] != "2024.06.1" {
		t.Fatalf("-o wide must print the image and the application version, got %v", row[6:])
	}
	for _, z := range f.Spec.Placement.Zones {
		if s, _ := row[7].(string); !strings.Contains(s, z) {
			t.Fatalf("-o wide must print every zone, got %v", row[7])
		}
	}
}

func TestReservationSpecIsImmutable(t *testing.T) {
	ctx := context.Background()
	r := &v1.CelldStorageReservation{
		ObjectMeta: metav1.ObjectMeta{Name: "s3-test-immutable"},
		Spec: v1.CelldStorageReservationSpec{Bucket: "b-1", InitialReplicas: 3, FleetNamespace: "ns",
			FleetName: "f", FleetUID: "uid-1", SpecHash: "h"},
	}
	if err := k8s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.Spec.FleetUID = "uid-2"
	err := k8s.Update(ctx, r)
	if err == nil || !strings.Contains(err.Error(), v1.MsgReservationImmutable) {
		t.Fatalf("a reservation must never change hands, got %v", err)
	}
	// The rule compares the whole spec, so it names spec, as forbidden.
	expectCause(t, "reservation spec", err, field.ErrorList{field.Forbidden(field.NewPath("spec"), v1.MsgReservationImmutable)}, v1.MsgReservationImmutable, "spec")
}
