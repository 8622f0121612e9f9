package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/celldctl"
	"github.com/celld/celld-operator/internal/testsupport/syncbuf"
	"github.com/celld/celld-operator/tests/chart/cases"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// kubectl celld runs in-process, as kubectl runs the plugin: the cobra command with the
// suite's kubeconfig, every request it sends recorded by a wrapped transport.

// pluginRun is one run of kubectl celld.
type pluginRun struct {
	Out      string
	Err      error
	Requests []string // "METHOD /path?query", in order
}

// writes are the requests that are not GET (get, list and watch are all GET).
func (r pluginRun) writes() []string {
	var out []string
	for _, q := range r.Requests {
		if !strings.HasPrefix(q, http.MethodGet+" ") {
			out = append(out, q)
		}
	}
	return out
}

// requestLog records the requests of every client built from a wrapped config.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

type recordingTransport struct {
	next http.RoundTripper
	log  *requestLog
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.log.mu.Lock()
	t.log.reqs = append(t.log.reqs, req.Method+" "+req.URL.RequestURI())
	t.log.mu.Unlock()
	return t.next.RoundTrip(req)
}

func (l *requestLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

// startCelld runs kubectl celld ARGS with input as standard input until it returns or ctx
// ends; wait returns the run.
func startCelld(ctx context.Context, input string, args ...string) (out *syncbuf.Buffer, wait func() pluginRun) {
	log := &requestLog{}
	flags := genericclioptions.NewConfigFlags(true)
	flags.WrapConfigFn = func(c *rest.Config) *rest.Config {
		c = rest.CopyConfig(c)
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recordingTransport{next: rt, log: log} })
		return c
	}
	out = &syncbuf.Buffer{}
	cmd := celldctl.NewRootCommandWithFlags(genericiooptions.IOStreams{In: strings.NewReader(input), Out: out, ErrOut: out}, flags)
	cmd.SetArgs(append([]string{"--kubeconfig", framework.Cluster.Kubeconfig}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	return out, func() pluginRun {
		err := <-done
		return pluginRun{Out: out.String(), Err: err, Requests: log.list()}
	}
}

// celld runs kubectl celld ARGS to completion.
func celld(ctx context.Context, args ...string) pluginRun {
	_, wait := startCelld(ctx, "", args...)
	return wait()
}

// celldOK runs kubectl celld ARGS and fails the spec if it fails.
func celldOK(ctx context.Context, args ...string) pluginRun {
	GinkgoHelper()
	r := celld(ctx, args...)
	Expect(r.Err).NotTo(HaveOccurred(), "kubectl celld %s:\n%s", strings.Join(args, " "), r.Out)
	return r
}

// pluginStatus is kubectl celld status -o json, decoded.
func pluginStatus(ctx context.Context, ns, name string) *celldctl.Status {
	GinkgoHelper()
	r := celldOK(ctx, "status", name, "-n", ns, "-o", "json")
	st := &celldctl.Status{}
	Expect(json.Unmarshal([]byte(r.Out), st)).To(Succeed(), r.Out)
	Expect(r.writes()).To(BeEmpty(), "status wrote")
	return st
}

// goldenScreen is where the local cluster's status screen of a Provisioned fleet is kept;
// CELLD_UPDATE_GOLDEN=1 rewrites it.
var goldenScreen = filepath.Join("..", "..", "internal", "celldctl", "testdata", "e2e-status-provisioned.golden")

var (
	memberRow          = regexp.MustCompile(`(?m)^\d+ .*$`)
	zonePattern        = regexp.MustCompile(`\b([a-z]{2}-[a-z]+-\d)[a-z]\b`)
	nodePattern        = regexp.MustCompile(`\bkwok-([a-z]{2}-[a-z]+-\d)[a-z]-\d\b`)
	reservationPattern = regexp.MustCompile(`\bs3-[0-9a-f]{56}\b`)
)

// normalizeScreen replaces what differs between runs of the local cluster (the namespace, the
// fleet's UID, the node and zone each member landed on, the reservation's name) by fixed
// text of the same width, so the table columns stay aligned. Times are normalised by the
// command itself (--normalize-times).
func normalizeScreen(screen, ns string, uid types.UID) string {
	screen = strings.ReplaceAll(screen, string(uid), "FLEET-UID")
	screen = strings.ReplaceAll(screen, ns, "NS")
	screen = memberRow.ReplaceAllStringFunc(screen, func(row string) string {
		row = nodePattern.ReplaceAllString(row, "kwok-${1}?-?")
		return zonePattern.ReplaceAllString(row, "${1}?")
	})
	return reservationPattern.ReplaceAllString(screen, "s3-RESERVATION")
}

// chartViewRole is the chart's ClusterRole aggregated into the built-in view role.
func chartViewRole() *unstructured.Unstructured {
	GinkgoHelper()
	chrt, err := loader.Load(filepath.Join("..", "..", cases.ChartDir))
	Expect(err).NotTo(HaveOccurred())
	manifest, err := cases.Manifest(chrt, map[string]any{"networkPolicyEnforced": true}, "celld-system")
	Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(manifest, "\n---\n") {
		u := &unstructured.Unstructured{}
		if yaml.Unmarshal([]byte(doc), &u.Object) != nil || u.GetKind() != "ClusterRole" {
			continue
		}
		if u.GetLabels()["rbac.authorization.k8s.io/aggregate-to-view"] == "true" {
			u.SetResourceVersion("")
			return u
		}
	}
	Fail("the chart renders no ClusterRole aggregated into view")
	return nil
}

// untarFiles returns the files of a .tar.gz.
func untarFiles(data []byte) map[string]string {
	GinkgoHelper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	Expect(err).NotTo(HaveOccurred())
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		Expect(err).NotTo(HaveOccurred())
		b, err := io.ReadAll(tr)
		Expect(err).NotTo(HaveOccurred())
		out[h.Name] = string(b)
	}
}

var _ = Describe("kubectl celld", func() {
	var ns string
	const name = "kc"
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "plugin") })

	It("shows a Provisioned fleet on one screen with only get, list and watch requests, also to a namespace viewer", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		waitApplication(ctx, ns, name, metav1.ConditionTrue, v1.ReasonConverged)
		f := getFleet(ctx, ns, name)

		By("the screen, times normalised, is the golden one")
		r := celldOK(ctx, "status", name, "-n", ns, "--normalize-times")
		Expect(r.writes()).To(BeEmpty(), "status sent a write")
		Expect(r.Requests).To(ContainElement(HavePrefix("GET /apis/celld.eric.dev/v1alpha1/namespaces/"+ns+"/celldfleets/"+name)), "nothing recorded the requests")
		// Warning events differ between runs (the scheduler's, the kubelet's): they are checked
		// for shape only.
		screen, warnings, _ := strings.Cut(normalizeScreen(r.Out, ns, f.UID), "\nWarnings")
		if os.Getenv("CELLD_UPDATE_GOLDEN") != "" {
			Expect(os.WriteFile(goldenScreen, []byte(screen), 0o644)).To(Succeed())
		}
		want, err := os.ReadFile(goldenScreen)
		Expect(err).NotTo(HaveOccurred(), "CELLD_UPDATE_GOLDEN=1 writes %s", goldenScreen)
		Expect(screen).To(Equal(string(want)), "the status screen differs from %s (CELLD_UPDATE_GOLDEN=1 rewrites it after review)", goldenScreen)
		Expect(warnings).To(Or(HavePrefix(": none"), HavePrefix(" (last")))

		By("the model says the same")
		st := pluginStatus(ctx, ns, name)
		Expect(st.State).To(Equal(celldctl.StateProvisioned))
		Expect(st.Members).To(HaveLen(3))
		for i, m := range st.Members {
			p := framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))
			Expect(m.Pod).To(Equal(p.Name))
			Expect(m.Node).To(Equal(p.Spec.NodeName))
			Expect(m.Zone).To(Equal(framework.NodeZone(ctx, p.Spec.NodeName)))
			Expect(m.Disk).To(Equal("kept"))
			Expect(m.Revision).To(Equal("current"))
		}
		Expect(st.Reservation.Name).To(Equal(f.Status.Reservation))
		Expect(st.Unreadable).To(BeEmpty())

		By("--watch redraws on a change and only watches")
		watchCtx, stop := context.WithCancel(ctx)
		out, wait := startCelld(watchCtx, "", "status", name, "-n", ns, "--watch")
		framework.EventuallyWithin(ctx, framework.Short, out.String).Should(ContainSubstring("MEMBER"))
		patchFleet(ctx, ns, name, `{"metadata":{"annotations":{"e2e.celld.eric.dev/poke":"1"}}}`)
		framework.EventuallyWithin(ctx, framework.Short, out.String).Should(ContainSubstring("\n--- "), "no redraw after the fleet changed")
		stop()
		w := wait()
		Expect(w.Err).NotTo(HaveOccurred())
		Expect(w.writes()).To(BeEmpty(), "status --watch wrote")
		Expect(w.Requests).To(ContainElement(ContainSubstring("watch=true")))

		By("a user bound to view in the namespace sees the fleet and is told what is cluster-scoped")
		role := chartViewRole()
		switch err := kube().Create(ctx, role); {
		case err == nil:
			DeferCleanup(func(ctx context.Context) { _ = kube().Delete(ctx, role) })
		case !apierrors.IsAlreadyExists(err):
			Expect(err).NotTo(HaveOccurred())
		}
		viewer := "plugin-viewer-" + ns
		Expect(kube().Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: viewer}}})).To(Succeed())
		var view pluginRun
		// The aggregation controller copies the chart's rules into view, and the authorizer
		// learns the binding, within seconds.
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			view = celld(ctx, "status", name, "-n", ns, "--as", viewer)
			g.Expect(view.Err).NotTo(HaveOccurred(), view.Out)
		}).Should(Succeed())
		Expect(view.writes()).To(BeEmpty())
		Expect(view.Out).To(MatchRegexp(`State:\s+Provisioned\n`))
		Expect(view.Out).To(MatchRegexp(name+`-0\s+Running/Ready\s+0\s+kwok-\S+\s+\?\s`), "the zone is unknown without nodes")
		Expect(view.Out).To(ContainSubstring("Could not read"))
		Expect(view.Out).To(MatchRegexp(`Nodes \(members' zones\): forbidden: .*a RoleBinding to the view role does not grant it`))
		Expect(view.Out).To(MatchRegexp(`CelldStorageReservation ` + f.Status.Reservation + `: forbidden: .*cluster-scoped`))
	})

	It("restarts and pauses a fleet with the documented patches, and never replaces a member by hand", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)

		By("dry runs write nothing")
		r := celldOK(ctx, "restart", name, "-n", ns, "--restart-token", "plugin-1", "--dry-run")
		Expect(r.writes()).To(BeEmpty())
		Expect(r.Out).To(ContainSubstring(`kubectl -n ` + ns + ` patch celldfleet kc --type merge -p '{"spec":{"maintenance":{"restartToken":"plugin-1"}}}'`))
		r = celldOK(ctx, "restart", name, "-n", ns, "--restart-token", "plugin-1", "--dry-run=server")
		Expect(r.writes()).To(HaveExactElements(HavePrefix("PATCH /apis/celld.eric.dev/v1alpha1/namespaces/" + ns + "/celldfleets/kc?dryRun=All")))
		Expect(getFleet(ctx, ns, name).Spec.Maintenance).To(BeNil(), "a dry run changed the fleet")

		By("no answer to the prompt writes nothing")
		_, wait := startCelld(ctx, "no\n", "restart", name, "-n", ns)
		r = wait()
		Expect(r.Err).To(MatchError(ContainSubstring("aborted")))
		Expect(r.writes()).To(BeEmpty())

		By("restart rolls every member on its own disk")
		r = celldOK(ctx, "restart", name, "-n", ns, "--restart-token", "plugin-1", "--yes")
		Expect(r.writes()).To(HaveExactElements(HavePrefix("PATCH /apis/celld.eric.dev/v1alpha1/namespaces/" + ns + "/celldfleets/kc")))
		Expect(getFleet(ctx, ns, name).Spec.Maintenance.RestartToken).To(Equal("plugin-1"))
		var rolling *celldctl.Status
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			rolling = pluginStatus(ctx, ns, name)
			g.Expect(rolling.State).To(Equal(celldctl.StateRolling))
			g.Expect(rolling.Rollout).NotTo(BeNil())
			g.Expect(rolling.Rollout.Note).To(BeEmpty())
		}).Should(Succeed(), "status never showed the rollout")
		Expect(rolling.Rollout.Total).To(Equal(int32(3)))
		Expect(rolling.Rollout.Updated).To(BeNumerically("<", 3))
		waitFleetReady(ctx, ns, name, 3)
		for i := range 3 {
			Expect(framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i)).Annotations).To(HaveKeyWithValue(v1.AnnotationRestartToken, "plugin-1"))
		}
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "a restart keeps every disk")

		By("pause and resume")
		celldOK(ctx, "pause", name, "-n", ns, "-y")
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			g.Expect(pluginStatus(ctx, ns, name).State).To(Equal(celldctl.StatePaused))
		}).Should(Succeed())
		Expect(condition(ctx, ns, name, v1.ConditionMaintenancePaused)).To(Equal("True/" + v1.ReasonMaintenancePaused))
		Expect(celldOK(ctx, "pause", name, "-n", ns, "-y").writes()).To(BeEmpty(), "pausing a paused fleet wrote")

		By("replace-member refuses while paused, and when the member is Ready, and writes nothing")
		r = celld(ctx, "replace-member", name, "1", "-n", ns)
		Expect(r.Err).To(MatchError(celldctl.ErrNoManualReplacement))
		Expect(r.Out).To(ContainSubstring("no member is replaced while paused"))
		Expect(r.writes()).To(BeEmpty())

		celldOK(ctx, "resume", name, "-n", ns, "-y")
		framework.EventuallyWithin(ctx, framework.Short, func() string { return condition(ctx, ns, name, v1.ConditionMaintenancePaused) }).
			Should(Equal("False/" + v1.ReasonNotPaused))
		waitFleetReady(ctx, ns, name, 3)
		r = celld(ctx, "replace-member", name, "1", "-n", ns)
		Expect(r.Err).To(MatchError(celldctl.ErrNoManualReplacement))
		Expect(r.Out).To(ContainSubstring("It is Ready: there is nothing to replace."))
		Expect(r.writes()).To(BeEmpty())
		Expect(claimUIDs(ctx, ns)).To(Equal(claims))
		expectNoOperatorDeletes(ns, "kubectl celld restart, pause and resume")
	})

	It("stops a fleet fully and starts it on a new image with every member on its own disk", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)

		r := celldOK(ctx, "stop", name, "-n", ns, "--yes")
		Expect(r.writes()).To(HaveExactElements(
			HavePrefix("PATCH /apis/celld.eric.dev/v1alpha1/namespaces/"+ns+"/celldfleets/kc"),
			HavePrefix("PATCH /apis/apps/v1/namespaces/"+ns+"/statefulsets/kc/scale"),
		))
		Expect(*statefulSetOf(ctx, ns, name).Spec.Replicas).To(BeZero())
		var st *celldctl.Status
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			st = pluginStatus(ctx, ns, name)
			g.Expect(st.State).To(Equal(celldctl.StateStopped))
			g.Expect(st.Members).To(HaveLen(3))
			for _, m := range st.Members {
				g.Expect(m.Phase).To(Equal("Stopped"), "members stop (SIGTERM, then gone)")
			}
		}).Should(Succeed())
		for _, m := range st.Members {
			Expect(m.Disk).To(Equal("kept"))
		}
		// The operator leaves the stopped workload alone while paused.
		Consistently(ctx, func() int32 { return *statefulSetOf(ctx, ns, name).Spec.Replicas }).
			WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(BeZero())
		Expect(celldOK(ctx, "stop", name, "-n", ns, "-y").Out).To(ContainSubstring("already stopped"))

		newImage := strings.Replace(getFleet(ctx, ns, name).Spec.RuntimeImage, "@sha256:9", "@sha256:0", 1)
		r = celldOK(ctx, "start", name, "-n", ns, "--image", newImage, "-y")
		Expect(r.Out).To(ContainSubstring("Every member returns on its own disk at the declared count (3) in one step."))
		Expect(r.writes()).To(HaveLen(1))
		waitFleetReady(ctx, ns, name, 3)
		for i := range 3 {
			Expect(framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i)).Spec.Containers[0].Image).To(Equal(newImage))
		}
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "every member returns on its own disk")
		Expect(pluginStatus(ctx, ns, name).State).To(Equal(celldctl.StateProvisioned))
		expectNoOperatorDeletes(ns, "kubectl celld stop and start")
	})

	It("shows a blocked fleet with how long it has been blocked", func(ctx context.Context) {
		f := persistentFleet(ns, name, 3)
		f.Spec.ServiceAccountName = "missing"
		Expect(kube().Create(ctx, f)).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func() string { return condition(ctx, ns, name, v1.ConditionBlocked) }).
			Should(Equal("True/" + v1.ReasonServiceAccountMissing))
		st := pluginStatus(ctx, ns, name)
		Expect(st.State).To(Equal(celldctl.StateBlocked))
		Expect(st.Blocked.Reason).To(Equal(v1.ReasonServiceAccountMissing))
		Expect(st.Blocked.Since).NotTo(BeNil())
		r := celldOK(ctx, "status", name, "-n", ns)
		Expect(r.Out).To(MatchRegexp(`Blocked:\s+ServiceAccountMissing for \S+, since `))
		Expect(r.Out).To(ContainSubstring("missing"))
		// A restart of a blocked fleet says it waits for the blocker.
		Expect(celldOK(ctx, "restart", name, "-n", ns, "--dry-run").Out).To(ContainSubstring("The fleet is Blocked (ServiceAccountMissing)"))
	})

	It("shows a healing fleet and the member's last self-healing action", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		before := claimUIDs(ctx, ns)
		Expect(framework.Cluster.Faults.LoseVolume(ctx, ns, "data-"+name+"-1")).To(Succeed())
		// The disk is lost at once; the operator then replaces the member: the screen shows one
		// or the other (a lost disk, a replacement hold or the healing reason) before it is done.
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			st := pluginStatus(ctx, ns, name)
			m := st.Members[1]
			g.Expect(st.State == celldctl.StateHealing || m.Disk == "lost" || m.Held).To(BeTrue(), "state %s, member 1 %+v", st.State, m)
		}).Should(Succeed())
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			g.Expect(claimUIDs(ctx, ns)["data-"+name+"-1"]).NotTo(Equal(before["data-"+name+"-1"]))
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			st := pluginStatus(ctx, ns, name)
			g.Expect(st.Members[1].Healing).NotTo(BeNil())
			g.Expect(st.Members[1].Healing.Reason).To(Equal(v1.EventMemberDiskLost))
			g.Expect(st.Members[0].Healing).To(BeNil())
			g.Expect(st.Warnings).To(ContainElement(HaveField("Reason", v1.EventMemberDiskLost)))
		}).Should(Succeed())
		r := celldOK(ctx, "status", name, "-n", ns)
		Expect(r.Out).To(MatchRegexp(name + `-1\s.*MemberDiskLost \S+ ago`))
	})

	It("writes a support bundle free of a planted secret value, and writes nothing to the cluster", func(ctx context.Context) {
		planted := "plugin-planted-" + strings.ReplaceAll(ns, "-", "")
		Expect(kube().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kc-auth"},
			StringData: map[string]string{"token": planted}})).To(Succeed())
		f := persistentFleet(ns, name, 3)
		f.Spec.Env = []v1.EnvVar{{Name: "CELLD_E2E_TOKEN", SecretKeyRef: &v1.SecretKeyRef{Name: "kc-auth", Key: "token"}}}
		f.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"note":"` + planted + `"}`}
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		f = getFleet(ctx, ns, name)
		// Someone pasted the token into an event about the fleet, and the operator's log has it.
		Expect(framework.Cluster.Client.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kc.pasted"}, EventTime: metav1.NowMicro(),
			ReportingController: "e2e", ReportingInstance: "e2e", Action: "Paste", Type: corev1.EventTypeWarning, Reason: "Pasted",
			Regarding: corev1.ObjectReference{Kind: "CelldFleet", APIVersion: v1.GroupVersion.String(), Namespace: ns, Name: name, UID: f.UID},
			Note:      "the token is " + planted,
		}, metav1.CreateOptions{})).Error().NotTo(HaveOccurred())
		opLog, err := os.ReadFile(filepath.Join(artifactsDir(), "operator.log"))
		Expect(err).NotTo(HaveOccurred())
		logFile := filepath.Join(GinkgoT().TempDir(), "operator.log")
		leak := fmt.Sprintf(`{"level":"error","msg":"Reconciler error","CelldFleet":{"name":%q,"namespace":%q},"error":"token %s"}`, name, ns, planted)
		Expect(os.WriteFile(logFile, append(opLog, []byte(leak+"\n")...), 0o600)).To(Succeed())

		bundle := filepath.Join(GinkgoT().TempDir(), "bundle.tar.gz")
		r := celldOK(ctx, "report", name, "-n", ns, "--output-file", bundle, "--operator-log", logFile)
		Expect(r.writes()).To(BeEmpty(), "report wrote to the cluster")
		data, err := os.ReadFile(bundle)
		Expect(err).NotTo(HaveOccurred())
		files := untarFiles(data)
		Expect(files).To(HaveKey("fleet.yaml"))
		Expect(files).To(HaveKey("workload.yaml"))
		Expect(files).To(HaveKey("reservation.yaml"))
		Expect(files).To(HaveKey("children.yaml"))
		for i := range 3 {
			Expect(files).To(HaveKey(fmt.Sprintf("describe/%s-%d.txt", name, i)))
		}
		Expect(files["events.txt"]).To(ContainSubstring("the token is REDACTED"))
		Expect(files["operator.log"]).To(ContainSubstring(`"fleet":"`+ns+"/"+name+`"`), "the operator's mutation lines about the fleet")
		Expect(files["operator.log"]).To(ContainSubstring("token REDACTED"))
		Expect(files["children.yaml"]).To(ContainSubstring("name: " + name + "-peers"))
		for file, content := range files {
			for _, form := range []string{planted, base64.StdEncoding.EncodeToString([]byte(planted)), "kc-auth"} {
				Expect(content).NotTo(ContainSubstring(form), "%s holds %q", file, form)
			}
		}
		// The report read its members' Pods, which do carry the reference.
		sts := statefulSetOf(ctx, ns, name)
		Expect(asJSON(sts.Spec.Template.Spec.Containers)).To(ContainSubstring("kc-auth"), "the planted reference must be there to be redacted")
	})
})
