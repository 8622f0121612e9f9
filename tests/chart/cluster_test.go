package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/celld/celld-operator/tests/chart/cases"
	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// fieldOwner is the field manager of the test's server-side applies.
const fieldOwner = "chart-test"

// TestChartRunsOnTheLocalCluster installs every case's render on the local cluster by
// server-side apply, each in a fresh release namespace that enforces the restricted Pod
// Security Standard, and requires what only a running cluster shows: the ReplicaSet controller
// gets the operator Pods admitted (Pod Security, the ServiceAccount they run as, their
// PriorityClass), the scheduler places them, they become ready and the Deployment available;
// and, with several replicas, the disruption controller finds the budget's Pods and allows
// exactly one of them to be evicted at a time.
func TestChartRunsOnTheLocalCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, crd := range cases.MonitoringCRDs() {
		if err := admin.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create the stand-in CRD %s: %v", crd.Name, err)
		}
		waitEstablished(ctx, t, crd.Name)
	}
	for i, c := range cases.All() {
		t.Run(c.Name, func(t *testing.T) {
			ns := fmt.Sprintf("chart-run-%d", i)
			createNamespace(ctx, t, ns, map[string]string{
				"pod-security.kubernetes.io/enforce":         "restricted",
				"pod-security.kubernetes.io/enforce-version": "latest",
			})
			for _, n := range c.Namespaces {
				createNamespace(ctx, t, n, nil)
			}
			for _, sa := range c.ServiceAccounts {
				if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
					t.Fatalf("create the ServiceAccount %s the values name: %v", sa, err)
				}
			}
			objs := render(t, c, ns)
			applyAll(ctx, t, objs)

			d := only(t, objs, "Deployment")
			dep := waitAvailable(ctx, t, client.ObjectKey{Namespace: ns, Name: d.GetName()})
			replicas := *dep.Spec.Replicas
			pdbs := kindsOf(objs, "PodDisruptionBudget")
			switch {
			case replicas > 1 && len(pdbs) != 1:
				t.Errorf("%d operator replicas run under %d PodDisruptionBudgets, want one", replicas, len(pdbs))
			case replicas == 1 && len(pdbs) != 0:
				t.Errorf("a single operator replica runs under %d PodDisruptionBudgets: it would block every node drain", len(pdbs))
			}
			for _, p := range pdbs {
				waitBudget(ctx, t, client.ObjectKey{Namespace: p.GetNamespace(), Name: p.GetName()}, replicas)
			}
		})
	}
}

// render renders a case into namespace.
func render(t *testing.T, c cases.Case, namespace string) []*unstructured.Unstructured {
	t.Helper()
	dir, err := c.Dir(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	chrt, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := cases.Manifest(chrt, c.Values, namespace)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	path := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := gen.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// applyAll server-side applies a render, CRDs first and established before the rest. Every
// case renders the same CRDs (or none), and the cluster-scoped objects of one case are those of
// the next, named after it: each apply takes them over.
func applyAll(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			rest = append(rest, o)
			continue
		}
		apply(ctx, t, o)
		waitEstablished(ctx, t, o.GetName())
	}
	for _, o := range rest {
		apply(ctx, t, o)
	}
}

func apply(ctx context.Context, t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(fieldOwner), client.ForceOwnership)
	if err != nil {
		t.Fatalf("apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
}

// waitAvailable waits until every replica of the Deployment is updated, ready and available,
// and explains a timeout with the namespace's Pods and warnings (a Pod that admission refused
// shows only as the ReplicaSet's FailedCreate event).
func waitAvailable(ctx context.Context, t *testing.T, key client.ObjectKey) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, key, &d); err != nil {
			return false, err
		}
		want := *d.Spec.Replicas
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.AvailableReplicas == want, nil
	})
	if err != nil {
		t.Fatalf("the operator Deployment %s is not available (%v): status %+v\n%s", key, err, d.Status, describeNamespace(key.Namespace))
	}
	return &d
}

// waitBudget waits until the disruption controller has evaluated the budget: it must count
// every operator Pod as expected and healthy and allow exactly one eviction.
func waitBudget(ctx context.Context, t *testing.T, key client.ObjectKey, replicas int32) {
	t.Helper()
	var pdb policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, key, &pdb); err != nil {
			return false, err
		}
		s := pdb.Status
		return s.ObservedGeneration == pdb.Generation && s.ExpectedPods == replicas && s.CurrentHealthy == replicas, nil
	})
	if err != nil {
		t.Fatalf("the budget %s does not cover the %d operator Pods (%v): status %+v", key, replicas, err, pdb.Status)
	}
	if pdb.Status.DisruptionsAllowed != 1 {
		t.Errorf("the budget %s allows %d of the %d operator Pods to be evicted at once, want 1", key, pdb.Status.DisruptionsAllowed, replicas)
	}
}

func describeNamespace(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	var pods corev1.PodList
	if err := admin.List(ctx, &pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s: phase %s, node %q, conditions %+v\n", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
		}
	}
	var events corev1.EventList
	if err := admin.List(ctx, &events, client.InNamespace(ns)); err == nil {
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				fmt.Fprintf(&b, "warning %s %s: %s: %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}

func createNamespace(ctx context.Context, t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func waitEstablished(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			return false, err
		}
		return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		}), nil
	})
	if err != nil {
		t.Fatalf("CRD %s is not established: %v", name, err)
	}
}

func kindsOf(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func only(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := kindsOf(objs, kind)
	if len(found) != 1 {
		t.Fatalf("the render holds %d %s objects, want 1", len(found), kind)
	}
	return found[0]
}
