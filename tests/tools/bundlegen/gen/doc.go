// Package gen builds the OLM registry+v1 bundle of celld-operator from config/: the CSV base,
// the CRDs, the manager Deployment, the RBAC, the samples and the scorecard configuration. It
// resolves the kustomize resources lists itself (a small, strict subset of kustomize) so that
// the bundle can be generated without the operator-sdk or kustomize CLIs, and it derives the
// bundle annotations and the bundle.Dockerfile labels from one table.
package gen
