// Package children is the Helm half of the operator: it renders a fleet's static children
// (Services, NetworkPolicies, PodDisruptionBudget, route, Istio policies) from the embedded
// helm-charts/celld-fleet chart with values computed in Go, applies them with server-side apply
// under one field owner, refuses objects it does not own, prunes what the chart stopped
// rendering, orders routing switches, and reports RoutingReady. It keeps no Helm release: the
// chart is a template library, the fleet UID label is the inventory.
package children
