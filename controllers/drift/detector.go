package drift

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Detector judges drift and remembers, per live object, the last pair of rendering and live
// content it verified or wrote, so an unchanged pair costs no request. The zero value is ready
// to use and a nil Detector remembers nothing (every Check asks the server); it is safe for
// concurrent reconciles. Entries are grouped by their fleet's key, so a deleted fleet's
// entries can be forgotten.
type Detector struct {
	// clean holds, per live object's UID, the fingerprint of the pair last verified.
	clean owned[types.UID, string]
}

// Check returns the paths in which live differs from want (Merge's result for live) once the
// API server has defaulted and admitted want, or nil when live already is want. It asks the
// server with a dry-run update, which persists nothing, only when this pair of contents was not
// verified before. opts are the options of the real update (its field manager).
func (d *Detector) Check(ctx context.Context, c client.Client, owner types.NamespacedName, live, want client.Object, opts ...client.UpdateOption) ([]string, error) {
	lc, err := Content(live)
	if err != nil {
		return nil, err
	}
	wc, err := Content(want)
	if err != nil {
		return nil, err
	}
	key, err := fingerprint(wc, lc)
	if err != nil {
		return nil, err
	}
	if d.verified(live.GetUID(), key) {
		return nil, nil
	}
	dry := want.DeepCopyObject().(client.Object)
	dry.SetResourceVersion(live.GetResourceVersion())
	if err := c.Update(ctx, dry, append(opts, client.DryRunAll)...); err != nil {
		return nil, fmt.Errorf("dry-run update of %s/%s to compare it with the rendering: %w", live.GetNamespace(), live.GetName(), err)
	}
	dc, err := Content(dry)
	if err != nil {
		return nil, err
	}
	paths := Diff(lc, dc)
	if len(paths) == 0 {
		d.remember(live.GetUID(), owner, key)
	}
	return paths, nil
}

// Written records that stored, the API server's answer to the operator's write of want, is
// the rendering: the next Check of this pair costs nothing.
func (d *Detector) Written(owner types.NamespacedName, want, stored client.Object) {
	wc, err1 := Content(want)
	sc, err2 := Content(stored)
	if err1 != nil || err2 != nil {
		return // the next Check asks the server instead
	}
	if key, err := fingerprint(wc, sc); err == nil {
		d.remember(stored.GetUID(), owner, key)
	}
}

// Forget drops everything remembered for owner's objects (a fleet that is gone).
func (d *Detector) Forget(owner types.NamespacedName) {
	if d != nil {
		d.clean.forget(owner)
	}
}

// Len is the number of objects remembered, for tests and metrics.
func (d *Detector) Len() int {
	if d == nil {
		return 0
	}
	return d.clean.len()
}

func (d *Detector) verified(uid types.UID, key string) bool {
	if d == nil || uid == "" {
		return false
	}
	k, ok := d.clean.get(uid)
	return ok && k == key
}

func (d *Detector) remember(uid types.UID, owner types.NamespacedName, key string) {
	if d == nil || uid == "" {
		return
	}
	d.clean.put(uid, owner, key)
}
