package drift

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// AnswerTTL is how long the answer to a creation stands in for a cache that has not delivered
// the object yet. Past it, an object the cache still lacks is looked up in the API server
// again (it may have been deleted since).
const AnswerTTL = 10 * time.Second

// Answers remembers the API server's answers to the objects the operator created, until the
// cache the operator reads shows them. The pass right after a creation usually runs before
// the cache has the new object (the fleet's own status write wakes it); without this memory
// it would ask the API server what it has just been told. The zero value is ready to use and
// a nil Answers remembers nothing; it is safe for concurrent reconciles.
type Answers struct {
	answers owned[answerKey, answer]
}

type answerKey struct{ kind, namespace, name string }

type answer struct {
	obj client.Object
	at  time.Time
}

// Remember records obj, the answer to the creation of a kind object for the fleet owner, at
// now.
func (a *Answers) Remember(owner types.NamespacedName, kind string, obj client.Object, now time.Time) {
	if a == nil {
		return
	}
	a.answers.put(answerKey{kind, obj.GetNamespace(), obj.GetName()}, owner, answer{obj: obj.DeepCopyObject().(client.Object), at: now})
}

// Recent returns a copy of the kind object at namespace/name as created, when it was created
// within AnswerTTL before now for the fleet whose UID is fleet (its fleet-UID label); nil
// otherwise.
func (a *Answers) Recent(kind, namespace, name string, fleet types.UID, now time.Time) client.Object {
	if a == nil || fleet == "" {
		return nil
	}
	e, ok := a.answers.get(answerKey{kind, namespace, name})
	if !ok || now.Sub(e.at) > AnswerTTL || now.Before(e.at) || e.obj.GetLabels()[v1.LabelFleetUID] != string(fleet) {
		return nil
	}
	return e.obj.DeepCopyObject().(client.Object)
}

// Seen drops the answer for the kind object at namespace/name: the cache holds it now.
func (a *Answers) Seen(kind, namespace, name string) {
	if a != nil {
		a.answers.drop(answerKey{kind, namespace, name})
	}
}

// Forget drops every answer remembered for owner (a fleet that is gone).
func (a *Answers) Forget(owner types.NamespacedName) {
	if a != nil {
		a.answers.forget(owner)
	}
}

// Len is the number of answers remembered, for tests.
func (a *Answers) Len() int {
	if a == nil {
		return 0
	}
	return a.answers.len()
}
