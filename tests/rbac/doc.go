// Package rbac proves the operator's least-privilege RBAC on a real local cluster.
//
// One cluster (tests/localcluster) serves the whole package. Each scenario installs one RBAC
// source — the install chart with fleetNamespaces, or the OLM bundle CSV's clusterPermissions
// and permissions as OLM creates them for an AllNamespaces install (both cluster-wide) and for
// an OwnNamespace install (permissions as a Role in the one namespace, the operator watching
// only it) — and runs the operator in-process with the identity of that source's
// ServiceAccount: a bound token from the TokenRequest API, no client certificate, leader
// election on in the operator namespace. The OwnNamespace scenario first checks with the API
// server's authorizer that the identity may not delete Pods or claims outside its namespace.
// A PersistentFleet is then driven from creation to Ready, through a restartToken rollout and
// through deletion. Every request the operator sends is recorded with the verb the API server
// authorizes; a 403 on any of them fails the scenario with the verb and resource that were
// denied.
//
// TestChartNamespaceAccessDenied checks that a fleet in a namespace without the per-namespace
// Role reports NamespaceAccessDenied naming celld-operator-fleet, that the Warning event is
// delivered there (the ClusterRole grants events in every namespace) and that nothing is
// created there. TestVerbsMatchManifests compares the recorded requests with the rules of every
// source: every request must be granted, and every granted (group, resource, verb) must have
// been used or be listed in unexercisedGrants with the code that needs it; anything else is
// excess and fails the test.
//
// Run with: go test -count=1 ./tests/rbac/...
package rbac
