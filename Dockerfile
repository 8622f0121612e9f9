# The operator image with Docker: a static binary on a distroless, non-root base. watches.yaml
# and the fleet chart are embedded in the binary, so /manager is the only file copied. Build it
# from the repository root. `make images` builds the released image without Docker
# (docs/install.md, Publishing a release).
#
# No base image has a default: pass both, with your registry's path (docs/install.md), e.g.
#   docker build --build-arg BUILDER_IMAGE=REGISTRY/golang:1.26 \
#     --build-arg RUNTIME_IMAGE=REGISTRY/distroless/static-debian12:nonroot \
#     --build-arg VERSION=0.2.0 -t IMG .
# `make docker-build` passes BUILDER_IMAGE, RUNTIME_IMAGE and VERSION (the Makefile's).
ARG BUILDER_IMAGE
ARG RUNTIME_IMAGE

FROM ${BUILDER_IMAGE} AS builder
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /workspace
# Dependencies first, so a source change does not download modules again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /manager .

FROM ${RUNTIME_IMAGE}
WORKDIR /
COPY --from=builder /manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
