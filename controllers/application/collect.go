package application

import (
	"context"
	"sync"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// closingTimeout bounds the closing inventory, which runs after the collection deadline may
// already have passed.
const closingTimeout = 5 * time.Second

// Observe collects one observation of a fleet (reference §2 steps 2–8) and aggregates it. An
// error means an API read failed and nothing should be published.
func (o *Observer) Observe(ctx context.Context, live *v1.CelldFleet) (Result, error) {
	f := live.DeepCopy()
	f.Default()
	facts := Facts{Generation: live.Generation, MaxAge: o.opts.MaxAge}
	switch {
	case live.DeletionTimestamp != nil:
		facts.Verdict = v1.ReasonFleetDeleting
	case len(f.Validate()) != 0:
		facts.Verdict = v1.ReasonInvalidConfiguration
	}
	if facts.Verdict != "" {
		facts.Now = o.opts.Now()
		return Aggregate(facts), nil
	}

	members, err := o.members(ctx, f.Namespace)
	if err != nil {
		return Result{}, err
	}
	opening, err := takeInventory(ctx, members, f)
	if err != nil {
		return Result{}, err
	}
	facts.Expected = max(opening.workload.replicas, live.Status.DesiredReplicas)
	if opening.verdict != "" {
		o.log.V(1).Info("membership not observable", "fleet", live.Namespace+"/"+live.Name, "why", opening.detail)
		facts.Verdict, facts.Now = opening.verdict, o.opts.Now()
		r := Aggregate(facts)
		if o.opts.Capacity != nil && f.Spec.Capacity != nil {
			r.Capacity = capacityObservation(facts.Now, opening, nil, podMetrics{}, false)
		}
		return r, nil
	}

	metrics := o.listPodMetrics(ctx, f)
	facts.Members = o.sample(ctx, opening.members)
	var pm podMetrics
	if metrics != nil {
		pm = <-metrics
		o.metricsProblem(live, pm.err)
	}

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closingTimeout)
	defer cancel()
	closing, err := takeInventory(cctx, members, f)
	if err != nil {
		return Result{}, err
	}
	facts.MembershipChanged = !opening.sameAs(closing)
	facts.Now = o.opts.Now()
	r := Aggregate(facts)
	if metrics != nil {
		r.Capacity = capacityObservation(facts.Now, opening, facts.Members, pm, !facts.MembershipChanged)
	}
	return r, nil
}

// metricsProblem logs a failed Metrics API read of a fleet when it starts or changes, and its
// end: a cluster without metrics-server would otherwise log every sample interval. The fleet's
// status.capacity says IncompleteMetrics and what to fix.
func (o *Observer) metricsProblem(f *v1.CelldFleet, err error) {
	text := ""
	if err != nil {
		text = err.Error()
	}
	o.mu.Lock()
	before := o.metricsErr[f.UID]
	if text == "" {
		delete(o.metricsErr, f.UID)
	} else {
		o.metricsErr[f.UID] = text
	}
	o.mu.Unlock()
	switch {
	case text != "" && text != before:
		o.log.Info("the Metrics API gave no PodMetrics for a capacity fleet; its members have no resource samples",
			"fleet", f.Namespace+"/"+f.Name, "error", text)
	case text == "" && before != "":
		o.log.Info("the Metrics API answers again for a capacity fleet", "fleet", f.Namespace+"/"+f.Name)
	}
}

// sample reads the members in name order with Options.Workers readers under the collection
// deadline. Members that are not ready, run no container, have no IP or are deleting are not
// read: their answer would not count anyway, and a starting celld hangs until the call timeout.
func (o *Observer) sample(ctx context.Context, members []member) []Member {
	out := make([]Member, len(members))
	for i, m := range members {
		out[i] = Member{Name: m.name, UID: m.uid, Ready: m.ready, Identity: m.identity, IP: m.ip,
			Deleting: m.deleting, Started: m.started}
	}
	ctx, cancel := context.WithTimeout(ctx, o.opts.Deadline)
	defer cancel()
	next := make(chan *Member)
	var wg sync.WaitGroup
	for range min(o.opts.Workers, len(out)) {
		wg.Go(func() {
			for m := range next {
				if ctx.Err() != nil {
					continue // past the deadline: Read stays false, the member is Unavailable
				}
				m.Read = true
				m.Reading, m.Err = o.opts.Reader.ReadState(ctx, m.IP)
			}
		})
	}
	for i := range out {
		if m := &out[i]; m.Ready && m.Identity != "" && m.IP != "" && !m.Deleting {
			next <- m
		}
	}
	close(next)
	wg.Wait()
	return out
}
