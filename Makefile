# celld-operator. The two commands a new machine needs:
#   make run    start a local cluster, the operator and a sample fleet (Ctrl-C stops all)
#   make test   every test: generated-file checks, unit, API, e2e and short fuzzing
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# The release: its version, the version it replaces in the upgrade graph and its date (the CSV's
# createdAt and every image timestamp, fixed so that regenerating the bundle or rebuilding the
# images gives the same bytes). VERSION is the one version of a release: make version writes it
# into the install chart (version, appVersion, so the default image tag) and the kustomize image
# tag; make bundle into the CSV, the bundle and the catalog; make build and make images into the
# binary (--version). Change them together, and add the bundle image to catalog/template.yaml.
VERSION ?= 0.2.0
REPLACES ?= 0.1.0
CREATED_AT ?= 2026-12-01T00:00:00Z
# The project publishes its images under its own organisation, the owner of the Go module
# (github.com/celld/celld-operator): ghcr.io/celld. Set REGISTRY to your registry's host and
# path prefix to publish elsewhere; every image below follows it.
REGISTRY ?= ghcr.io/celld
IMG ?= $(REGISTRY)/celld-operator:$(VERSION)
# The digest of IMG once pushed (sha256:...): the bundle then names the operator image by
# digest and declares the disconnected feature. make images (make release) pushes IMG and sets
# it itself.
IMG_DIGEST ?=
BUNDLE_REPO ?= $(REGISTRY)/celld-operator-bundle
BUNDLE_IMG ?= $(BUNDLE_REPO):$(VERSION)
CATALOG_IMG ?= $(REGISTRY)/celld-operator-catalog:$(VERSION)
# The operator-sdk scorecard-test image the bundle's scorecard configuration runs, mirrored
# under REGISTRY; SCORECARD_SOURCE (the upstream operator-framework/scorecard-test image of
# your operator-sdk version) makes make images copy it there first.
SCORECARD_IMAGE ?= $(REGISTRY)/scorecard-test:v1.42.3
SCORECARD_SOURCE ?=
# The operator's platforms (make images builds one binary each, in one OCI index).
PLATFORMS ?= linux/amd64,linux/arm64
# Earlier releases whose operator image a registry lacks, VERSION=COMMIT separated by spaces:
# make images builds each from its commit and pushes it beside IMG (the first publication to a
# registry needs EARLIER_RELEASES=0.1.0=af573ed655b80abd0e74d9434c327a6ce7cae2cf).
EARLIER_RELEASES ?=
BUILDER_IMAGE ?=
RUNTIME_IMAGE ?=
# An opm image to build the catalog image on (it then also serves the catalog to OLM v0's
# CatalogSource); make images without it builds the catalog-only image OLM v1's ClusterCatalog
# reads. catalog-build (Docker) needs it.
OPM_IMAGE ?=
# The channels opm's olm.semver template (catalog/template.yaml) gives a 0.x release.
CHANNELS ?= candidate-v0,stable-v0
DEFAULT_CHANNEL ?= stable-v0

BIN := $(CURDIR)/bin
export KUBEBUILDER_ASSETS := $(BIN)
CONTROLLER_GEN := $(BIN)/controller-gen
GINKGO := $(BIN)/ginkgo
K8S_BINARIES := $(BIN)/etcd $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kubectl $(BIN)/kwok $(BIN)/metrics-server
# Fuzzing is bounded by a count of executions, not a duration: with a duration, Go 1.26's fuzz
# coordinator can fail a target with a bare "context deadline exceeded" at the deadline
# (golang/go#75804, fixed in Go 1.27), which CI met once with no failing input.
FUZZTIME ?= 100000x
E2E_PROCS ?= 2
E2E_TIMEOUT ?= 25m
# The fault campaign: SEED replays a storm (empty: a random seed, printed at start), DURATION
# is the storm's length, WEIGHTS overrides the mix (kind=N,...: docs/reliability.md); make
# test runs CHAOS_SHORT_DURATION of it.
SEED ?=
DURATION ?= 10m
WEIGHTS ?=
CHAOS_SHORT_DURATION ?= 150s
CHAOS_TIMEOUT ?= 3h

##@ Main

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)

.PHONY: run
run: tools build plugin ## Run the operator on a local cluster with a sample PersistentFleet (Ctrl-C stops everything).
	go build -o $(BIN)/localcluster ./tests/localcluster/cmd/localcluster
	BIN=$(BIN) tests/run.sh

.PHONY: test
test: tools verify test-unit test-api test-rbac test-chart-cluster test-e2e test-chaos-short test-operator-upgrade test-fuzz ## Run every test (builds the pinned Kubernetes binaries on first use).

##@ Tests

.PHONY: test-unit
test-unit: tools ## Unit tests, chart goldens and server-side apply tests (envtest).
	go test -count=1 ./api/... ./controllers/... ./tests/bundle/... ./tests/celldsim/... ./tests/gitops/... ./tests/sidecarinjector/... ./tests/localcluster ./tests/tools/chartdocs/... ./tests/tools/bundlegen/... ./tests/tools/catalog/... ./tests/tools/release/... ./internal/... ./cmd/... .

.PHONY: test-chart
test-chart: tools ## Only the install chart's tests (in test-unit and test-chart-cluster): schema, README table, helm lint --strict, every value set installed on a real API server and run on the local cluster, helm install/upgrade/uninstall.
	go test -count=1 -run '^TestChart' ./tests/bundle/
	go test -count=1 ./tests/tools/chartdocs/... ./tests/chart/...

.PHONY: test-chart-cluster
test-chart-cluster: tools ## Every install value set of the chart running on the local cluster (Pod Security restricted, Pods ready, budgets evaluated).
	go test -count=1 ./tests/chart/...

.PHONY: test-api
test-api: tools ## CRD admission, SSA ownership and subresources against a real kube-apiserver.
	go test -count=1 ./tests/api/... ./tests/admissionfuzz/...

.PHONY: test-rbac
test-rbac: tools ## Least-privilege RBAC (chart and bundle CSV) proven on the local cluster.
	go test -count=1 ./tests/rbac/...

.PHONY: test-e2e
test-e2e: tools $(GINKGO) build ## Ginkgo e2e suites on the local cluster (parallel namespaces of one cluster).
	$(GINKGO) -p --procs=$(E2E_PROCS) --timeout=$(E2E_TIMEOUT) --poll-progress-after=120s --label-filter='!scale' ./tests/e2e

.PHONY: test-chaos
test-chaos: tools build ## Seeded fault campaign on the local cluster with continuous invariants (SEED=N replays, DURATION=10m).
	go test -count=1 ./tests/chaos/schedule
	go test -count=1 -skip='^TestCampaign$$' ./tests/chaos
	CELLD_CHAOS_SEED=$(SEED) CELLD_CHAOS_DURATION=$(DURATION) CELLD_CHAOS_WEIGHTS=$(WEIGHTS) CELLD_CHAOS_OPERATOR_BINARY=$(BIN)/manager \
		go test -count=1 -v -timeout=$(CHAOS_TIMEOUT) -run='^TestCampaign$$' ./tests/chaos

.PHONY: test-chaos-short
test-chaos-short: ## The short fault campaign make test runs (a random seed, CHAOS_SHORT_DURATION of storm: about 5 minutes in all).
	@$(MAKE) --no-print-directory test-chaos DURATION=$(CHAOS_SHORT_DURATION)

.PHONY: test-operator-upgrade
test-operator-upgrade: tools build ## Upgrade from release 0.1.0 (built once per user and commit) to bin/manager on the local cluster, then roll back, under continuous safety monitors (about 3 minutes).
	CELLD_UPGRADE_OPERATOR_BINARY=$(BIN)/manager go test -count=1 -v -timeout=15m ./tests/operatorupgrade

.PHONY: test-fuzz
test-fuzz: ## Short, bounded fuzzing of the /state parser (100000 executions per target; FUZZTIME=20000000x for longer runs).
	go test -run='^$$' -fuzz='^FuzzValidObject$$' -fuzztime=$(FUZZTIME) ./controllers/celld
	go test -run='^$$' -fuzz='^FuzzDecodeState$$' -fuzztime=$(FUZZTIME) ./controllers/celld

.PHONY: bench
bench: ## Benchmarks of the pure packages (numbers go to docs/performance.md).
	go test -run='^$$' -bench=. -benchmem ./api/... ./controllers/...

.PHONY: test-scale
test-scale: tools $(GINKGO) build ## Long scale and soak runs, not part of make test (SCALE_FLEETS, SCALE_SETTLE size the read-model run, ten per namespace and then all in one).
	$(GINKGO) -v --label-filter='scale && !read-model' --timeout=60m ./tests/e2e
	CELLD_E2E_OPERATOR_BINARY=$(abspath $(BIN))/manager SCALE_PER_NAMESPACE=10 $(GINKGO) -v --label-filter=read-model --timeout=90m ./tests/e2e
	CELLD_E2E_OPERATOR_BINARY=$(abspath $(BIN))/manager SCALE_PER_NAMESPACE=0 $(GINKGO) -v --label-filter=read-model --timeout=90m ./tests/e2e

.PHONY: test-scale-1000
test-scale-1000: tools $(GINKGO) build ## 1,000 fleets (3,000 members on 15 simulated nodes) on one operator, in one namespace, without the baseline (about 45 minutes; on 2 cores the local cluster brings them Ready but does not keep them settled: docs/performance.md).
	CELLD_E2E_OPERATOR_BINARY=$(abspath $(BIN))/manager CELLD_E2E_NODES_PER_ZONE=5 SCALE_FLEETS=1000 SCALE_PER_NAMESPACE=0 SCALE_BASELINE=0 SCALE_SETTLE=$(or $(SCALE_SETTLE),5m) $(GINKGO) -v --label-filter=read-model --timeout=120m ./tests/e2e

##@ Build and generate

.PHONY: build
build: ## Build the operator binary into bin/manager.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN)/manager .

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/kubectl-celld (kubectl celld status|restart|pause|resume|stop|start|report; docs/kubectl-plugin.md).
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN)/kubectl-celld ./cmd/kubectl-celld
	ln -sf kubectl-celld $(BIN)/kubectl_complete-celld
	@echo "kubectl finds plugins on PATH: export PATH=\"$(BIN):\$$PATH\" (or copy bin/kubectl-celld and bin/kubectl_complete-celld into a directory on PATH), then: kubectl celld --help"

.PHONY: tools
tools: $(K8S_BINARIES) $(CONTROLLER_GEN) ## Build etcd, the Kubernetes binaries, kwok and metrics-server once (cached per user, linked into bin/).

$(K8S_BINARIES) &: tests/tools/install.sh
	tests/tools/install.sh $(BIN)

$(CONTROLLER_GEN): go.mod
	go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(GINKGO): go.mod
	go build -o $@ github.com/onsi/ginkgo/v2/ginkgo

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code and the API's typed apply configurations.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) applyconfiguration paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRDs (config/crd/bases, install chart), docs/fleet-api.md and the chart README's values table.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	go run ./tests/tools/apidocs
	rm -f helm-charts/celld-operator/files/crds/*.yaml && cp config/crd/bases/*.yaml helm-charts/celld-operator/files/crds/
	go run ./tests/tools/chartdocs

.PHONY: verify
verify: generate manifests ## Fail when generated files are stale, code is not gofmt'ed, or go vet or staticcheck complains.
	@stale=$$(git status --porcelain -- api config/crd helm-charts/celld-operator/files/crds helm-charts/celld-operator/README.md docs/fleet-api.md); \
	if [ -n "$$stale" ]; then echo "generated files are stale; run make generate manifests and commit:"; echo "$$stale"; git --no-pager diff --stat -- api config/crd helm-charts/celld-operator/files/crds helm-charts/celld-operator/README.md docs/fleet-api.md; exit 1; fi
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	go tool staticcheck ./...

##@ Distribution

.PHONY: version
version: ## Write VERSION into the install chart (version, appVersion) and the kustomize image tag.
	go run ./tests/tools/release version --version $(VERSION)

.PHONY: bundle
bundle: manifests version ## Generate the OLM bundle from config/ and the catalog from it (validated with operator-sdk and opm too when they are on PATH).
	go run ./tests/tools/bundlegen --version $(VERSION) --replaces $(REPLACES) --created-at $(CREATED_AT) \
		--channels $(CHANNELS) --default-channel $(DEFAULT_CHANNEL) --image $(IMG) $(if $(IMG_DIGEST),--image-digest $(IMG_DIGEST)) \
		--scorecard-image $(SCORECARD_IMAGE) --out bundle
	@if command -v operator-sdk >/dev/null; then operator-sdk bundle validate ./bundle --select-optional suite=operatorframework; fi
	@$(MAKE) --no-print-directory catalog

.PHONY: catalog
catalog: ## Copy bundle/ into olm/celld-operator/VERSION and render the File-Based Catalog from catalog/template.yaml (opm's olm.semver).
	go run ./tests/tools/catalog render --template catalog/template.yaml --bundle-root olm/celld-operator --release-bundle bundle \
		--bundle-repo $(BUNDLE_REPO) --out catalog/celld-operator/catalog.yaml
	@if command -v opm >/dev/null; then opm validate catalog/celld-operator; fi

.PHONY: images
images: ## Build and push the operator, bundle and catalog images to REGISTRY without Docker; bundle/, olm/ and catalog/ then name the operator by digest (commit them).
	go run ./tests/tools/release images --version $(VERSION) --image $(IMG) --bundle-repo $(BUNDLE_REPO) \
		--catalog-image $(CATALOG_IMG) --platforms $(PLATFORMS) $(if $(OPM_IMAGE),--opm-image $(OPM_IMAGE)) \
		$(if $(SCORECARD_SOURCE),--mirror $(SCORECARD_SOURCE)=$(SCORECARD_IMAGE)) $(foreach e,$(EARLIER_RELEASES),--earlier $(e)) \
		--report $(BIN)/release.json

.PHONY: release
release: bundle ## The whole release into REGISTRY: make bundle, then make images (docs/install.md, Publishing a release).
	@$(MAKE) --no-print-directory images

.PHONY: catalog-build
catalog-build: ## Build the catalog image CATALOG_IMG with Docker (set OPM_IMAGE); make images needs no Docker.
	docker build -f catalog.Dockerfile --build-arg OPM_IMAGE=$(OPM_IMAGE) -t $(CATALOG_IMG) .

.PHONY: catalog-bundles-build
catalog-bundles-build: ## Build the bundle image of every version in the catalog, BUNDLE_REPO:VERSION, with Docker.
	for dir in olm/celld-operator/*/; do \
		v=$$(basename $$dir); \
		go run ./tests/tools/catalog dockerfile --bundle $$dir | docker build -f - -t $(BUNDLE_REPO):$$v $$dir; \
	done

.PHONY: scorecard
scorecard: ## Run the bundle's scorecard tests on the current cluster (needs the operator-sdk CLI).
	@command -v operator-sdk >/dev/null || { echo "scorecard needs the operator-sdk CLI on PATH; make test runs the basic scorecard checks in Go (tests/bundle)"; exit 1; }
	operator-sdk scorecard ./bundle

.PHONY: run-bundle
run-bundle: ## Install BUNDLE_IMG on the current cluster through OLM (needs the operator-sdk CLI).
	@command -v operator-sdk >/dev/null || { echo "run-bundle needs the operator-sdk CLI on PATH"; exit 1; }
	operator-sdk run bundle $(BUNDLE_IMG) --namespace celld-system

.PHONY: docker-build
docker-build: ## Build the operator image with Docker (set BUILDER_IMAGE and RUNTIME_IMAGE); make images needs no Docker.
	docker build --build-arg BUILDER_IMAGE=$(BUILDER_IMAGE) --build-arg RUNTIME_IMAGE=$(RUNTIME_IMAGE) --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: bundle-build
bundle-build: ## Build the bundle image BUNDLE_IMG with Docker, from the repository root (bundle.Dockerfile).
	docker build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: clean
clean: ## Remove build outputs (the per-user binary cache stays).
	rm -rf $(BIN)/manager $(BIN)/localcluster $(BIN)/ginkgo .localcluster
