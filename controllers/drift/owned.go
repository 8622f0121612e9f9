package drift

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// owned is a map whose entries each belong to a fleet, so everything remembered of a fleet
// that is gone can be dropped at once. The zero value is ready to use; it is safe for
// concurrent reconciles.
type owned[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]ownedEntry[V]
}

type ownedEntry[V any] struct {
	owner types.NamespacedName
	v     V
}

func (o *owned[K, V]) put(k K, owner types.NamespacedName, v V) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[K]ownedEntry[V]{}
	}
	o.m[k] = ownedEntry[V]{owner: owner, v: v}
}

func (o *owned[K, V]) get(k K) (V, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.m[k]
	return e.v, ok
}

func (o *owned[K, V]) drop(k K) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, k)
}

// forget drops every entry of owner.
func (o *owned[K, V]) forget(owner types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, e := range o.m {
		if e.owner == owner {
			delete(o.m, k)
		}
	}
}

func (o *owned[K, V]) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}
