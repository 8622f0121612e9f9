// Package gitops evaluates the CelldFleet health checks that docs/gitops.md gives to Argo CD
// (a Lua script) and Flux (CEL healthCheckExprs) the way those tools evaluate them, so the
// checks are tested on fleet objects captured from the local cluster (testdata/, written by the
// e2e spec in tests/e2e/gitops_health_test.go) and on live fleets by that spec.
package gitops
