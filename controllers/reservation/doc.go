// Package reservation holds the pure rules of a fleet's storage reservation: its name (derived
// from the bucket, so Create arbitrates between fleets that ask for the same one), the spec it
// is created with, the hash of the fleet's storage-relevant spec frozen in it (and the layouts
// earlier releases froze, which verify forever), and the reserved-tuning record that lets
// execution, lifecycle, env and telemetry change after creation without unfreezing anything
// else.
//
// A reservation is permanent and belongs to one fleet UID. Nothing here talks to the API
// server; the reconciler gets or creates the reservation and asks Matches whether the fleet
// may use it.
package reservation
