package fleet

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/controllers/watches"
)

// TestWatchesYAMLSettingsAreHonoured: reconcilePeriod, maxConcurrentReconciles and
// watchDependentResources of the CelldFleet watch reach the controller, and a flag overrides
// them.
func TestWatchesYAMLSettingsAreHonoured(t *testing.T) {
	watch := watches.Watch{ReconcilePeriod: &metav1.Duration{Duration: 3 * time.Minute}, MaxConcurrentReconciles: 7, WatchDependentResources: new(false)}
	for _, c := range []struct {
		name    string
		flags   func(*Options)
		w       watches.Watch
		resync  time.Duration
		workers int
		watch   bool
		waiting time.Duration
	}{
		{"defaults", func(*Options) {}, watches.Watch{}, DefaultResyncPeriod, DefaultMaxConcurrentReconciles, true, 30 * time.Second},
		{"watches.yaml", func(*Options) {}, watch, 3 * time.Minute, 7, false, 30 * time.Second},
		{"flags override watches.yaml", func(o *Options) { o.RequeuePeriod, o.MaxConcurrentReconciles = time.Hour, 2 }, watch, time.Hour, 2, false, 30 * time.Second},
		{"the waiting period never exceeds the resync", func(o *Options) { o.RequeuePeriod = 10 * time.Second }, watches.Watch{}, 10 * time.Second, DefaultMaxConcurrentReconciles, true, 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultOptions()
			c.flags(&o)
			got := o.withWatch(c.w)
			if got.RequeuePeriod != c.resync || got.MaxConcurrentReconciles != c.workers || got.WatchDependentResources != c.watch || got.WaitingRequeue != c.waiting {
				t.Fatalf("got resync %s, workers %d, watch %v, waiting %s; want %s, %d, %v, %s",
					got.RequeuePeriod, got.MaxConcurrentReconciles, got.WatchDependentResources, got.WaitingRequeue, c.resync, c.workers, c.watch, c.waiting)
			}
		})
	}
}
