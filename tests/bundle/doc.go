// Package bundle holds the distribution tests: the OLM bundle (operator-framework validators,
// re-implemented format and scorecard checks, staleness against config/), the kustomize
// bases, the install chart (render, schema, RBAC parity, CRD copy) and the Dockerfile build.
package bundle
