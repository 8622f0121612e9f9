package upgradeable

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// EnvConditionName is where OLM passes the name of the operator's OperatorCondition.
const EnvConditionName = "OPERATOR_CONDITION_NAME"

// DefaultInterval is how often held Pods are looked for without a fleet event.
const DefaultInterval = 10 * time.Second

// PodReaders are the fleet namespaces' caches (nscache.Set): the namespaces that have one, and
// a reader of each.
type PodReaders interface {
	Namespaces() []string
	Reader(ctx context.Context, ns string) (client.Reader, error)
}

// Options configure Add.
type Options struct {
	// Pods finds member Pods held by a replacement handoff; nil looks at fleet conditions only.
	Pods PodReaders
	// Interval between evaluations without a fleet event; zero is DefaultInterval.
	Interval time.Duration
	// Factory builds the Upgradeable condition; nil is operator-lib's InClusterFactory over a
	// client that reads the OperatorCondition from the API server (OLM grants get, update and
	// patch on that one object, not list or watch, so it cannot be cached).
	Factory conditions.Factory
}

// Add registers the Upgradeable runnable with mgr when the operator runs under OLM (the
// OPERATOR_CONDITION_NAME environment variable is set); otherwise it adds nothing and returns
// false.
func Add(mgr manager.Manager, o Options) (bool, error) {
	name := os.Getenv(EnvConditionName)
	if name == "" {
		return false, nil
	}
	f := o.Factory
	if f == nil {
		scheme := runtime.NewScheme()
		if err := apiv2.AddToScheme(scheme); err != nil {
			return false, err
		}
		c, err := client.New(mgr.GetConfig(), client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return false, fmt.Errorf("OperatorCondition client: %w", err)
		}
		f = conditions.InClusterFactory{Client: c}
	}
	key, err := f.GetNamespacedName()
	if err != nil {
		return false, fmt.Errorf("%s is %q but the OperatorCondition cannot be located: %w", EnvConditionName, name, err)
	}
	cond, err := f.NewCondition(apiv2.ConditionType(apiv2.Upgradeable))
	if err != nil {
		return false, fmt.Errorf("OperatorCondition %s: %w", key, err)
	}
	interval := o.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	r := &Runnable{Cache: mgr.GetCache(), Pods: o.Pods, Condition: cond, Interval: interval,
		Log: mgr.GetLogger().WithName("upgradeable").WithValues("operatorCondition", key.String())}
	return true, mgr.Add(r)
}

// Runnable keeps the Upgradeable condition in step with the fleets. Only the leader runs it.
type Runnable struct {
	Cache     cache.Cache
	Pods      PodReaders
	Condition conditions.Condition
	Interval  time.Duration
	Log       logr.Logger

	written *Verdict // what the condition states, as last read or written
}

// NeedLeaderElection: one writer, the replica that also runs the fleet controller.
func (r *Runnable) NeedLeaderElection() bool { return true }

// Start evaluates now, on every CelldFleet event and every Interval, until ctx ends.
func (r *Runnable) Start(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	inf, err := r.Cache.GetInformer(ctx, &v1.CelldFleet{})
	if err != nil {
		return fmt.Errorf("CelldFleet informer: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke,
	})
	if err != nil {
		return err
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	if !r.Cache.WaitForCacheSync(ctx) {
		return nil // stopping
	}
	tick := time.NewTicker(r.Interval)
	defer tick.Stop()
	for {
		if err := r.Sync(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error(err, "cannot update the Upgradeable condition; retrying", "in", r.Interval.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-tick.C:
		}
	}
}

// Sync decides once and writes the condition if it states something else.
func (r *Runnable) Sync(ctx context.Context) error {
	v, err := r.decide(ctx)
	if err != nil {
		return err
	}
	if r.written != nil && *r.written == v {
		return nil
	}
	// The condition may have been written by an earlier leader, or reset by OLM; read it
	// before writing so that an unchanged verdict costs no update.
	if cur, err := r.Condition.Get(ctx); err == nil && v.Same(cur) {
		r.written = &v
		return nil
	}
	r.written = nil
	if err := r.Condition.Set(ctx, v.Status, conditions.WithReason(v.Reason), conditions.WithMessage(v.Message)); err != nil {
		return err
	}
	r.written = &v
	r.Log.Info("Upgradeable condition set", "status", v.Status, "reason", v.Reason, "message", v.Message)
	return nil
}

func (r *Runnable) decide(ctx context.Context) (Verdict, error) {
	var fleets v1.CelldFleetList
	if err := r.Cache.List(ctx, &fleets); err != nil {
		return Verdict{}, fmt.Errorf("list CelldFleets: %w", err)
	}
	held := map[types.UID]bool{}
	if r.Pods != nil {
		for _, ns := range r.Pods.Namespaces() {
			rd, err := r.Pods.Reader(ctx, ns)
			if err != nil {
				// The fleet there reports NamespaceAccessDenied; the operator can hand nothing
				// over in that namespace.
				r.Log.V(1).Info("cannot read Pods; not counted", "namespace", ns, "error", err.Error())
				continue
			}
			var pods corev1.PodList
			if err := rd.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{v1.LabelReplacementFleet}); err != nil {
				r.Log.V(1).Info("cannot list held Pods; not counted", "namespace", ns, "error", err.Error())
				continue
			}
			for _, p := range pods.Items {
				held[types.UID(p.Labels[v1.LabelReplacementFleet])] = true
			}
		}
	}
	return Decide(Blockers(fleets.Items, held)), nil
}
