package children

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Action is what one step of the children's plan does to one child.
type Action string

const (
	// ActionCreate: the cache holds nothing at the child's name. The create (POST) lets the
	// API server arbitrate the name: a foreign object there answers AlreadyExists, is read and
	// refused when the step runs.
	ActionCreate Action = "create"
	// ActionConverge: the child is the fleet's own. It is compared with its rendering
	// (drift.Detector, a request only for a pair of contents not verified before) and
	// restored by an update when it drifted.
	ActionConverge Action = "converge"
	// ActionPrune: a child of a prunable chart kind that carries the fleet's label, is
	// controlled by nothing else, and is no longer rendered. It is deleted with UID and
	// resourceVersion preconditions, so a replaced or changed object survives.
	ActionPrune Action = "prune"
)

// Step is one typed action of the plan.
type Step struct {
	Action Action
	// Want is the rendering (create, converge); Live the object read (converge, prune).
	Want, Live *unstructured.Unstructured
}

// Object names the step's child as "Kind/name".
func (s Step) Object() string {
	o := s.Want
	if o == nil {
		o = s.Live
	}
	return o.GetKind() + "/" + o.GetName()
}

// Refusal is a foreign object at the name of a child the chart renders: the fleet does not own
// it (Foreign says why), so nothing is written and the fleet is blocked naming it.
type Refusal struct {
	Want, Live *unstructured.Unstructured
	Why        string
}

// Plan is the decision about the fleet's core children: every rendered child but the route and
// its policy, which follow the routing order, and the owned children the chart no longer
// renders.
type Plan struct {
	// Refused, when set, is the first foreign object in rendering order; Steps is then empty.
	Refused *Refusal
	// Steps are the creates and converges in rendering order, then the prunes in the order
	// the owned children were listed. Creates and converges do not depend on each other and
	// run concurrently; prunes run after the routing order.
	Steps []Step
}

// PlanChildren decides the core children's steps from what was read: core, the rendered core
// children; lives, what the cache holds at each one's name (parallel to core, nil for none);
// owned, the fleet's children of the prunable kinds (listed by its UID label, those another
// controller claims left out). It is a pure function: the same reads give the same plan.
func PlanChildren(f *v1.CelldFleet, core, lives, owned []*unstructured.Unstructured) Plan {
	for i, want := range core {
		if live := lives[i]; live != nil {
			if why := Foreign(live, f); why != "" {
				return Plan{Refused: &Refusal{Want: want, Live: live, Why: why}}
			}
		}
	}
	type key struct {
		gvk  schema.GroupVersionKind
		name string
	}
	rendered := map[key]bool{{gvkNetworkPolicy, routingName(f)}: true} // the routing order owns it
	var p Plan
	for i, want := range core {
		rendered[key{want.GroupVersionKind(), want.GetName()}] = true
		step := Step{Action: ActionCreate, Want: want}
		if lives[i] != nil {
			step = Step{Action: ActionConverge, Want: want, Live: lives[i]}
		}
		p.Steps = append(p.Steps, step)
	}
	for _, o := range owned {
		if rendered[key{o.GroupVersionKind(), o.GetName()}] || o.GetDeletionTimestamp() != nil {
			continue
		}
		p.Steps = append(p.Steps, Step{Action: ActionPrune, Live: o})
	}
	return p
}

// writes are the plan's create and converge steps; prunes its prune steps.
func (p Plan) writes() []Step { return p.only(ActionCreate, ActionConverge) }
func (p Plan) prunes() []Step { return p.only(ActionPrune) }

func (p Plan) only(actions ...Action) []Step {
	var out []Step
	for _, s := range p.Steps {
		for _, a := range actions {
			if s.Action == a {
				out = append(out, s)
			}
		}
	}
	return out
}
