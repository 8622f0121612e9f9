# The catalog image of celld-operator: the File-Based Catalog in catalog/celld-operator (written
# by `make catalog`) under /configs, served by opm. OLM v1's ClusterCatalog reads /configs through
# the label below; OLM v0's CatalogSource (sourceType grpc) runs the image, which serves it.
#
# Build it from the repository root. OPM_IMAGE names an operator-framework opm image you can pull
# (it has no default); `make catalog-build OPM_IMAGE=... CATALOG_IMG=...` passes both. `make
# images` builds the released catalog image without Docker (docs/install.md).
ARG OPM_IMAGE
FROM ${OPM_IMAGE}

ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]

COPY catalog/celld-operator /configs/celld-operator
# Build the serving cache now, so the catalog Pod starts without rebuilding it (and the build
# fails if opm finds the catalog invalid).
RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]

LABEL operators.operatorframework.io.index.configs.v1=/configs
