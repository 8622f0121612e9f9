// Package preview drives CelldPreviews: for each preview it reserves the parent's preview
// pool (the whole preview bucket, bound to the parent UID, once for all its previews),
// generates one small CelldFleet named from the preview's UID in its own prefix of that
// bucket (fleet.go, pure), restores hand edits of it, deletes it on expiry or when the
// preview is deleted, and projects its state on the preview. The generated fleet is then an
// ordinary fleet of the fleet reconciler, whose reservation phase binds its prefix to its own
// UID inside the pool.
package preview
