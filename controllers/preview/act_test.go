package preview

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
)

// TestEveryPreviewWriteLogsOneMutationLine: the preview reconciler's writes are logged as the
// fleet reconciler's are, one "mutation" line each (docs/operations.md), naming the generated
// fleet and the preview: the finalizer, the pool's reservation, the intent, the fleet's
// creation, and the restore of a hand edit. A pass that writes nothing logs none.
func TestEveryPreviewWriteLogsOneMutationLine(t *testing.T) {
	r, _ := newReconciler()
	var lines []string
	ctx := log.IntoContext(context.Background(), logr.Logger(funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})))
	ns := namespace(t)
	createParent(t, ns, "development", ns+"-pool")
	p := createPreview(t, ns, "pr-log", "development", 0)
	pass := func() []string {
		t.Helper()
		lines = nil
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		var got []string
		for _, l := range lines {
			if !strings.Contains(l, `"msg"="mutation"`) {
				continue
			}
			if !strings.Contains(l, `"preview"="pr-log"`) || !strings.Contains(l, `"why"=`) {
				t.Errorf("a preview's mutation line lacks the preview or why: %s", l)
			}
			action, _, _ := strings.Cut(strings.SplitN(l, `"action"="`, 2)[1], `"`)
			object, _, _ := strings.Cut(strings.SplitN(l, `"object"="`, 2)[1], `"`)
			fleet, _, _ := strings.Cut(strings.SplitN(l, `"fleet"="`, 2)[1], `"`)
			got = append(got, action+" "+object+" of "+fleet)
		}
		return got
	}
	var all []string
	for range 3 {
		all = append(all, pass()...)
	}
	fleet := FleetName(get(t, p))
	of := " of " + ns + "/" + fleet
	pool := reservation.Name(ns+"-pool", "")
	for _, want := range []string{
		"add finalizer CelldPreview/pr-log " + v1.FinalizerPreviewProtection + of,
		"reserve CelldStorageReservation/" + pool + of,
		"annotate CelldPreview/pr-log " + v1.AnnotationPreviewFleet + "=" + fleet + of,
		"create CelldFleet/" + fleet + of,
	} {
		if n := count(all, want); n != 1 {
			t.Errorf("%q logged %d times over the creation, want once; lines %v", want, n, all)
		}
	}
	if got := pass(); len(got) != 0 {
		t.Fatalf("a settled preview's pass logged %v", got)
	}

	f := &v1.CelldFleet{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: fleet}, f); err != nil {
		t.Fatal(err)
	}
	f.Spec.Replicas = new(int32(3))
	if err := admin.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got := pass(); !slices.Equal(got, []string{"restore CelldFleet/" + fleet + of}) {
		t.Fatalf("the restore of a hand edit logged %v", got)
	}
}

func count(lines []string, want string) int {
	n := 0
	for _, l := range lines {
		if l == want {
			n++
		}
	}
	return n
}
