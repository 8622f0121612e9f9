// Package reservation holds the rules of storage reservations: a reservation's name (derived
// from the bucket, so Create arbitrates between fleets that ask for the same one), the spec it
// is created with, the hash of the fleet's storage-relevant spec frozen in it (and the layouts
// earlier releases froze, which verify forever), the reserved-tuning record that lets
// execution, lifecycle, env and telemetry change after creation without unfreezing anything
// else, and the scopes (scope.go): a whole bucket, a preview pool, a preview fleet's prefix,
// and which of them may share a bucket.
//
// A reservation is permanent and belongs to one fleet UID. The rules are pure; the one piece
// that talks to the API server is Claim, the arbitration itself (get, check the bucket's other
// scopes, create, re-read on AlreadyExists), shared by fleets and preview pools. Callers then
// ask Matches, PoolMatches or InPool whether the reservation is theirs.
package reservation
