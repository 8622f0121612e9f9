package celldsim

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/workload"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/internal/testsupport/syncbuf"
)

// testMember is a member of a powered pod without its goroutines: the test drives step itself.
// Its IP is a loopback address no local cluster hands out (their pod CIDRs are 127.B.N.0/24
// with N from 1), one per test, since a closed listener is released asynchronously.
func testMember(memberIP string, env []corev1.EnvVar) (*member, *syncbuf.Buffer) {
	out := &syncbuf.Buffer{}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "f-0", Namespace: "ns", UID: "uid-f-0"},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: ContainerName, Env: env}}},
		Status:     corev1.PodStatus{PodIP: memberIP},
	}
	m := &member{s: &Simulator{log: log.New(out, "", 0)}, uid: pod.UID, ns: pod.Namespace, name: pod.Name,
		ip: memberIP, node: "n1", pod: pod, powered: true,
		k: knobs{env: podEnv(pod), annotations: pod.Annotations, overrides: map[string]string{}}}
	m.status = ourStatus(pod)
	return m, out
}

func plain(pairs ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	return out
}

// started retries a start until the process runs, like the member's next tick after a bind that
// failed because a previous test's listener is still closing; a refused env never runs.
func started(t *testing.T, out *syncbuf.Buffer, start func() bool) {
	t.Helper()
	refused := strings.Count(out.String(), "Error:")
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		if start() {
			return true, nil
		}
		if strings.Count(out.String(), "Error:") > refused {
			return false, errors.New("the env was refused")
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the process did not start (%v); log:\n%s", err, out)
	}
}

// terminated is the container state the kubelet would be told about.
func terminated(t *testing.T, m *member) *corev1.ContainerStateTerminated {
	t.Helper()
	var patch struct {
		Status struct {
			ContainerStatuses []corev1.ContainerStatus `json:"containerStatuses"`
		} `json:"status"`
	}
	if err := json.Unmarshal(m.statusPatch(m.proc != nil && m.probeOK), &patch); err != nil {
		t.Fatal(err)
	}
	if len(patch.Status.ContainerStatuses) != 1 {
		t.Fatalf("want the celld container's status, got %+v", patch.Status.ContainerStatuses)
	}
	cs := patch.Status.ContainerStatuses[0]
	if cs.Ready {
		t.Error("a container that exited must not be Ready")
	}
	return cs.State.Terminated
}

func TestARefusedEnvExitsOneAtStartUpAndRetriesAfterTheRestartDelay(t *testing.T) {
	m, out := testMember("127.213.0.9", plain("CELLD_BUCKET=s3://b", "CELLD_DURABILITY=disk", "CELLD_SIM_RESTART_MS=5000",
		"CELLD_SIM_LEASE_MS=0"))
	m.startProc(time.Now(), false)

	if m.proc != nil || m.phaseName() != "EXITED" {
		t.Fatalf("the process must have exited at start-up, phase %s", m.phaseName())
	}
	const msg = "Error: CELLD_DURABILITY must be `bucket` or `fleet`, got \"disk\""
	if !strings.Contains(out.String(), "ns/f-0 "+msg) {
		t.Errorf("the simulator log must carry celld's %q, got:\n%s", msg, out)
	}
	term := terminated(t, m)
	if term == nil || term.ExitCode != 1 || term.Reason != "Error" || !strings.Contains(term.Message, msg) {
		t.Fatalf("container state must be Terminated, exit 1, reason Error, got %+v", term)
	}
	if m.status.RestartCount != 0 {
		t.Errorf("the first start is no restart, restartCount %d", m.status.RestartCount)
	}

	// the restart delay is CELLD_SIM_RESTART_MS after the exit, as for a crash
	exited := m.exitedAt
	m.step(exited.Add(4999 * time.Millisecond))
	if m.status.RestartCount != 0 || m.status.State.Terminated == nil {
		t.Fatalf("no restart before CELLD_SIM_RESTART_MS, restartCount %d", m.status.RestartCount)
	}
	m.step(exited.Add(5000 * time.Millisecond))
	if m.status.RestartCount != 1 || m.proc != nil {
		t.Fatalf("the restart must run celld again and exit again, restartCount %d", m.status.RestartCount)
	}
	if last := m.status.LastTerminationState.Terminated; last == nil || last.ExitCode != 1 {
		t.Errorf("lastState must keep the previous exit 1, got %+v", m.status.LastTerminationState)
	}
	if got := strings.Count(out.String(), msg); got != 2 {
		t.Errorf("each start logs the error once, got %d", got)
	}

	// a fixed value (here a runtime override of celld's variable) starts normally
	m.k.overrides["CELLD_DURABILITY"] = "bucket"
	started(t, out, func() bool { m.step(m.exitedAt.Add(5 * time.Second)); return m.proc != nil })
	defer m.proc.close()
	if m.status.RestartCount != 2 || m.status.State.Running == nil {
		t.Errorf("want a running container after 2 restarts, got %+v", m.status)
	}
}

func TestTheSimulatorsKnobsNeverRefuseTheStart(t *testing.T) {
	m, out := testMember("127.213.0.10", plain("CELLD_SIM_RESTART_MS=later", "CELLD_SIM_DRAIN_STALL=maybe", "CELLD_LOG=debug", "CELLD_SIM_FEATURES=none"))
	started(t, out, func() bool { m.startProc(time.Now(), false); return m.proc != nil })
	if strings.Contains(out.String(), "Error:") {
		t.Fatalf("CELLD_SIM_* and unknown CELLD_* names are not celld's to refuse; log:\n%s", out)
	}
	m.proc.close()
}

func TestAKnobAnnotationCanHandCelldABadValue(t *testing.T) {
	m, out := testMember("127.213.0.11", plain("CELLD_BUCKET=s3://b"))
	m.k.annotations = map[string]string{AnnotationPrefix + "CELLD_TTL_MS": "0", KillAnnotation: "2026-01-01T00:00:00Z"}
	m.startProc(time.Now(), false)
	if m.proc != nil || !strings.Contains(out.String(), "Error: CELLD_TTL_MS must be a positive integer") {
		t.Fatalf("the annotation's value is what celld sees; log:\n%s", out)
	}
}

func TestContainerEnvKeepsSecretValuesOpaque(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "f-0", UID: "u"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar", Env: plain("CELLD_DURABILITY=disk")}, {Name: ContainerName, Env: []corev1.EnvVar{
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "HOST", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
			{Name: "CELLD_EXPORT_SINK", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "sink"}}},
			{Name: "CELLD_ADVERTISE", Value: "$(POD_IP):8081"},
			{Name: "CELLD_OTEL", Value: "http://$(TOKEN)/x"},
		}}}},
		Status: corev1.PodStatus{PodIP: "10.0.0.4"},
	}
	env, opaque := containerEnv(pod)
	if env["CELLD_ADVERTISE"] != "10.0.0.4:8081" || env["POD_IP"] != "10.0.0.4" {
		t.Errorf("field references resolve like the kubelet's, got %v", env)
	}
	for _, n := range []string{"HOST", "TOKEN", "CELLD_EXPORT_SINK", "CELLD_OTEL"} {
		if _, ok := env[n]; ok || !opaque[n] {
			t.Errorf("%s must be opaque (value unknown to the simulator): env %v opaque %v", n, env, opaque)
		}
	}
	if _, ok := env["CELLD_DURABILITY"]; ok {
		t.Error("only the celld container's env counts")
	}
}

// Every sample fleet's member env, as the operator renders it, must pass celld's start-up
// validation: otherwise the sample would crash-loop on a real node and on the simulator.
func TestTheOperatorsSampleFleetsPassCelldsStartUpValidation(t *testing.T) {
	paths, err := filepath.Glob("../../config/samples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range paths {
		f, err := corpus.ReadSample(path)
		if err != nil {
			t.Fatal(err)
		}
		if f == nil {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		f.Namespace, f.UID = "apps", types.UID("3f9a1c2e-7b4d-4e8f-9a0b-1c2d3e4f5a6b")
		f.Default()
		if errs := f.Validate(); len(errs) > 0 {
			t.Fatalf("%s: the sample must be valid: %v", name, errs)
		}
		tmpl := workload.PodTemplate(f, workload.Options{})
		for _, ip := range []string{"10.12.0.7", "127.100.3.4"} { // a cluster's pod IP and the local cluster's
			pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec, Status: corev1.PodStatus{PodIP: ip}}
			pod.Name, pod.Namespace, pod.UID = v1.MemberName(f.Name, 2), f.Namespace, "0b6f4d2a-1c3e-4f5a-8b7c-9d0e1f2a3b4c"
			env, opaque := containerEnv(pod)
			if len(env) < 10 {
				t.Fatalf("%s: the celld container's env was not found: %v", name, env)
			}
			if err := validateEnv(env, opaque, nil); err != nil {
				t.Errorf("%s (pod IP %s): celld would exit 1 at start-up: Error: %v\nenv %v\nfrom Secrets %v", name, ip, err, env, opaque)
			}
			if name == "export-kafka" {
				// the sample needs the -kafka image: on a plain one celld refuses the sink
				env[KnobFeatures] = "none"
				if err := validateEnv(env, opaque, nil); err == nil || !strings.Contains(err.Error(), "export-kafka feature") {
					t.Errorf("export-kafka on a plain image must be refused, got %v", err)
				}
			}
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d sample fleets found", checked)
	}
}
