package bundle

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/workload"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// scc is the part of an OpenShift SecurityContextConstraints that can be checked against a Pod
// template without a cluster: the strategies of restricted-v2 and nonroot-v2 as OpenShift 4.11
// and later ship them. The namespace UID range is the one OpenShift annotates each namespace
// with (openshift.io/sa.scc.uid-range, a block of 10000 from 1000000000 up); any block gives the
// same verdict for a fixed UID below 1000000000.
type scc struct {
	name string
	// runAsUser: "MustRunAsRange" (a set UID must be inside the namespace range) or
	// "MustRunAsNonRoot" (any UID but 0; without one, runAsNonRoot must be true).
	runAsUser string
	// fsGroup: "MustRunAs" (inside the range) or "RunAsAny".
	fsGroup              string
	rangeMin, rangeMax   int64
	allowedCapabilities  []corev1.Capability
	allowPrivilegeEscala bool
	volumes              []string
}

var sccVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}

var (
	restrictedV2 = scc{name: "restricted-v2", runAsUser: "MustRunAsRange", fsGroup: "MustRunAs",
		rangeMin: 1000650000, rangeMax: 1000659999, allowedCapabilities: []corev1.Capability{"NET_BIND_SERVICE"}, volumes: sccVolumes}
	nonrootV2 = scc{name: "nonroot-v2", runAsUser: "MustRunAsNonRoot", fsGroup: "RunAsAny",
		rangeMin: 1000650000, rangeMax: 1000659999, allowedCapabilities: []corev1.Capability{"NET_BIND_SERVICE"}, volumes: sccVolumes}
)

// admit returns why the SCC would refuse the Pod (nil: admitted). Where the SCC defaults a field
// the Pod leaves unset (runAsUser from the range, seccomp runtime/default, dropping ALL,
// allowPrivilegeEscalation false), leaving it unset is admitted.
func (s scc) admit(pod corev1.PodSpec, claims []corev1.PersistentVolumeClaim) []string {
	var why []string
	refuse := func(format string, args ...any) { why = append(why, fmt.Sprintf(format, args...)) }
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		refuse("host namespaces")
	}
	inRange := func(id int64) bool { return id >= s.rangeMin && id <= s.rangeMax }
	checkUser := func(where string, uid *int64, nonRoot *bool) {
		switch {
		case uid == nil:
		case s.runAsUser == "MustRunAsRange" && !inRange(*uid):
			refuse("%s runAsUser %d is outside the namespace range %d-%d", where, *uid, s.rangeMin, s.rangeMax)
		case s.runAsUser == "MustRunAsNonRoot" && *uid == 0:
			refuse("%s runAsUser 0", where)
		}
		if nonRoot != nil && !*nonRoot && s.runAsUser == "MustRunAsNonRoot" {
			refuse("%s runAsNonRoot false", where)
		}
	}
	checkSeccomp := func(where string, p *corev1.SeccompProfile) {
		if p != nil && p.Type != corev1.SeccompProfileTypeRuntimeDefault {
			refuse("%s seccomp profile %s (only runtime/default)", where, p.Type)
		}
	}
	podUser, podNonRoot := (*int64)(nil), (*bool)(nil)
	if sc := pod.SecurityContext; sc != nil {
		podUser, podNonRoot = sc.RunAsUser, sc.RunAsNonRoot
		checkUser("the Pod's", sc.RunAsUser, sc.RunAsNonRoot)
		if sc.FSGroup != nil && s.fsGroup == "MustRunAs" && !inRange(*sc.FSGroup) {
			refuse("the Pod's fsGroup %d is outside the namespace range %d-%d", *sc.FSGroup, s.rangeMin, s.rangeMax)
		}
		if sc.SELinuxOptions != nil {
			refuse("the Pod sets seLinuxOptions (the SCC assigns the namespace's MCS label)")
		}
		if len(sc.Sysctls) > 0 {
			refuse("the Pod sets sysctls")
		}
		checkSeccomp("the Pod's", sc.SeccompProfile)
	}
	for _, v := range pod.Volumes {
		if t := volumeType(v.VolumeSource); !slices.Contains(s.volumes, t) {
			refuse("volume %s of type %s", v.Name, t)
		}
	}
	if len(claims) > 0 && !slices.Contains(s.volumes, "persistentVolumeClaim") {
		refuse("persistentVolumeClaim volumes")
	}
	containers := append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...)
	for _, c := range containers {
		where := "container " + c.Name + "'s"
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				refuse("%s host port %d", where, p.HostPort)
			}
		}
		sc := c.SecurityContext
		if sc == nil {
			if s.runAsUser == "MustRunAsNonRoot" && podUser == nil && (podNonRoot == nil || !*podNonRoot) {
				refuse("%s user is unknown: set runAsNonRoot or a non-zero runAsUser", where)
			}
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			refuse("%s privileged", where)
		}
		if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation && !s.allowPrivilegeEscala {
			refuse("%s allowPrivilegeEscalation true", where)
		}
		if sc.Capabilities != nil {
			for _, add := range sc.Capabilities.Add {
				if !slices.Contains(s.allowedCapabilities, add) {
					refuse("%s adds capability %s", where, add)
				}
			}
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			refuse("%s procMount %s", where, *sc.ProcMount)
		}
		if sc.SELinuxOptions != nil {
			refuse("%s seLinuxOptions", where)
		}
		checkSeccomp(where, sc.SeccompProfile)
		checkUser(where, sc.RunAsUser, sc.RunAsNonRoot)
		if s.runAsUser == "MustRunAsNonRoot" && sc.RunAsUser == nil && podUser == nil &&
			(sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot) && (podNonRoot == nil || !*podNonRoot) {
			refuse("%s user is unknown: set runAsNonRoot or a non-zero runAsUser", where)
		}
	}
	sort.Strings(why)
	return why
}

func volumeType(v corev1.VolumeSource) string {
	switch {
	case v.ConfigMap != nil:
		return "configMap"
	case v.CSI != nil:
		return "csi"
	case v.DownwardAPI != nil:
		return "downwardAPI"
	case v.EmptyDir != nil:
		return "emptyDir"
	case v.Ephemeral != nil:
		return "ephemeral"
	case v.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case v.Projected != nil:
		return "projected"
	case v.Secret != nil:
		return "secret"
	case v.HostPath != nil:
		return "hostPath"
	default:
		return "other"
	}
}

// fleetsToRender are every sample fleet and the corpus's minimal fleets of both profiles,
// defaulted as the API server would.
func fleetsToRender(t *testing.T) map[string]*v1.CelldFleet {
	t.Helper()
	out := map[string]*v1.CelldFleet{"corpus persistent": corpus.Persistent(), "corpus bucket": corpus.Bucket()}
	paths, err := filepath.Glob(repo(t, "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		f, err := corpus.ReadSample(p)
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			out["sample "+filepath.Base(p)] = f
		}
	}
	for name, f := range out {
		f.Namespace = "fleets"
		f.Default()
		if errs := f.Validate(); len(errs) > 0 {
			t.Fatalf("%s is not a valid fleet: %v", name, errs)
		}
	}
	if len(out) < 4 {
		t.Fatalf("only %d fleets to render; config/samples went missing", len(out))
	}
	return out
}

// TestFleetPodsUnderOpenShiftSCCs renders the fleet Pod template (workload.PodTemplate, and the
// claims of workload.StatefulSet) for every sample and checks it against restricted-v2 and
// nonroot-v2. The fleet Pods run as the fixed user and fsGroup 10001, which restricted-v2 refuses
// (its UIDs come from the namespace's range), and they need nothing else: nonroot-v2 admits them.
// docs/install.md ("OpenShift") says so and how to grant nonroot-v2; when the template changes
// this test says which statement to update.
func TestFleetPodsUnderOpenShiftSCCs(t *testing.T) {
	for name, f := range fleetsToRender(t) {
		o := workload.Options{OperatorNamespace: "celld-system", OperatorServiceAccount: "celld-operator", ReservationName: "r"}
		tpl := workload.PodTemplate(f, o)
		var claims []corev1.PersistentVolumeClaim
		if f.Spec.Profile == v1.ProfilePersistentFleet {
			claims = workload.StatefulSet(f, o, 3).Spec.VolumeClaimTemplates
			if len(claims) == 0 {
				t.Errorf("%s: a PersistentFleet StatefulSet without claim templates", name)
			}
		}
		sc := tpl.Spec.SecurityContext
		if sc == nil || sc.RunAsUser == nil || sc.FSGroup == nil {
			t.Errorf("%s: the fleet Pod no longer fixes runAsUser and fsGroup; it may run under restricted-v2 now: check and update docs/install.md (OpenShift) and this test", name)
			continue
		}
		want := []string{
			fmt.Sprintf("the Pod's fsGroup %d is outside the namespace range %d-%d", *sc.FSGroup, restrictedV2.rangeMin, restrictedV2.rangeMax),
			fmt.Sprintf("the Pod's runAsUser %d is outside the namespace range %d-%d", *sc.RunAsUser, restrictedV2.rangeMin, restrictedV2.rangeMax),
		}
		if got := restrictedV2.admit(tpl.Spec, claims); !slices.Equal(got, want) {
			t.Errorf("%s under restricted-v2: refused for %q, docs/install.md says only for %q", name, got, want)
		}
		if got := nonrootV2.admit(tpl.Spec, claims); len(got) > 0 {
			t.Errorf("%s under nonroot-v2, which docs/install.md tells OpenShift users to grant: refused for %q", name, got)
		}
		if *sc.RunAsUser == 0 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: the fleet Pod must run as a non-root user and say so (runAsNonRoot)", name)
		}
		c := tpl.Spec.Containers[0].SecurityContext
		if c == nil || c.Capabilities == nil || !slices.Equal(c.Capabilities.Drop, []corev1.Capability{"ALL"}) || c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
			t.Errorf("%s: the celld container must drop ALL capabilities and forbid privilege escalation: %+v", name, c)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: the fleet Pod must ask for the RuntimeDefault seccomp profile", name)
		}
	}
}

// TestOperatorPodUnderRestrictedV2 checks the bundle's operator Deployment: it fixes no UID, so
// restricted-v2 admits it as it is.
func TestOperatorPodUnderRestrictedV2(t *testing.T) {
	deployments, _, _ := unstructured.NestedSlice(csv(t).Object, "spec", "install", "spec", "deployments")
	if len(deployments) != 1 {
		t.Fatalf("the CSV installs %d Deployments, want 1", len(deployments))
	}
	spec, _, _ := unstructured.NestedMap(deployments[0].(map[string]any), "spec")
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"spec": spec}, &d); err != nil {
		t.Fatal(err)
	}
	if got := restrictedV2.admit(d.Spec.Template.Spec, nil); len(got) > 0 {
		t.Errorf("restricted-v2 refuses the operator Pod: %q", got)
	}
}

// TestSCCCheckRefuses guards the checker: each rule refuses what it should.
func TestSCCCheckRefuses(t *testing.T) {
	yes, uid := true, int64(0)
	unconfined := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	pod := corev1.PodSpec{
		HostNetwork:     true,
		SecurityContext: &corev1.PodSecurityContext{SeccompProfile: unconfined},
		Volumes:         []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{HostPort: 80}}, SecurityContext: &corev1.SecurityContext{
			Privileged: &yes, AllowPrivilegeEscalation: &yes, RunAsUser: &uid,
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}},
		}}},
	}
	got := strings.Join(restrictedV2.admit(pod, nil), "\n")
	for _, want := range []string{"host namespaces", "seccomp profile Unconfined", "volume host of type hostPath", "host port 80",
		"privileged", "allowPrivilegeEscalation true", "adds capability SYS_ADMIN", "runAsUser 0 is outside"} {
		if !strings.Contains(got, want) {
			t.Errorf("restricted-v2 admitted %q; refusals:\n%s", want, got)
		}
	}
	if got := nonrootV2.admit(corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}, nil); len(got) != 1 {
		t.Errorf("nonroot-v2 must refuse a container whose user is unknown, got %q", got)
	}
}
