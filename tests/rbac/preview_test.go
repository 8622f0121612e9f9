package rbac

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/preview"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// drivePreview follows a CelldPreview with op as the only operator: a parent with
// spec.previews, a preview whose generated fleet becomes Ready, a hand edit of that fleet the
// operator restores, and the preview's deletion, which waits for the fleet. Every write the
// preview controller makes is requested here.
func drivePreview(ctx context.Context, t *testing.T, op *operator, ns string) {
	t.Helper()
	fleetNamespace(ctx, t, ns)
	parent := corpus.Bucket()
	parent.Namespace, parent.Name = ns, "pv-parent"
	parent.Spec.Replicas = new(int32(1))
	parent.Spec.Storage.Bucket = "rbac-pv-parent-" + ns
	parent.Spec.Placement = v1.PlacementSpec{Zones: []string{"us-east-1a"}, AZCount: 1}
	parent.Spec.Lifecycle = &v1.LifecycleSpec{ShutdownSeconds: 2, TerminationGraceSeconds: 10}
	parent.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "rbac-pv-" + ns}}
	if err := admin.Create(ctx, parent); err != nil {
		t.Fatalf("create the parent: %v", err)
	}
	t.Cleanup(func() { removeFleet(t, client.ObjectKeyFromObject(parent)) })
	p := &v1.CelldPreview{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pr-1"},
		Spec: v1.CelldPreviewSpec{FleetRef: v1.PreviewFleetRef{Name: parent.Name}}}
	if err := admin.Create(ctx, p); err != nil {
		t.Fatalf("create the preview: %v", err)
	}
	key := client.ObjectKeyFromObject(p)
	child := types.NamespacedName{Namespace: ns, Name: preview.FleetName(p)}
	t.Cleanup(func() { removeFleet(t, child) })
	diag := func(ctx context.Context) string { return describeNamespace(ctx, child) }
	start := time.Now()
	op.poll(ctx, t, 120*time.Second, "the preview becomes Ready", func(ctx context.Context) (bool, error) {
		live := &v1.CelldPreview{}
		if err := admin.Get(ctx, key, live); err != nil {
			return false, err
		}
		if live.Status.Phase != v1.PreviewReady {
			return false, fmt.Errorf("phase %q: %+v", live.Status.Phase, live.Status.Conditions)
		}
		return true, nil
	}, diag)
	t.Logf("%s: preview Ready after %s", ns, time.Since(start).Round(100*time.Millisecond))

	edit := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))
	if err := admin.Patch(ctx, &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: child.Name}}, edit); err != nil {
		t.Fatalf("edit the generated fleet: %v", err)
	}
	op.poll(ctx, t, 30*time.Second, "the hand edit of the generated fleet is restored", func(ctx context.Context) (bool, error) {
		f := &v1.CelldFleet{}
		if err := admin.Get(ctx, child, f); err != nil {
			return false, err
		}
		return f.Spec.Replicas != nil && *f.Spec.Replicas == 1, nil
	}, diag)

	if err := admin.Delete(ctx, &v1.CelldPreview{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name}}); err != nil {
		t.Fatalf("delete the preview: %v", err)
	}
	op.poll(ctx, t, 90*time.Second, "the preview and its fleet are deleted", func(ctx context.Context) (bool, error) {
		for _, obj := range []struct {
			key types.NamespacedName
			o   client.Object
		}{{key, &v1.CelldPreview{}}, {child, &v1.CelldFleet{}}} {
			if err := admin.Get(ctx, obj.key, obj.o); !apierrors.IsNotFound(err) {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	}, diag)
	if err := admin.Delete(ctx, parent); err != nil {
		t.Fatalf("delete the parent: %v", err)
	}
	op.poll(ctx, t, 60*time.Second, "the parent is deleted", func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(parent), &v1.CelldFleet{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, diag)
}
