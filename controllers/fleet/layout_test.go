package fleet

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/celld/celld-operator/controllers/workload"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// TestLayoutsKeepWhatTheAPIServerNeverLetsChange: for both kinds, an update is the rendering
// except the fields the API server never lets change (kept as created) and the live replica
// count; labels others set are kept. The StatefulSet keeps its selector, serviceName, claim
// templates and pod management; the Deployment its selector.
func TestLayoutsKeepWhatTheAPIServerNeverLetsChange(t *testing.T) {
	f := corpus.Persistent()
	f.Namespace, f.Name, f.UID = "ns", "pf", "u1"
	bucket := corpus.Persistent()
	bucket.Namespace, bucket.Name, bucket.UID = "ns", "bf", "u2"
	bucket.Spec.Profile = "Bucket"
	bucket.Spec.Storage.StorageClassName = nil
	for _, tc := range []struct {
		name   string
		l      layout
		live   func(desired client.Object) client.Object
		kept   func(live, want client.Object) []string
		rendit func() client.Object
	}{
		{name: "StatefulSet", l: statefulSets{},
			rendit: func() client.Object { return statefulSets{}.render(f, workload.Options{}, 3) },
			live: func(desired client.Object) client.Object {
				l := desired.DeepCopyObject().(*appsv1.StatefulSet)
				l.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"old": "selector"}}
				l.Spec.ServiceName, l.Spec.PodManagementPolicy = "old-service", appsv1.OrderedReadyPodManagement
				l.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "old-data"}}}
				l.Spec.Replicas = new(int32(5))
				l.Labels = map[string]string{"someone": "else"}
				return l
			},
			kept: func(live, want client.Object) []string {
				l, w := live.(*appsv1.StatefulSet), want.(*appsv1.StatefulSet)
				var bad []string
				if w.Spec.Selector.MatchLabels["old"] != "selector" || w.Spec.ServiceName != "old-service" ||
					w.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement || len(w.Spec.VolumeClaimTemplates) != 1 || w.Spec.VolumeClaimTemplates[0].Name != "old-data" {
					bad = append(bad, "an immutable field")
				}
				if *w.Spec.Replicas != *l.Spec.Replicas {
					bad = append(bad, "the live replica count")
				}
				return bad
			}},
		{name: "Deployment", l: deployments{},
			rendit: func() client.Object { return deployments{}.render(bucket, workload.Options{}, 3) },
			live: func(desired client.Object) client.Object {
				l := desired.DeepCopyObject().(*appsv1.Deployment)
				l.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"old": "selector"}}
				l.Spec.Replicas = new(int32(5))
				l.Labels = map[string]string{"someone": "else"}
				return l
			},
			kept: func(live, want client.Object) []string {
				l, w := live.(*appsv1.Deployment), want.(*appsv1.Deployment)
				var bad []string
				if w.Spec.Selector.MatchLabels["old"] != "selector" {
					bad = append(bad, "the selector")
				}
				if *w.Spec.Replicas != *l.Spec.Replicas {
					bad = append(bad, "the live replica count")
				}
				return bad
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired := tc.rendit()
			if got := layoutOfObject(desired); got != tc.l || kindOf(desired) != tc.l.kind() {
				t.Fatalf("the rendering's layout is %v (%s), want %s", got, kindOf(desired), tc.l.kind())
			}
			live := tc.live(desired)
			want := tc.l.update(live, desired)
			if bad := tc.kept(live, want); len(bad) > 0 {
				t.Fatalf("the update did not keep %v", bad)
			}
			if want.GetLabels()["someone"] != "else" {
				t.Fatalf("the update dropped a label someone else set: %v", want.GetLabels())
			}
			if tc.l.template(want).Spec.ServiceAccountName != tc.l.template(desired).Spec.ServiceAccountName {
				t.Fatal("the update did not carry the rendered Pod template")
			}
			tc.l.setReplicas(want, 7)
			if fa := tc.l.facts(want, true); !fa.Exists || fa.Replicas != 7 {
				t.Fatalf("facts after setReplicas(7): %+v", fa)
			}
			if fa := tc.l.facts(nil, true); fa.Exists {
				t.Fatalf("the facts of no workload say it exists: %+v", fa)
			}
			if fa := tc.l.facts(layouts[0].empty(), true); tc.l.kind() == "Deployment" && fa.Exists {
				t.Fatalf("a Deployment layout read a StatefulSet as its workload: %+v", fa)
			}
		})
	}
	if kindOf(&corev1.Pod{}) != "*v1.Pod" || layoutOfObject(&corev1.Pod{}) != nil {
		t.Fatal("a Pod was taken for a workload")
	}
	answer := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}}}}}
	stored := statefulSets{}.stored(answer).(*appsv1.StatefulSet)
	if tm := stored.Spec.VolumeClaimTemplates[0].TypeMeta; tm.APIVersion != "" || tm.Kind != "" {
		t.Fatal("a created StatefulSet's answer keeps its claim templates' apiVersion and kind, which the cache's reads do not carry")
	}
}
