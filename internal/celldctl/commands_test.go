package celldctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/syncbuf"
)

// fakeCluster is a snapshot served by client-go's fake clients, which record every request.
type fakeCluster struct {
	kube *kubefake.Clientset
	dyn  *dynfake.FakeDynamicClient
	// log is every request of both clients, in the order they were sent.
	mu  sync.Mutex
	log []k8stesting.Action
}

func toUnstructured(t *testing.T, obj runtime.Object, kind string) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(v1.GroupVersion.String())
	u.SetKind(kind)
	return u
}

func newFakeCluster(t *testing.T, s *Snapshot, extra ...runtime.Object) *fakeCluster {
	t.Helper()
	var kubeObjs []runtime.Object
	if s.StatefulSet != nil {
		kubeObjs = append(kubeObjs, s.StatefulSet)
	}
	if s.Deployment != nil {
		kubeObjs = append(kubeObjs, s.Deployment)
	}
	for i := range s.ReplicaSets {
		s.ReplicaSets[i].Namespace = fixtureNS
		if s.ReplicaSets[i].Labels == nil {
			s.ReplicaSets[i].Labels = map[string]string{}
		}
		s.ReplicaSets[i].Labels[v1.LabelFleetUID] = fixtureUID
		kubeObjs = append(kubeObjs, &s.ReplicaSets[i])
	}
	for i := range s.Pods {
		kubeObjs = append(kubeObjs, &s.Pods[i])
	}
	for i := range s.Claims {
		kubeObjs = append(kubeObjs, &s.Claims[i])
	}
	for node, zone := range s.Zones {
		kubeObjs = append(kubeObjs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelTopologyZone: zone}}})
	}
	for i, e := range s.Events {
		ev := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: fixtureNS, Name: "ev-" + string(rune('a'+i))},
			EventTime:  metav1.NewMicroTime(e.Last.Time), Type: e.Type, Reason: e.Reason, Note: e.Note,
			Regarding: corev1.ObjectReference{Kind: strings.Split(e.Regarding, "/")[0], Name: strings.Split(e.Regarding, "/")[1]},
		}
		if e.Related != "" {
			ev.Related = &corev1.ObjectReference{Kind: strings.Split(e.Related, "/")[0], Name: strings.Split(e.Related, "/")[1]}
		}
		kubeObjs = append(kubeObjs, ev)
	}
	kubeObjs = append(kubeObjs, extra...)
	var dynObjs []runtime.Object
	dynObjs = append(dynObjs, toUnstructured(t, s.Fleet, "CelldFleet"))
	if s.Reservation != nil {
		dynObjs = append(dynObjs, toUnstructured(t, s.Reservation, "CelldStorageReservation"))
	}
	for i := range s.Previews {
		dynObjs = append(dynObjs, toUnstructured(t, &s.Previews[i], "CelldPreview"))
	}
	scheme := runtime.NewScheme()
	lists := map[schema.GroupVersionResource]string{
		fleetsGVR: "CelldFleetList", reservationsGVR: "CelldStorageReservationList", previewsGVR: "CelldPreviewList",
		httpRoutesGVR: "HTTPRouteList", authzGVR: "AuthorizationPolicyList", peerAuthnGVR: "PeerAuthenticationList",
		{Version: "v1", Resource: "services"}: "ServiceList", {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}: "NetworkPolicyList",
		{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}: "IngressList", {Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}: "PodDisruptionBudgetList",
	}
	c := &fakeCluster{kube: kubefake.NewClientset(kubeObjs...), dyn: dynfake.NewSimpleDynamicClientWithCustomListKinds(scheme, lists, dynObjs...)}
	record := func(a k8stesting.Action) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.log = append(c.log, a)
	}
	recordRequest := func(a k8stesting.Action) (bool, runtime.Object, error) {
		record(a)
		return false, nil, nil
	}
	recordWatch := func(a k8stesting.Action) (bool, watch.Interface, error) {
		record(a)
		return false, nil, nil
	}
	c.kube.PrependReactor("*", "*", recordRequest)
	c.dyn.PrependReactor("*", "*", recordRequest)
	c.kube.PrependWatchReactor("*", recordWatch)
	c.dyn.PrependWatchReactor("*", recordWatch)
	return c
}

func (c *fakeCluster) clients() Clients { return Clients{Kube: c.kube, Dynamic: c.dyn} }

func (c *fakeCluster) actions() []k8stesting.Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]k8stesting.Action(nil), c.log...)
}

// writes are the recorded requests that are not get, list or watch.
func (c *fakeCluster) writes() []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range c.actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a)
		}
	}
	return out
}

// run runs kubectl celld with args against the fake cluster, with input as standard input.
func (c *fakeCluster) run(t *testing.T, input string, args ...string) (string, error) {
	t.Helper()
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	var out bytes.Buffer
	o := &Options{
		Flags:      genericclioptions.NewConfigFlags(false),
		Streams:    genericiooptions.IOStreams{In: strings.NewReader(input), Out: &out, ErrOut: &out},
		Now:        func() time.Time { return now },
		NewClients: func() (Clients, error) { return c.clients(), nil },
	}
	cmd := NewRootCommandWithOptions(o)
	if args[0] == "__complete" { // the last word is the one completed
		args = append([]string{args[0], args[1], "-n", fixtureNS}, args[2:]...)
	} else {
		args = append(args, "-n", fixtureNS)
	}
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestStatusCommandOnlyReads(t *testing.T) {
	for _, name := range []string{"provisioned", "rolling", "blocked", "stopped", "healing", "deployment"} {
		t.Run(name, func(t *testing.T) {
			c := newFakeCluster(t, scenarios[name]())
			for _, args := range [][]string{{"status", fixtureName}, {"status", fixtureName, "-o", "yaml"}, {"status", fixtureName, "-o", "json"}} {
				if _, err := c.run(t, "", args...); err != nil {
					t.Fatalf("%v: %v", args, err)
				}
			}
			if len(c.actions()) == 0 {
				t.Fatal("no request was recorded: the proof would prove nothing")
			}
			if w := c.writes(); len(w) > 0 {
				t.Fatalf("status sent %d requests that are not get, list or watch: %v", len(w), w)
			}
		})
	}
}

func TestStatusCommandMatchesTheModel(t *testing.T) {
	s := provisioned()
	c := newFakeCluster(t, s)
	got, err := c.run(t, "", "status", fixtureName)
	if err != nil {
		t.Fatal(err)
	}
	// Read through the API, the screen is the fixture's (events lose nothing that is shown).
	golden(t, "status-provisioned.golden", got)
}

func TestStatusSaysWhatTheViewRoleCannotRead(t *testing.T) {
	s := provisioned()
	c := newFakeCluster(t, s)
	forbid := func(resource string) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "x", errors.New(`User "dev" cannot get resource at the cluster scope`))
		}
	}
	c.kube.PrependReactor("get", "nodes", forbid("nodes"))
	c.dyn.PrependReactor("get", "celldstoragereservations", forbid("celldstoragereservations.celld.eric.dev"))
	got, err := c.run(t, "", "status", fixtureName)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Could not read",
		"Nodes (members' zones): forbidden",
		"CelldStorageReservation " + s.Fleet.Status.Reservation + ": forbidden",
		"a RoleBinding to the view role does not grant it",
		"pf-0   Running/Ready", // the members are still shown
		"history:     history unknown: the reservation could not be read",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the screen lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "Nodes (members' zones)") != 1 {
		t.Errorf("one refusal of nodes should be reported once:\n%s", got)
	}
}

func TestStatusOfAMissingFleetFails(t *testing.T) {
	c := newFakeCluster(t, provisioned())
	_, err := c.run(t, "", "status", "nope")
	if err == nil || !strings.Contains(err.Error(), "CelldFleet shop/nope not found") {
		t.Fatalf("err = %v", err)
	}
}

// patches are the recorded patch requests: resource[/subresource], type and body.
func (c *fakeCluster) patches() []k8stesting.PatchActionImpl {
	var out []k8stesting.PatchActionImpl
	for _, a := range c.actions() {
		if p, ok := a.(k8stesting.PatchActionImpl); ok {
			out = append(out, p)
		}
	}
	return out
}

func expectOnePatch(t *testing.T, c *fakeCluster, resource, subresource, body string) k8stesting.PatchActionImpl {
	t.Helper()
	p := c.patches()
	if len(p) != 1 || len(c.writes()) != 1 {
		t.Fatalf("want exactly one write, got %v", c.writes())
	}
	if p[0].GetResource().Resource != resource || p[0].GetSubresource() != subresource || p[0].PatchType != types.MergePatchType || string(p[0].Patch) != body {
		t.Fatalf("patch %s/%s %s %s, want %s/%s merge %s", p[0].GetResource().Resource, p[0].GetSubresource(), p[0].PatchType, p[0].Patch, resource, subresource, body)
	}
	return p[0]
}

func TestRestartWritesTheDocumentedPatch(t *testing.T) {
	c := newFakeCluster(t, provisioned())
	out, err := c.run(t, "", "restart", fixtureName, "--yes", "--restart-token", "r2")
	if err != nil {
		t.Fatal(err, out)
	}
	expectOnePatch(t, c, "celldfleets", "", `{"spec":{"maintenance":{"restartToken":"r2"}}}`)
	for _, want := range []string{
		`Rolling restart of CelldFleet shop/pf (restartToken "r1" -> "r2")`,
		`kubectl -n shop patch celldfleet pf --type merge -p '{"spec":{"maintenance":{"restartToken":"r2"}}}'`,
		"every member keeps its disk",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRestartTokenDefaultsToUnixSeconds(t *testing.T) {
	c := newFakeCluster(t, provisioned())
	if _, err := c.run(t, "", "restart", fixtureName, "-y"); err != nil {
		t.Fatal(err)
	}
	expectOnePatch(t, c, "celldfleets", "", `{"spec":{"maintenance":{"restartToken":"1796119200"}}}`)
}

func TestRestartRefusesTheCurrentToken(t *testing.T) {
	c := newFakeCluster(t, provisioned())
	_, err := c.run(t, "", "restart", fixtureName, "-y", "--restart-token", "r1")
	if err == nil || !strings.Contains(err.Error(), "already") {
		t.Fatalf("err = %v", err)
	}
	if w := c.writes(); len(w) > 0 {
		t.Fatalf("wrote %v", w)
	}
}

func TestWriteCommandsAskFirst(t *testing.T) {
	c := newFakeCluster(t, provisioned())
	out, err := c.run(t, "n\n", "pause", fixtureName)
	if !errors.Is(err, errAborted) {
		t.Fatalf("err = %v, want aborted", err)
	}
	if !strings.Contains(out, "Proceed? [y/N]") || !strings.Contains(out, "Pause CelldFleet shop/pf.") {
		t.Errorf("no plan or prompt:\n%s", out)
	}
	if w := c.writes(); len(w) > 0 {
		t.Fatalf("wrote %v after no", w)
	}
	if _, err := c.run(t, "", "pause", fixtureName); !errors.Is(err, errAborted) {
		t.Fatalf("no answer must abort, err = %v", err)
	}
	if _, err := c.run(t, "yes\n", "pause", fixtureName); err != nil {
		t.Fatal(err)
	}
	expectOnePatch(t, c, "celldfleets", "", `{"spec":{"maintenance":{"paused":true}}}`)
}

func TestDryRuns(t *testing.T) {
	c := newFakeCluster(t, provisioned())
	out, err := c.run(t, "", "restart", fixtureName, "--restart-token", "r2", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if w := c.writes(); len(w) > 0 || !strings.Contains(out, "Dry run (client): nothing was sent.") || !strings.Contains(out, `"restartToken":"r2"`) {
		t.Fatalf("client dry run wrote %v or printed no patch:\n%s", w, out)
	}
	if _, err := c.run(t, "", "restart", fixtureName, "--restart-token", "r2", "--dry-run=server"); err != nil {
		t.Fatal(err)
	}
	p := expectOnePatch(t, c, "celldfleets", "", `{"spec":{"maintenance":{"restartToken":"r2"}}}`)
	if len(p.PatchOptions.DryRun) != 1 || p.PatchOptions.DryRun[0] != metav1.DryRunAll {
		t.Fatalf("server dry run sent %+v", p.PatchOptions)
	}
	if _, err := c.run(t, "", "restart", fixtureName, "--dry-run=maybe"); err == nil {
		t.Fatal("an unknown --dry-run was accepted")
	}
}

func TestPauseAndResume(t *testing.T) {
	s := scenarios["paused"]()
	c := newFakeCluster(t, s)
	out, err := c.run(t, "", "pause", fixtureName, "-y")
	if err != nil || !strings.Contains(out, "already paused: nothing to do") || len(c.writes()) > 0 {
		t.Fatalf("pausing a paused fleet: %v %v\n%s", err, c.writes(), out)
	}
	if _, err := c.run(t, "", "resume", fixtureName, "-y"); err != nil {
		t.Fatal(err)
	}
	expectOnePatch(t, c, "celldfleets", "", `{"spec":{"maintenance":{"paused":false}}}`)
}

func TestStopPausesWaitsForTheOperatorThenScales(t *testing.T) {
	s := provisioned()
	// The operator reports the pause: the fake has no operator, so the status already says it.
	for i := range s.Fleet.Status.Conditions {
		if s.Fleet.Status.Conditions[i].Type == v1.ConditionMaintenancePaused {
			s.Fleet.Status.Conditions[i].Status = metav1.ConditionTrue
		}
	}
	c := newFakeCluster(t, s)
	out, err := c.run(t, "", "stop", fixtureName, "-y")
	if err != nil {
		t.Fatal(err, out)
	}
	var writes []string
	for _, a := range c.writes() {
		p := a.(k8stesting.PatchActionImpl)
		writes = append(writes, p.GetResource().Resource+"/"+p.GetSubresource()+" "+string(p.Patch))
	}
	want := []string{`celldfleets/ {"spec":{"maintenance":{"paused":true}}}`, `statefulsets/scale {"spec":{"replicas":0}}`}
	if strings.Join(writes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("writes:\n%s\nwant:\n%s", strings.Join(writes, "\n"), strings.Join(want, "\n"))
	}
	for _, want := range []string{"Full stop of CelldFleet shop/pf", "kubectl -n shop scale statefulset pf --replicas=0", "Every claim (data-pf-0 .. data-pf-2) is kept.", "kubectl celld start pf"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestStopDoesNotScaleBeforeTheOperatorReportsThePause(t *testing.T) {
	c := newFakeCluster(t, provisioned()) // MaintenancePaused stays False: no operator
	_, err := c.run(t, "", "stop", fixtureName, "-y", "--timeout", "700ms")
	if err == nil || !strings.Contains(err.Error(), "the StatefulSet was not scaled") {
		t.Fatalf("err = %v", err)
	}
	for _, p := range c.patches() {
		if p.GetResource().Resource == "statefulsets" {
			t.Fatalf("the StatefulSet was scaled before the operator reported the pause: %s", p.Patch)
		}
	}
}

func TestStopRefusesADeploymentFleet(t *testing.T) {
	c := newFakeCluster(t, scenarios["deployment"]())
	_, err := c.run(t, "", "stop", fixtureName, "-y")
	if err == nil || !strings.Contains(err.Error(), "documents a full stop only for StatefulSet fleets") {
		t.Fatalf("err = %v", err)
	}
	if w := c.writes(); len(w) > 0 {
		t.Fatalf("wrote %v", w)
	}
}

func TestStartUnpausesWithTheNewImageInOneChange(t *testing.T) {
	c := newFakeCluster(t, scenarios["stopped"]())
	image := strings.Replace(provisioned().Fleet.Spec.RuntimeImage, "@sha256:9", "@sha256:0", 1)
	out, err := c.run(t, "", "start", fixtureName, "-y", "--image", image)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"spec": map[string]any{"maintenance": map[string]any{"paused": false}, "runtimeImage": image}})
	expectOnePatch(t, c, "celldfleets", "", string(body))
	if !strings.Contains(out, "Every member returns on its own disk at the declared count (3) in one step.") {
		t.Errorf("output:\n%s", out)
	}
	c = newFakeCluster(t, provisioned())
	if _, err := c.run(t, "", "start", fixtureName, "-y"); err == nil || len(c.writes()) > 0 {
		t.Fatalf("started a running fleet: %v %v", err, c.writes())
	}
}

func TestReplaceMemberNeverWrites(t *testing.T) {
	cases := map[string]struct {
		snap func() *Snapshot
		n    string
		want string
	}{
		"ready":      {provisioned, "1", "It is Ready: there is nothing to replace."},
		"crashloop":  {scenarios["blocked"], "2", "MemberCrashLooping"},
		"lost disk":  {scenarios["healing"], "0", "Its volume no longer exists (claim Lost)"},
		"paused":     {scenarios["paused"], "0", "no member is replaced while paused"},
		"deployment": {scenarios["deployment"], "0", "runs as a Deployment"},
		"no member":  {provisioned, "7", "has no member pf-7"},
		"one down": {func() *Snapshot {
			s := provisioned()
			notReady(&s.Pods[2], "")
			return s
		}, "2", "the operator replaces it on a fresh disk by itself once it has been down for --member-replacement-delay"},
		"two down": {func() *Snapshot {
			s := provisioned()
			notReady(&s.Pods[1], "")
			notReady(&s.Pods[2], "")
			return s
		}, "2", "2 members are down: none is replaced"},
		"image": {func() *Snapshot {
			s := provisioned()
			notReady(&s.Pods[2], "ImagePullBackOff")
			return s
		}, "2", "waits on its image or configuration"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newFakeCluster(t, tc.snap())
			out, err := c.run(t, "y\n", "replace-member", fixtureName, tc.n)
			if !errors.Is(err, ErrNoManualReplacement) {
				t.Fatalf("err = %v", err)
			}
			if w := c.writes(); len(w) > 0 {
				t.Fatalf("replace-member wrote %v", w)
			}
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "docs/lifecycle.md") {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

func TestFleetCompletion(t *testing.T) {
	s := provisioned()
	other := fixtureFleet()
	other.Name = "pg"
	c := newFakeCluster(t, s)
	if err := c.dyn.Tracker().Add(toUnstructured(t, other, "CelldFleet")); err != nil {
		t.Fatal(err)
	}
	out, err := c.run(t, "", "__complete", "status", "p")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "pf\npg\n:4\n") {
		t.Fatalf("completion:\n%s", out)
	}
}

func TestStatusWatchRedrawsOnAChangeAndOnlyReads(t *testing.T) {
	s := provisioned()
	c := newFakeCluster(t, s)
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	out := &syncbuf.Buffer{}
	o := &Options{
		Flags:      genericclioptions.NewConfigFlags(false),
		Streams:    genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out},
		Now:        func() time.Time { return now },
		NewClients: func() (Clients, error) { return c.clients(), nil },
	}
	cmd := NewRootCommandWithOptions(o)
	cmd.SetArgs([]string{"status", fixtureName, "-n", fixtureNS, "--watch"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s; output:\n%s", what, out.String())
			}
			goruntime.Gosched()
		}
	}
	watching := func() bool {
		for _, a := range c.actions() {
			if a.GetVerb() == "watch" && a.GetResource().Resource == "pods" {
				return true
			}
		}
		return false
	}
	waitFor("no watch was opened", watching)
	pod := s.Pods[2].DeepCopy()
	notReady(pod, "CrashLoopBackOff")
	if _, err := c.kube.CoreV1().Pods(fixtureNS).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("no redraw after a Pod changed", func() bool { return strings.Contains(out.String(), "CrashLoopBackOff") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "MEMBER") != 2 || !strings.Contains(out.String(), "\n--- 2026-12-01T10:00:00Z\n") {
		t.Errorf("want two screens separated by a timestamp:\n%s", out.String())
	}
	var writes []string
	for _, a := range c.actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	// The one write is the test's own change of the Pod's status.
	if strings.Join(writes, ",") != "update pods/status" {
		t.Fatalf("status --watch wrote %v", writes)
	}
}
