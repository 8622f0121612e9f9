package application

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Observer is the leader-only runnable that observes every fleet's members.
type Observer struct {
	// Fleets lists and reads CelldFleets; the manager's cache is fine, since a fleet read a
	// second late only delays an observation.
	Fleets client.Reader
	// Members reads a namespace's workloads, ReplicaSets and Pods: the fleet reconciler's
	// namespace caches in production, so observing costs the API server no request. The
	// opening and closing inventories are two reads of the informers' state; a change between
	// them arrives as a watch event within milliseconds, much sooner than the members' /state
	// answers, so the comparison still sees membership change during a collection.
	Members Readers
	// Direct reads them when Members is nil (tests).
	Direct client.Reader
	// Status applies status.application and ApplicationConverged; it is the only writer.
	Status client.SubResourceWriter

	opts    Options
	log     logr.Logger
	metrics *metrics

	mu       sync.Mutex
	last     map[types.UID]observed
	inflight map[types.UID]bool
	// metricsErr is the last Metrics API error of each capacity fleet, logged on change.
	metricsErr map[types.UID]string
	// started, a test hook, is told each fleet a scan starts to observe, in order.
	started func(types.UID)
}

// Readers give the reader of one namespace's fleet children.
type Readers interface {
	Reader(ctx context.Context, namespace string) (client.Reader, error)
}

// members is the reader of a namespace's workloads and Pods.
func (o *Observer) members(ctx context.Context, ns string) (client.Reader, error) {
	if o.Members == nil {
		return o.Direct, nil
	}
	return o.Members.Reader(ctx, ns)
}

// observed is when a fleet was last observed and at which generation.
type observed struct {
	at         time.Time
	generation int64
	// namespace and name identify the fleet's metric series once the fleet is gone.
	namespace, name string
}

var (
	_ manager.Runnable               = (*Observer)(nil)
	_ manager.LeaderElectionRunnable = (*Observer)(nil)
)

// Add registers an Observer with the manager. It reads fleets from the manager's cache, each
// fleet's workload and Pods through members (the fleet reconciler's namespace caches) and
// writes status through a cache-less client.
func Add(mgr manager.Manager, o Options, members Readers) error {
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("application observer client: %w", err)
	}
	obs := New(mgr.GetClient(), direct, direct.Status(), o)
	obs.Members = members
	obs.log = mgr.GetLogger().WithName("application") // the manager's logger, like every controller
	obs.metrics = defaultMetrics()
	return mgr.Add(obs)
}

// New builds an Observer; zero Options fields take their production value.
func New(fleets, direct client.Reader, status client.SubResourceWriter, o Options) *Observer {
	return &Observer{Fleets: fleets, Direct: direct, Status: status, opts: o.withDefaults(),
		log: ctrl.Log.WithName("application"), last: map[types.UID]observed{}, inflight: map[types.UID]bool{}, metricsErr: map[types.UID]string{}}
}

// NeedLeaderElection is true: two replicas observing would double the load on members and
// race each other's status.
func (o *Observer) NeedLeaderElection() bool { return true }

// Start scans the fleets every Options.Scan until ctx ends, then waits for the observations in
// flight.
func (o *Observer) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, o.opts.Fleets)
	t := time.NewTicker(o.opts.Scan)
	defer t.Stop()
	for {
		o.scan(ctx, &wg, slots)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// scan starts an observation of every due fleet, the longest-waiting first (a fleet never
// observed before any other), each as soon as one of the slots is free: it returns once every
// due fleet has started, or ctx ended. It used to start only the due fleets that found a slot
// free as the walk reached them, about Options.Fleets a scan: 300 fleets due every 15 s were
// then each observed about every 75 s, and a fleet late in the list could wait for ever
// behind the early ones (docs/performance.md, run 16).
func (o *Observer) scan(ctx context.Context, wg *sync.WaitGroup, slots chan struct{}) {
	// The cache's own objects, not copies: a scan reads every fleet and copies only those it
	// starts to observe (300 fleets every beat would otherwise be 300 copies).
	list := &v1.CelldFleetList{}
	if err := o.Fleets.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		o.log.Error(err, "list CelldFleets")
		return
	}
	now := o.opts.Now()
	o.forgetGone(list.Items)
	type waiting struct {
		f     *v1.CelldFleet
		since time.Time // the last observation; zero for a fleet never observed
	}
	var queue []waiting
	o.mu.Lock()
	for i := range list.Items {
		f := &list.Items[i]
		last, ok := o.last[f.UID]
		if !ok {
			last, ok = published(f)
		}
		if !o.inflight[f.UID] && reported(f) && due(now, o.sampleInterval(f), f, last, ok) {
			queue = append(queue, waiting{f: f, since: last.at})
		}
	}
	o.mu.Unlock()
	slices.SortStableFunc(queue, func(a, b waiting) int { return a.since.Compare(b.since) })
	for _, w := range queue {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		f := w.f.DeepCopy()
		o.mu.Lock()
		o.inflight[f.UID] = true
		o.mu.Unlock()
		if o.started != nil {
			o.started(f.UID)
		}
		wg.Go(func() {
			defer func() { <-slots }()
			o.ObserveFleet(ctx, f)
		})
	}
}

// forgetGone drops the memory of fleets that no longer exist, so it does not grow with every
// fleet ever observed.
func (o *Observer) forgetGone(fleets []v1.CelldFleet) {
	live := make(map[types.UID]bool, len(fleets))
	for i := range fleets {
		live[fleets[i].UID] = true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for uid, last := range o.last {
		if !live[uid] && !o.inflight[uid] {
			o.metrics.forget(last.namespace, last.name)
			delete(o.last, uid)
			delete(o.metricsErr, uid)
		}
	}
}

// reported says whether the fleet reconciler has reported the fleet (its status has a Ready
// condition), or the fleet is being deleted. A new fleet is observed only then: before its
// first pass it has no workload to observe, and publishing WorkloadUnavailable for it would
// be one more status write per fleet, racing the reconciler's first, for a verdict that its
// first pass makes obsolete.
func reported(f *v1.CelldFleet) bool {
	return f.DeletionTimestamp != nil || meta.FindStatusCondition(f.Status.Conditions, v1.ConditionReady) != nil
}

// due says whether a fleet is observed now: no earlier observation, a deleting fleet (whose
// observation reads no member), or Interval passed since the last one. A new generation is
// observed at the next beat, not at once: /state is read at most once every Interval per fleet
// (seed 000), spec changes included.
func due(now time.Time, interval time.Duration, f *v1.CelldFleet, last observed, ok bool) bool {
	return !ok || f.DeletionTimestamp != nil || now.Sub(last.at) >= interval
}

// published is the previous observation as status records it, so a newly elected leader does
// not observe every fleet at once.
func published(f *v1.CelldFleet) (observed, bool) {
	c := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionApplicationConverged)
	if c == nil || f.Status.Application == nil || f.Status.Application.ObservedAt == nil {
		return observed{}, false
	}
	return observed{at: f.Status.Application.ObservedAt.Time, generation: c.ObservedGeneration}, true
}

// ObserveFleet observes one fleet and publishes the result when it changed or is due for a
// refresh. A failed API read publishes nothing: the last observation stays, with its
// observedAt ageing, which is what clients check.
func (o *Observer) ObserveFleet(ctx context.Context, f *v1.CelldFleet) {
	start := o.opts.Now()
	defer func() {
		// The next collection is due an interval after this one finished, not after it
		// started: a capacity policy counts a collection only sampleIntervalSeconds after the
		// last counted one, so collections timed from their starts could fall short of it
		// by the time one took, and every other one would not count.
		end := o.opts.Now()
		o.mu.Lock()
		delete(o.inflight, f.UID)
		o.last[f.UID] = observed{at: end, generation: f.Generation, namespace: f.Namespace, name: f.Name}
		o.mu.Unlock()
	}()
	log := o.log.WithValues("fleet", client.ObjectKeyFromObject(f))
	r, err := o.Observe(ctx, f)
	took := o.opts.Now().Sub(start)
	if err != nil {
		log.Error(err, "observe application", "took", took.String())
		return
	}
	if r.Capacity != nil {
		o.opts.Capacity(client.ObjectKeyFromObject(f), f.UID, r.Capacity)
	}
	o.metrics.record(f, r, took)
	if deferred(f, r, o.opts.Now(), o.opts) {
		return
	}
	if err := o.publish(ctx, f, r); err != nil {
		log.Error(err, "publish application status")
		return
	}
	// transitions at info, refreshes and count changes at debug: a settled fleet stays quiet
	lg := log.V(1)
	if prev := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionApplicationConverged); prev == nil || prev.Reason != r.Reason {
		lg = log
	}
	lg.Info("published application observation", "status", r.Status, "reason", r.Reason,
		"observed", r.Application.ObservedNodes, "expected", r.Application.ExpectedNodes, "unavailable", r.Application.UnavailableNodes,
		"took", took.String())
}
