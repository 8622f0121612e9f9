// Package nscache keeps one informer cache per namespace that holds CelldFleets: the operator's
// read model of fleet children.
//
// The operator is granted the CelldFleet kind cluster-wide but its children (Pods, claims,
// workloads, Services, policies, routes) only per namespace, through the Role
// celld-operator-fleet. A cluster-wide informer would need the rights in every namespace and
// would stall every fleet on one namespace's missing Role, so each fleet namespace gets its
// own cache, started when its first fleet is reconciled, after a probe that proves the Role
// allows list and watch of every kind. A namespace whose Role is missing answers every read
// with the API server's Forbidden, and the fleet reports NamespaceAccessDenied; the cache is
// started on a later attempt once the Role exists.
//
// Every informer is restricted to objects carrying the fleet UID label except claims (a claim
// at a member's name without the label must be seen to be refused) and ServiceAccounts (read by
// name, metadata only). Managed fields are stripped before objects are stored. Every add,
// update and delete is handed to Events, so a hand edit, a deleted child or a member going
// NotReady wakes its fleet at once.
package nscache
