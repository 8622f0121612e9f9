#!/usr/bin/env bash
# make run: a local cluster, the CRDs, the operator and a sample PersistentFleet, in the
# foreground. Ctrl-C stops the operator and the cluster and leaves no process behind.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/bin}
dir=${LOCALCLUSTER_DIR:-$root/.localcluster}
ns=${FLEET_NAMESPACE:-celld-demo}
export PATH="$bin:$PATH"

pids=()
cleanup() {
	trap - EXIT INT TERM
	echo; echo "run: stopping the operator and the local cluster"
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

mkdir -p "$dir"
"$bin/localcluster" up --dir "$dir" >"$dir/localcluster.log" 2>&1 &
pids+=($!)
echo "run: starting the local cluster (log: $dir/localcluster.log)"
"$bin/localcluster" wait --dir "$dir" --timeout 10m
export KUBECONFIG=$dir/kubeconfig

kubectl apply --server-side -f "$root/config/crd/bases" >/dev/null
kubectl wait --for condition=Established --timeout 60s crd/celldfleets.celld.eric.dev crd/celldstoragereservations.celld.eric.dev >/dev/null
kubectl create namespace celld-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n "$ns" create serviceaccount celld-runtime --dry-run=client -o yaml | kubectl apply -f - >/dev/null
if [ -f "$root/config/rbac/fleet_namespace_role.yaml" ]; then
	sed "s/namespace: FLEET_NAMESPACE/namespace: $ns/" "$root/config/rbac/fleet_namespace_role.yaml" | kubectl -n "$ns" apply -f - >/dev/null || true
fi

"$bin/manager" --leader-elect=false --network-policy-enforced \
	--storage-provisioners=zonal.csi.celld.eric.dev --operator-namespace=celld-system \
	--member-replacement-delay=1m --health-probe-bind-address=127.0.0.1:0 --metrics-bind-address=127.0.0.1:18084 --metrics-secure=false \
	>"$dir/operator.log" 2>&1 &
pids+=($!)
echo "run: operator started (log: $dir/operator.log, metrics: http://127.0.0.1:18084/metrics)"

sed 's/storageClassName: ebs-gp3/storageClassName: zonal/' "$root/config/samples/persistent.yaml" | kubectl -n "$ns" apply -f - >/dev/null
cat <<MSG

The local cluster is up and fleet $ns/persistent is being created.
  export KUBECONFIG=$dir/kubeconfig
  export PATH="$bin:\$PATH"      # kubectl, and the kubectl celld plugin once built with: make plugin

Try (docs/kubectl-plugin.md):
  kubectl celld status persistent -n $ns --watch                  # the fleet on one screen
  kubectl celld restart persistent -n $ns                         # rolling restart (prints the patch, asks first)
  kubectl celld pause persistent -n $ns                           # pause; kubectl celld resume undoes it
  kubectl celld stop persistent -n $ns                            # full stop; kubectl celld start [--image IMAGE]
  kubectl celld report persistent -n $ns --operator-log $dir/operator.log   # support bundle, secrets redacted
  $bin/localcluster fail-node --dir $dir \$(kubectl -n $ns get pod persistent-0 -o jsonpath='{.spec.nodeName}')   # fail a node

Ctrl-C stops everything.
MSG
wait -n "${pids[@]}"
echo "run: a process exited; see $dir/localcluster.log and $dir/operator.log"
