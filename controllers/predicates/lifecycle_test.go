package predicates

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func TestLifecycleChanged(t *testing.T) {
	now := metav1.NewTime(time.Now())
	fleet := func(deleting bool, finalizers ...string) *v1.CelldFleet {
		f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Finalizers: finalizers}}
		if deleting {
			f.DeletionTimestamp = &now
		}
		return f
	}
	cases := []struct {
		name     string
		old, new *v1.CelldFleet
		want     bool
	}{
		{"nothing of the lifecycle changed", fleet(false, "a"), fleet(false, "a"), false},
		{"a finalizer added", fleet(false), fleet(false, "a"), true},
		{"a finalizer removed", fleet(true, "a", "b"), fleet(true, "a"), true},
		{"a finalizer replaced by another (same count)", fleet(false, "a"), fleet(false, "b"), true},
		{"deletion started", fleet(false, "a"), fleet(true, "a"), true},
	}
	for _, c := range cases {
		if got := (LifecycleChanged{}).Update(event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}); got != c.want {
			t.Errorf("%s: %t, want %t", c.name, got, c.want)
		}
	}
}
