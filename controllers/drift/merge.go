package drift

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Merge returns what the operator writes over live for the rendering want: want's content,
// live's identity and status, and live's metadata merged with want's (MergeMetadata).
func Merge(live, want *unstructured.Unstructured, stale ...string) *unstructured.Unstructured {
	out := want.DeepCopy()
	MergeMetadata(out, live, stale...)
	if st, ok := live.Object["status"]; ok {
		// Kinds without a status subresource would lose it on an update that omits it.
		out.Object["status"] = runtimeCopy(st)
	} else {
		delete(out.Object, "status")
	}
	return out
}

// MergeMetadata turns dst, a rendering, into the metadata of an update of live. The operator
// owns only the labels, annotations and owner references it renders: labels and annotations
// others set (a webhook's label, another controller's annotation) and their owner references
// are kept, and the operator's values win. Annotations named in stale (keys the operator set
// earlier and no longer renders) are removed. Identity, finalizers and the resourceVersion come
// from live, so the update is refused if live changed since it was read. managedFields is left
// out, which tells the API server to keep it.
func MergeMetadata(dst, live metav1.Object, stale ...string) {
	labels := maps.Clone(live.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, dst.GetLabels())
	dst.SetLabels(labels)

	ann := maps.Clone(live.GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	for _, k := range stale {
		delete(ann, k)
	}
	maps.Copy(ann, dst.GetAnnotations())
	dst.SetAnnotations(ann)

	refs := dst.GetOwnerReferences()
	for _, l := range live.GetOwnerReferences() {
		if !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == l.UID }) {
			refs = append(refs, l)
		}
	}
	dst.SetOwnerReferences(refs)

	dst.SetName(live.GetName())
	dst.SetNamespace(live.GetNamespace())
	dst.SetUID(live.GetUID())
	dst.SetResourceVersion(live.GetResourceVersion())
	dst.SetGeneration(live.GetGeneration())
	dst.SetCreationTimestamp(live.GetCreationTimestamp())
	dst.SetFinalizers(live.GetFinalizers())
	dst.SetDeletionTimestamp(live.GetDeletionTimestamp())
	dst.SetManagedFields(nil)
}

func runtimeCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}
