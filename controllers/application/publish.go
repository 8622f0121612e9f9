package application

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	acv1 "github.com/celld/celld-operator/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/ssa"
)

// deferred says whether publishing r can wait, so the write is skipped:
//   - a result that would only move observedAt waits until the published observedAt is
//     Options.Refresh old, so a settled fleet costs one status write per refresh period
//     instead of one per collection;
//   - a result that changes only the details (counts, the versions list, the nodes) under the
//     same verdict (condition status, reason, message, generation and observedVersion) waits
//     until the published one is Options.Pace old: while members come up or cells swap, each
//     collection moves a count, and writing each would cost a write per collection where the
//     verdict a client waits on has not moved;
//   - anything else (a new verdict, a new generation, a new observedVersion, a fleet never
//     published) is written at once.
func deferred(live *v1.CelldFleet, r Result, now time.Time, o Options) bool {
	app := live.Status.Application
	c := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionApplicationConverged)
	if app == nil || app.ObservedAt == nil || c == nil {
		return false
	}
	age := now.Sub(app.ObservedAt.Time)
	if age >= o.Refresh {
		return false
	}
	if c.Status != r.Status || c.Reason != r.Reason || c.Message != Message || c.ObservedGeneration != r.Generation ||
		!equality.Semantic.DeepEqual(app.ObservedVersion, r.Application.ObservedVersion) {
		return false
	}
	a, b := *app.DeepCopy(), *r.Application.DeepCopy()
	a.ObservedAt, b.ObservedAt = nil, nil
	if equality.Semantic.DeepEqual(a, b) {
		return true
	}
	return age < o.Pace
}

// condition is the ApplicationConverged condition of r; its transition time moves only when
// the status does.
func condition(live *v1.CelldFleet, r Result, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: v1.ConditionApplicationConverged, Status: r.Status, Reason: r.Reason,
		Message: Message, ObservedGeneration: r.Generation, LastTransitionTime: metav1.Time{Time: now.Truncate(time.Second)}}
	if prev := meta.FindStatusCondition(live.Status.Conditions, c.Type); prev != nil && prev.Status == c.Status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}

// applyObject is the server-side apply body: identity, status.application and the one
// condition, nothing else. The fleet reconciler applies the other conditions under its own
// field manager; a field absent here is one this manager gives up, so the body must never
// carry them. The resourceVersion makes the apply conditional on the read it was built from.
func applyObject(live *v1.CelldFleet, r Result, now time.Time) (*acv1.CelldFleetApplyConfiguration, error) {
	app, err := ssa.Into(&r.Application, &acv1.ApplicationStatusApplyConfiguration{})
	if err != nil {
		return nil, err
	}
	cond := condition(live, r, now)
	c, err := ssa.Into(&cond, &metav1ac.ConditionApplyConfiguration{})
	if err != nil {
		return nil, err
	}
	return acv1.CelldFleet(live.Name, live.Namespace).WithResourceVersion(live.ResourceVersion).
		WithStatus(acv1.CelldFleetStatus().WithApplication(app).WithConditions(c)), nil
}

// conflictBackoff spreads retries over about two seconds: the reconciler writes status at most
// once per reconcile, so a few jittered retries always find a quiet moment.
var conflictBackoff = wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 1}

// publish applies r to the fleet's /status with the observer's field manager. It re-reads the
// fleet (from the manager's cache) first and writes only to the fleet it observed: server-side apply ignores a UID in the
// body, so a fleet deleted and recreated under the same name would otherwise receive its
// predecessor's observation. The read's resourceVersion closes the gap between the check and
// the write; a conflict (usually the reconciler's own status write) is retried on a fresh read.
// A fleet that is gone needs no status.
func (o *Observer) publish(ctx context.Context, observed *v1.CelldFleet, r Result) error {
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		live := &v1.CelldFleet{}
		if err := o.Fleets.Get(ctx, client.ObjectKeyFromObject(observed), live); err != nil {
			return err
		}
		if live.UID != observed.UID {
			return apierrors.NewNotFound(v1.GroupVersion.WithResource("celldfleets").GroupResource(), observed.Name)
		}
		cfg, err := applyObject(live, r, o.opts.Now())
		if err != nil {
			return err
		}
		return o.Status.Apply(ctx, cfg, client.FieldOwner(FieldManager), client.ForceOwnership)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("apply status of %s/%s: %w", observed.Namespace, observed.Name, err)
	}
	return nil
}
