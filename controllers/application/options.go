package application

import (
	"context"
	"time"

	"github.com/celld/celld-operator/controllers/celld"
)

// Limits of the observation (reference-operator.md §1.17). They bound the load the operator puts
// on members and the size of what it publishes, so they are not flags.
const (
	// MaxMembers is the largest membership observed: status holds at most 100 node diagnostics,
	// and fleets are limited to 100 replicas, so more Pods mean something foreign is labelled.
	MaxMembers = 100
	// MaxVersions bounds status.application.versions.
	MaxVersions = 100
	// FieldManager owns status.application and ApplicationConverged. It differs from the fleet
	// reconciler's manager so that neither apply removes the other's fields.
	FieldManager = "celld-operator-observer"
	// Message is the fixed ApplicationConverged message (reference-operator.md §2 step 11).
	Message = "Application convergence describes observed node agreement and resident-cell generations, not adoption of the latest published release; inspect status.application for coverage"
)

// StateReader reads one member's /state; *celld.Client is the production one.
type StateReader interface {
	ReadState(ctx context.Context, podIP string) (celld.Reading, error)
}

// Options tune the observer. Zero fields take the production value of DefaultOptions.
type Options struct {
	// Interval is the least time between two observations of one fleet whose generation did
	// not change (15 s): reading /state costs every member a snapshot of its actor census.
	Interval time.Duration
	// Workers is how many members are read at once (8).
	Workers int
	// Deadline bounds one fleet's collection (10 s); members not read by then are Unavailable.
	Deadline time.Duration
	// MaxAge is how old a reading may be when the collection finishes (90 s).
	MaxAge time.Duration
	// Refresh is the longest time an unchanged observation goes without being written again
	// (5 min). Writing every collection would rewrite every settled fleet every Interval only to
	// move observedAt; refreshing it this often keeps observedAt usable as a liveness signal.
	Refresh time.Duration
	// Pace is the least time between two writes of one fleet's observation when the second
	// changes only its details (counts, versions list, nodes) under the same verdict (1 min):
	// a verdict that changes is written at once. It is at most Refresh in effect. A fleet
	// without a capacity policy whose members are not all Ready is also collected once per
	// Pace instead of once per Interval (sampleInterval).
	Pace time.Duration
	// Scan is how often the fleet list is walked for due fleets (1 s).
	Scan time.Duration
	// Fleets is how many fleets are observed at once (4), so one fleet with hung members does
	// not delay the others by a whole deadline.
	Fleets int
	// Reader reads /state; nil uses celld.NewClient().
	Reader StateReader
	// Capacity receives the capacity observation of every collection of a fleet with
	// spec.capacity; nil collects none. Such a fleet is collected at least every
	// sampleIntervalSeconds, and each collection also lists its PodMetrics through Metrics.
	Capacity CapacitySink
	// Metrics reads the Metrics API; nil gives every member of a capacity fleet no sample.
	Metrics PodMetricsLister
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// DefaultOptions are the production values.
func DefaultOptions() Options {
	return Options{
		Interval: 15 * time.Second,
		Workers:  8,
		Deadline: 10 * time.Second,
		MaxAge:   90 * time.Second,
		Refresh:  5 * time.Minute,
		Pace:     time.Minute,
		Scan:     time.Second,
		Fleets:   4,
	}
}

// withDefaults fills zero (or negative) fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	o.Interval = positiveOr(o.Interval, d.Interval)
	o.Workers = positiveOr(o.Workers, d.Workers)
	o.Deadline = positiveOr(o.Deadline, d.Deadline)
	o.MaxAge = positiveOr(o.MaxAge, d.MaxAge)
	o.Refresh = positiveOr(o.Refresh, d.Refresh)
	o.Pace = positiveOr(o.Pace, d.Pace)
	o.Scan = positiveOr(o.Scan, d.Scan)
	o.Fleets = positiveOr(o.Fleets, d.Fleets)
	if o.Reader == nil {
		o.Reader = celld.NewClient()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// positiveOr is v when it is positive, else def.
func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
