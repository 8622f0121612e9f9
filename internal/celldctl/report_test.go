package celldctl

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

// planted is a secret value the report must never carry, in any form.
const planted = "pl4nted-s3cret-7c1f9a"

// leakySnapshot is a fleet whose secret leaked everywhere a careless user could leak it: a
// Secret the fleet refers to, an event message, kubectl's last-applied record on a Pod, a
// literal env value named like a secret, and the operator's log.
func leakySnapshot() (*Snapshot, *corev1.Secret) {
	s := provisioned()
	s.Pods[0].Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"env":[{"name":"CELLD_AUTH_TOKEN","value":"` + planted + `"}]}`
	s.Pods[1].Spec.Containers[0].Env = append(s.Pods[1].Spec.Containers[0].Env, corev1.EnvVar{Name: "CELLD_API_KEY", Value: "literal-" + planted})
	s.Pods[2].Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "pf-auth"}}}}
	s.Events = append(s.Events, fixtureEvent("Warning", "Debug", "Pod/pf-2", "", "someone pasted the token "+planted+" into an event", 0))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNS, Name: "pf-auth"},
		Data:       map[string][]byte{"token": []byte(planted)},
	}
	return s, secret
}

func operatorLogFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "operator.log")
	lines := []string{
		`{"level":"info","msg":"mutation","fleet":"shop/pf","action":"update","object":"StatefulSet/pf","why":"the Pod template changed"}`,
		`{"level":"info","msg":"Reconciler error","CelldFleet":{"name":"pf","namespace":"shop"},"error":"token ` + planted + ` refused"}`,
		`{"level":"info","logger":"application","msg":"published application observation","fleet":{"name":"pf","namespace":"shop"},"status":"True"}`,
		`{"level":"info","msg":"mutation","fleet":"shop/pf-other","action":"update","object":"StatefulSet/pf-other"}`,
		`{"level":"info","msg":"mutation","fleet":"other/pf","action":"update","object":"StatefulSet/pf"}`,
		`plain text line about shop/pf`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// untar returns the files of a .tar.gz.
func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}

func runReport(t *testing.T, c *fakeCluster, logFile string) map[string]string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if msg, err := c.run(t, "", "report", fixtureName, "--output-file", out, "--operator-log", logFile); err != nil {
		t.Fatal(err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return untar(t, data)
}

// expectNoSecret fails for every file that holds the planted value in any encoding, or the
// name of the Secret it comes from.
func expectNoSecret(t *testing.T, files map[string]string) {
	t.Helper()
	forms := []string{planted, base64.StdEncoding.EncodeToString([]byte(planted)), base64.RawStdEncoding.EncodeToString([]byte(planted)), "pf-auth"}
	for name, content := range files {
		for _, f := range forms {
			if strings.Contains(content, f) {
				t.Errorf("%s holds %q", name, f)
			}
		}
	}
}

func TestReportRedactsAPlantedSecret(t *testing.T) {
	s, secret := leakySnapshot()
	c := newFakeCluster(t, s, secret)
	files := runReport(t, c, operatorLogFile(t))
	expectNoSecret(t, files)

	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{"README.txt", "claims.yaml", "describe/pf-0.txt", "describe/pf-1.txt", "describe/pf-2.txt", "events.txt",
		"fleet.yaml", "operator.log", "pods.yaml", "previews.yaml", "reservation.yaml", "status.txt", "status.yaml", "workload.yaml"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("files %v, want %v", names, want)
	}

	// The references are there, redacted: the bundle still says a Secret was used.
	var fleet map[string]any
	if err := yaml.Unmarshal([]byte(files["fleet.yaml"]), &fleet); err != nil {
		t.Fatal(err)
	}
	env := fleet["spec"].(map[string]any)["env"].([]any)[0].(map[string]any)
	if ref := env["secretKeyRef"].(map[string]any); ref["name"] != Redacted || ref["key"] != Redacted {
		t.Errorf("the fleet's secretKeyRef is %v", ref)
	}
	for _, want := range []string{"secretKeyRef:\n", "name: " + Redacted, "value: " + Redacted} {
		if !strings.Contains(files["pods.yaml"], want) {
			t.Errorf("pods.yaml lacks %q", want)
		}
	}
	if strings.Contains(files["pods.yaml"], "managedFields") {
		t.Error("pods.yaml keeps managedFields")
	}
	if !strings.Contains(files["describe/pf-0.txt"], "CELLD_AUTH_TOKEN: from a Secret ("+Redacted+")") ||
		!strings.Contains(files["describe/pf-0.txt"], "CELLD_DURABILITY=fleet") {
		t.Errorf("describe/pf-0.txt:\n%s", files["describe/pf-0.txt"])
	}

	// The operator's lines about this fleet, and only those.
	log := files["operator.log"]
	if strings.Count(log, "\n") != 4 || strings.Contains(log, "pf-other") || strings.Contains(log, `"other/pf"`) {
		t.Errorf("operator.log:\n%s", log)
	}
	if !strings.Contains(log, "token "+Redacted+" refused") {
		t.Errorf("the leaked log line is not scrubbed but kept:\n%s", log)
	}
	if !strings.Contains(files["events.txt"], "someone pasted the token "+Redacted) {
		t.Errorf("events.txt:\n%s", files["events.txt"])
	}
	if strings.Contains(files["README.txt"], "Could not be read") {
		t.Errorf("README reports problems:\n%s", files["README.txt"])
	}
}

// Without the right to read Secrets (the view role), a value that leaked into free text cannot
// be recognised: the references are still redacted, and README says what was not checked.
func TestReportWithoutSecretAccessSaysSo(t *testing.T) {
	s, secret := leakySnapshot()
	s.Events = s.Events[:len(s.Events)-1] // no free-text leak this time
	c := newFakeCluster(t, s, secret)
	c.kube.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, a.(k8stesting.GetAction).GetName(), errors.New("view"))
	})
	path := filepath.Join(t.TempDir(), "op.log")
	if err := os.WriteFile(path, []byte(`{"msg":"mutation","fleet":"shop/pf"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := runReport(t, c, path)
	expectNoSecret(t, files)
	if !strings.Contains(files["README.txt"], "forbidden (the view role grants no Secrets)") {
		t.Errorf("README.txt:\n%s", files["README.txt"])
	}
}

func TestReportOnlyReads(t *testing.T) {
	s, secret := leakySnapshot()
	c := newFakeCluster(t, s, secret)
	runReport(t, c, operatorLogFile(t))
	if w := c.writes(); len(w) > 0 {
		t.Fatalf("report wrote %v", w)
	}
}

func TestReportReadsTheOperatorPodsLog(t *testing.T) {
	s := provisioned()
	op := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "celld-system", Name: "celld-operator-0", Labels: map[string]string{"app.kubernetes.io/name": "celld-operator"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager"}}}}
	c := newFakeCluster(t, s, op)
	files := runReport(t, c, "")
	// client-go's fake answers every log request with "fake logs".
	if !strings.Contains(files["README.txt"], "operator.log holds 0 lines") {
		t.Errorf("README.txt:\n%s", files["README.txt"])
	}
	var logged bool
	for _, a := range c.actions() {
		if a.GetSubresource() == "log" && a.GetNamespace() == "celld-system" {
			logged = true
		}
	}
	if !logged {
		t.Error("the operator Pod's log was not read")
	}
	c = newFakeCluster(t, s)
	files = runReport(t, c, "")
	if !strings.Contains(files["README.txt"], "no Pod in celld-system matches app.kubernetes.io/name=celld-operator") {
		t.Errorf("README.txt:\n%s", files["README.txt"])
	}
}

func TestRedactorObject(t *testing.T) {
	obj := map[string]any{
		"kind":     "Secret",
		"metadata": map[string]any{"name": "s", "managedFields": []any{"x"}, "annotations": map[string]any{lastApplied: planted}},
		"data":     map[string]any{"k": base64.StdEncoding.EncodeToString([]byte(planted))},
		"spec": map[string]any{
			"telemetry": map[string]any{"headersSecretKeyRef": map[string]any{"name": "h", "key": "k"}},
			"storage":   map[string]any{"endpoint": map[string]any{"credentialsSecretName": "creds", "url": "https://s3"}},
			"env":       []any{map[string]any{"name": "CELLD_PASSWORD", "value": "x"}, map[string]any{"name": "CELLD_MODE", "value": "fast"}},
		},
	}
	(&Redactor{}).Object(obj)
	b, _ := yaml.Marshal(obj)
	got := string(b)
	for _, leak := range []string{planted, "managedFields", "name: h", "creds", "value: x"} {
		if strings.Contains(got, leak) {
			t.Errorf("redacted object holds %q:\n%s", leak, got)
		}
	}
	for _, kept := range []string{"value: fast", "url: https://s3"} {
		if !strings.Contains(got, kept) {
			t.Errorf("redaction removed %q:\n%s", kept, got)
		}
	}
}

func TestRedactorText(t *testing.T) {
	r := &Redactor{}
	r.AddSecretValues(map[string][]byte{"a": []byte(planted), "short": []byte("ab"), "pem": []byte("line-one-secret\nline-two-secret")})
	got := r.Text("x " + planted + " " + base64.StdEncoding.EncodeToString([]byte(planted)) + " ab line-two-secret")
	if got != "x REDACTED REDACTED ab REDACTED" {
		t.Fatalf("got %q", got)
	}
}
