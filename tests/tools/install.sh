#!/usr/bin/env bash
# Builds the pinned control-plane binaries (etcd, Kubernetes, kwok, metrics-server) from Go
# modules into a per-user cache keyed by their versions and go.sum, then links them into bin/.
# A clean clone on the same machine reuses the cache; a new machine builds once (about 10
# minutes on 2 cores).
#
#   tests/tools/install.sh [BIN_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/bin}
k8s_version=v1.37.2
kwok_version=v0.8.0
metrics_server_version=v0.8.0
etcd_version=v3.7.0
cache_root=${CELLD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/celld-operator/tools}

key() { # version + hash of the tool module's go.sum: a changed pin is a new cache entry
	echo "$1-$(sha256sum "$root/tests/tools/$2/go.sum" | cut -c1-12)"
}
k8s_dir=$cache_root/k8s-$(key "$k8s_version" k8s)
kwok_dir=$cache_root/kwok-$(key "$kwok_version" kwok)
ms_dir=$cache_root/metrics-server-$(key "$metrics_server_version" metrics-server)
mkdir -p "$k8s_dir" "$kwok_dir" "$ms_dir" "$bin"

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"

build() { # dir name package [ldflags]
	local dir=$1 name=$2 pkg=$3 flags=${4:-}
	if [ -x "$dir/$name" ]; then return 0; fi
	echo "tools: building $name ($pkg) into $dir" >&2
	local start=$SECONDS
	(cd "$5" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$dir/$name.tmp" "$pkg")
	mv "$dir/$name.tmp" "$dir/$name"
	echo "tools: built $name in $((SECONDS - start))s" >&2
}

k8s_mod=$root/tests/tools/k8s
kwok_mod=$root/tests/tools/kwok
ms_mod=$root/tests/tools/metrics-server
build "$k8s_dir" etcd go.etcd.io/etcd/server/v3 "-s -w" "$k8s_mod"
build "$k8s_dir" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldflags" "$k8s_mod"
build "$k8s_dir" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags" "$k8s_mod"
build "$k8s_dir" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$ldflags" "$k8s_mod"
build "$k8s_dir" kubectl k8s.io/kubernetes/cmd/kubectl "$ldflags" "$k8s_mod"
build "$kwok_dir" kwok sigs.k8s.io/kwok/cmd/kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$kwok_version" "$kwok_mod"
build "$ms_dir" metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$metrics_server_version" "$ms_mod"

for n in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
	ln -sfn "$k8s_dir/$n" "$bin/$n"
done
ln -sfn "$kwok_dir/kwok" "$bin/kwok"
ln -sfn "$ms_dir/metrics-server" "$bin/metrics-server"
echo "tools: $bin has etcd $etcd_version, Kubernetes $k8s_version, kwok $kwok_version, metrics-server $metrics_server_version" >&2
