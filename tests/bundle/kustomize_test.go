package bundle

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// kustomize renders a config/ directory with the project's kubectl (bin/kubectl, built by the
// Makefile's tools target before the tests run).
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	kubectl := repo(t, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("bin/kubectl is missing (run `make tools` or the Makefile target that builds it): %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", repo(t, "config", dir))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v\n%s", dir, err, stderr.String())
	}
	path := filepath.Join(t.TempDir(), dir+".yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return objects(t, path)
}

// TestKustomizeDefaultRendersTheInstall renders config/default and checks the install it
// describes: namespace, CRDs, RBAC and a hardened, highly available manager.
func TestKustomizeDefaultRendersTheInstall(t *testing.T) {
	objs := kustomize(t, "default")
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
		default:
			if o.GetNamespace() != "celld-system" {
				t.Errorf("%s %s renders in namespace %q, want celld-system", o.GetKind(), o.GetName(), o.GetNamespace())
			}
		}
	}
	one(t, objs, "Namespace", "celld-system")
	one(t, objs, "CustomResourceDefinition", "celldfleets.celld.eric.dev")
	one(t, objs, "CustomResourceDefinition", "celldstoragereservations.celld.eric.dev")
	one(t, objs, "ServiceAccount", "celld-operator")
	one(t, objs, "ClusterRole", "celld-operator")
	one(t, objs, "Role", "celld-operator-leader-election")
	one(t, objs, "Service", "celld-operator-metrics")

	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(one(t, objs, "Deployment", "celld-operator").Object, &d); err != nil {
		t.Fatal(err)
	}
	checkManagerDeployment(t, &d)
	if img, want := d.Spec.Template.Spec.Containers[0].Image, "ghcr.io/celld/celld-operator:"+releaseVersion(t); img != want {
		t.Errorf("the images transformer set the operator image %s, want the project's image of this release %s", img, want)
	}
}

// checkManagerDeployment holds the rules every install path of the operator must satisfy.
func checkManagerDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("the operator runs %v replicas, want 2 (leader election)", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if d.Spec.Template.Labels["app.kubernetes.io/name"] != "celld-operator" {
		t.Error("operator Pods must be labelled app.kubernetes.io/name: celld-operator; fleet NetworkPolicies admit 8081 from that label")
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("the Pod must run as non-root with the RuntimeDefault seccomp profile")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Error("the container must drop ALL capabilities, forbid privilege escalation and use a read-only root filesystem")
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || (p.HTTPGet.Port.IntValue() != 8082 && p.HTTPGet.Port.String() != "health") {
			t.Errorf("%s probe must be an HTTP probe on the health port 8082", name)
		}
	}
	if !hasPort(c, "health", 8082) {
		t.Error("the container must expose the health port 8082")
	}
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().String() != "100m" || req.Memory().String() != "128Mi" || lim.Memory().String() != "256Mi" {
		t.Errorf("resources = requests %v limits %v, want requests 100m/128Mi and a 256Mi memory limit", req, lim)
	}
	if !contains(c.Args, "--leader-elect") && !contains(c.Args, "--leader-elect=true") {
		t.Error("leader election must be on")
	}
}

func hasPort(c corev1.Container, name string, port int32) bool {
	for _, p := range c.Ports {
		if p.Name == name && p.ContainerPort == port {
			return true
		}
	}
	return false
}

// TestGeneratorResolvesWhatKustomizeRenders compares the generator's own resources resolver
// with kubectl kustomize on config/manifests: the same objects, by kind and name.
func TestGeneratorResolvesWhatKustomizeRenders(t *testing.T) {
	want := ids(kustomize(t, "manifests"))
	resolved, err := gen.Resolve(repo(t, "config", "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	got := ids(resolved)
	if len(got) != len(want) {
		t.Errorf("kustomize renders %d objects, the generator resolves %d:\n kustomize %v\n generator %v", len(want), len(got), want, got)
	}
	for i := range want {
		if i < len(got) && got[i] != want[i] {
			t.Errorf("object %d: kustomize %s, generator %s", i, want[i], got[i])
		}
	}
}

// TestKustomizeBasesRender renders every other base, so a broken kustomization is caught
// where it is, and the fleet Role file (applied per namespace) parses.
func TestKustomizeBasesRender(t *testing.T) {
	for dir, kinds := range map[string]int{"crd": 3, "rbac": 6, "manager": 2, "samples": 17, "scorecard": 1} {
		if n := len(kustomize(t, dir)); n != kinds {
			t.Errorf("config/%s renders %d objects, want %d", dir, n, kinds)
		}
	}
	fleet := objects(t, repo(t, "config", "rbac", "fleet_namespace_role.yaml"))
	one(t, fleet, "Role", "celld-operator-fleet")
	one(t, fleet, "RoleBinding", "celld-operator-fleet")
}

func ids(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(out)
	return out
}
