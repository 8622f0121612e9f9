package rbac

import (
	"sort"
	"testing"
)

// unexercisedGrants are granted "group/resource:verb" triples (group "core" for the core API)
// that code needs on paths these scenarios do not take, each with the code that needs it.
var unexercisedGrants = map[string]string{
	"celld.eric.dev/celldfleets:list":                       "the manager's informer (For(CelldFleet), the observer's cached List) lists when the API server does not stream watch-list",
	"celld.eric.dev/celldpreviews:list":                     "the manager's informer (For(CelldPreview)) lists when the API server does not stream watch-list",
	"storage.k8s.io/storageclasses:list":                    "the informer behind fleet/observe.go's cached StorageClass Get (observeGuards) lists when watch-list is not streamed",
	"celld.eric.dev/celldstoragereservations:update":        "fleet/act.go updates a reservation it adopts (writeRecords, writeHistory)",
	"celld.eric.dev/celldstoragereservations/status:update": "fleet/act.go (cancelStep) cancels the seed of a seeded preview fleet deleted before it started",
	"metrics.k8s.io/pods:list":                              "application/capacity.go lists the PodMetrics of a fleet with spec.capacity; these scenarios set no policy",
	"core/pods:patch":                                       "fleet/handoff.go releaseHold removes the replacement-handoff finalizer",
	"core/pods:delete":                                      "fleet/act.go and fleet/handoff.go member replacement and force delete of a member stuck terminating",
	"gateway.networking.k8s.io/httproutes:get":              "spec.routing with a Gateway: children/apply.go preflightLive asks the API server before writing the routing policy of a route the cache does not hold",
	"networking.k8s.io/ingresses:get":                       "spec.routing with an Ingress: children/apply.go preflightLive asks the API server before writing the routing policy of a route the cache does not hold",
	"gateway.networking.k8s.io/httproutes:create":           "spec.routing with a Gateway: children/apply.go creates the HTTPRoute",
	"gateway.networking.k8s.io/httproutes:delete":           "children/routing.go deletes a route the routing order retires",
	"networking.k8s.io/ingresses:create":                    "spec.routing with an Ingress: children/apply.go creates it",
	"networking.k8s.io/ingresses:delete":                    "children/routing.go deletes a route the routing order retires",
	"security.istio.io/authorizationpolicies:get":           "spec.mesh.istio: children/apply.go reads a policy whose create found the name taken",
	"security.istio.io/authorizationpolicies:create":        "spec.mesh.istio: children/apply.go creates the policy",
	"security.istio.io/authorizationpolicies:delete":        "children/apply.go prune",
	"security.istio.io/peerauthentications:get":             "spec.mesh.istio: children/apply.go reads a policy whose create found the name taken",
	"security.istio.io/peerauthentications:create":          "spec.mesh.istio: children/apply.go creates the policy",
	"security.istio.io/peerauthentications:delete":          "children/apply.go prune",
	// A child is compared with its rendering by a dry-run update only when the pair was not
	// verified before (a new operator process, or a hand edit), and restored by an update only
	// when it drifted; a child the running operator created is already verified.
	// A child or workload is read from the API server only when its create found the name
	// taken (AlreadyExists): a foreign object there, or the fleet's own that the cache has not
	// delivered; a new fleet's creates find nothing.
	"core/services:get":                              "children/apply.go reads a Service whose create found the name taken",
	"networking.k8s.io/networkpolicies:get":          "children/apply.go reads a NetworkPolicy whose create found the name taken",
	"policy/poddisruptionbudgets:get":                "children/apply.go reads a PodDisruptionBudget whose create found the name taken",
	"core/services:update":                           "drift/detector.go dry-run update and children/apply.go restore of a drifted Service",
	"networking.k8s.io/networkpolicies:update":       "drift/detector.go dry-run update and children/apply.go restore of a drifted NetworkPolicy",
	"policy/poddisruptionbudgets:update":             "drift/detector.go dry-run update and children/apply.go restore of a drifted PodDisruptionBudget",
	"networking.k8s.io/ingresses:update":             "spec.routing with an Ingress: drift/detector.go dry-run update and children/apply.go restore",
	"gateway.networking.k8s.io/httproutes:update":    "spec.routing with a Gateway: drift/detector.go dry-run update and children/apply.go restore",
	"security.istio.io/authorizationpolicies:update": "spec.mesh.istio: drift/detector.go dry-run update and children/apply.go restore",
	"security.istio.io/peerauthentications:update":   "spec.mesh.istio: drift/detector.go dry-run update and children/apply.go restore",
}

// occasionalGrants are granted triples whose use depends on timing, so a scenario may or may
// not request them: they must be granted, and need not be requested.
var occasionalGrants = map[string]string{
	"core/events:patch":                           "client-go's event correlator patches a repeated event (leader election) instead of creating one, when it repeats within the correlator's window",
	"celld.eric.dev/celldstoragereservations:get": "a fleet reads its reservation from the API server only while the manager's cache has not delivered it (readReservation), when it loses the reservation's creation to another claim (reservation.Claim), and before a capacity policy records a step (writeHistory); a claim's own existence check is its list",
	"events.k8s.io/events:patch":                  "the events.k8s.io recorder patches the series of a fleet event that repeats within the series window (a fleet blocked, unblocked and blocked again quickly)",
	"core/pods:get":                               "fleet/handoff.go reads a replacement's victim Pod, and a Pod write that meets another controller's (the kubelet's, the scheduler's) re-reads it: fleet/act.go releaseZoneGate, fleet/handoff.go commit and releaseHold",
	"core/persistentvolumeclaims:get":             "fleet/handoff.go records a replaced member's claim from the API server, and fleet/handoff.go (deleteClaimVerified) re-reads a claim whose delete met another controller's write (the unused-since controller writes a claim's status as its Pod stops, fleet deletion included)",
}

// TestVerbsMatchManifests compares what the operator requested in the chart and bundle
// scenarios (AllNamespaces and OwnNamespace) with the rules of their RBAC sources: every
// request must be granted in its scope (the API server agreed, and so must the manifests, read
// on their own), and every granted triple must have been requested or be explained in
// unexercisedGrants. The RBAC is exactly
// least-privilege: a granted triple that neither the scenarios nor unexercisedGrants account
// for fails the test, and so does an unexercisedGrants entry the scenarios did request or no
// source grants.
func TestVerbsMatchManifests(t *testing.T) {
	used := map[string]bool{}
	var sources []*scenario
	for _, name := range []string{"chart", "bundle", "bundle-own-namespace"} {
		s, ok := scenarios[name]
		if !ok {
			t.Run(name, func(t *testing.T) { s = runScenario(t, name) })
		}
		if s == nil || !s.completed {
			t.Fatalf("the %s scenario did not complete, so its requests are not a full record", name)
		}
		sources = append(sources, s)
		for _, a := range s.rec.accesses() {
			used[a.triple()] = true
		}
	}
	for _, s := range sources {
		grants := s.src.grants(t)
		for _, a := range s.rec.accesses() {
			granted := false
			for _, g := range grants {
				granted = granted || g.allows(a.Namespace, a.Group, a.Resource, a.Verb)
			}
			if !granted {
				t.Errorf("the %s RBAC does not grant %s, which the operator requested", s.src.name, a)
			}
		}
		var unused []string
		seen := map[string]bool{}
		for _, g := range grants {
			k := access{Group: g.group, Resource: g.resource, Verb: g.verb}.triple()
			if seen[k] || used[k] {
				continue
			}
			seen[k] = true
			_, needed := unexercisedGrants[k]
			_, occasional := occasionalGrants[k]
			if !needed && !occasional {
				unused = append(unused, k)
			}
		}
		sort.Strings(unused)
		for _, k := range unused {
			t.Errorf("the %s RBAC grants %s, which the operator never requested and unexercisedGrants does not explain: remove it from the manifests, or list it with the code that needs it", s.src.name, k)
		}
	}
	granted := map[string]bool{}
	for _, s := range sources {
		for _, g := range s.src.grants(t) {
			granted[access{Group: g.group, Resource: g.resource, Verb: g.verb}.triple()] = true
		}
	}
	for k := range unexercisedGrants {
		switch {
		case used[k]:
			t.Errorf("%s is listed in unexercisedGrants, but the scenarios requested it: remove the entry", k)
		case !granted[k]:
			t.Errorf("%s is listed in unexercisedGrants, but no RBAC source grants it: remove the entry", k)
		}
	}
	for k := range occasionalGrants {
		if !granted[k] {
			t.Errorf("%s is listed in occasionalGrants, but no RBAC source grants it: remove the entry", k)
		}
		if _, twice := unexercisedGrants[k]; twice {
			t.Errorf("%s is listed in both occasionalGrants and unexercisedGrants", k)
		}
	}
	t.Logf("%d triples requested, %d granted but not exercised (unexercisedGrants), %d used only at times (occasionalGrants)", len(used), len(unexercisedGrants), len(occasionalGrants))
}

// triple is the scope-free "group/resource:verb" of a request, the key of unexercisedGrants.
func (a access) triple() string {
	g := a.Group
	if g == "" {
		g = "core"
	}
	return g + "/" + a.Resource + ":" + a.Verb
}
