package celldctl

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// reportOptions are the report command's flags.
type reportOptions struct {
	file              string
	operatorNamespace string
	operatorSelector  string
	operatorLog       string
	since             time.Duration
	tail              int
}

func newReportCommand(o *Options) *cobra.Command {
	ro := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report FLEET",
		Short: "Write a support bundle of the fleet, with every secret redacted",
		Long: `Write a support bundle (a .tar.gz) of a fleet: the fleet, its workload, Pods and claims, its
Services, NetworkPolicies, PodDisruptionBudget, route and mesh policies, its reservation and
previews, the events about it, a description of every member Pod, the status screen, and
the operator's recent log lines about this fleet.

Every Secret value and every secret reference is redacted: Secret data, env secretKeyRef and
envFrom secretRef, the fleet's secretKeyRef, headersSecretKeyRef, propertiesSecretKeyRef and
credentialsSecretName, kubectl's last-applied record, and literal env values named like
secrets. When the Secrets the fleet refers to can be read, their values are also scrubbed
from every file (log lines and event messages included). report only reads.

The operator's log is read from its Pods (--operator-namespace, --operator-selector), or from
a file with --operator-log (make run writes .localcluster/operator.log).`,
		Example: `  kubectl celld report persistent -n celld-demo
  kubectl celld report persistent -n celld-demo --output-file /tmp/persistent.tar.gz --since 2h`,
		Args:              fleetArg,
		ValidArgsFunction: o.completeFleets,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.setup()
			if err != nil {
				return err
			}
			file := ro.file
			if file == "" {
				file = fmt.Sprintf("celld-report-%s-%s-%s.tar.gz", ns, args[0], o.Now().UTC().Format("20060102T150405Z"))
			}
			var buf bytes.Buffer
			b, err := o.BuildReport(cmd.Context(), c, ns, args[0], ro)
			if err != nil {
				return err
			}
			if err := b.WriteTarGz(&buf); err != nil {
				return err
			}
			if file == "-" {
				_, err = o.Streams.Out.Write(buf.Bytes())
				return err
			}
			if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(o.Streams.ErrOut, "wrote %s (%d files", file, len(b.Files))
			if len(b.Problems) > 0 {
				fmt.Fprintf(o.Streams.ErrOut, "; %d things could not be read, listed in README.txt", len(b.Problems))
			}
			fmt.Fprintln(o.Streams.ErrOut, ")")
			return nil
		},
	}
	cmd.Flags().StringVar(&ro.file, "output-file", "", `Where to write the bundle ("-" for standard output); default celld-report-NS-FLEET-TIME.tar.gz`)
	cmd.Flags().StringVar(&ro.operatorNamespace, "operator-namespace", "celld-system", "The operator's namespace")
	cmd.Flags().StringVar(&ro.operatorSelector, "operator-selector", "app.kubernetes.io/name=celld-operator", "The label selector of the operator's Pods")
	cmd.Flags().StringVar(&ro.operatorLog, "operator-log", "", "Read the operator's log from this file instead of its Pods")
	cmd.Flags().DurationVar(&ro.since, "since", 6*time.Hour, "How far back to read the operator's log")
	cmd.Flags().IntVar(&ro.tail, "tail", 2000, "At most this many of the operator's log lines about the fleet (the latest)")
	return cmd
}

// Bundle is a support bundle before it is written: files by name, already redacted.
type Bundle struct {
	Files    map[string][]byte
	Problems []Problem
	Created  time.Time
}

// WriteTarGz writes the bundle as a gzip-compressed tar, files in name order.
func (b *Bundle) WriteTarGz(w io.Writer) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(b.Files))
	for n := range b.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		data := b.Files[n]
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Size: int64(len(data)), ModTime: b.Created, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// child is one of the fleet's static children the bundle reads, by name.
type child struct {
	gvr  schema.GroupVersionResource
	kind string
	name string
}

func children(f *v1.CelldFleet) []child {
	core := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: r}
	}
	np := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	ing := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	pdb := schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
	return []child{
		{core("services"), "Service", f.Name}, {core("services"), "Service", f.Name + "-peers"},
		{np, "NetworkPolicy", f.Name}, {np, "NetworkPolicy", f.Name + "-routing"},
		{pdb, "PodDisruptionBudget", f.Name},
		{httpRoutesGVR, "HTTPRoute", f.Name + "-routing"}, {ing, "Ingress", f.Name + "-routing"},
		{authzGVR, "AuthorizationPolicy", f.Name + "-mesh"}, {peerAuthnGVR, "PeerAuthentication", f.Name + "-mesh"},
	}
}

// BuildReport reads everything the bundle holds and redacts it. It only reads.
func (o *Options) BuildReport(ctx context.Context, c Clients, ns, name string, ro *reportOptions) (*Bundle, error) {
	snap, err := ReadSnapshot(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	now := o.Now()
	b := &Bundle{Files: map[string][]byte{}, Created: now}
	problems := append([]Problem(nil), snap.Problems...)
	f := snap.Fleet
	red := &Redactor{}
	problems = append(problems, o.learnSecretValues(ctx, c, snap, red)...)

	add := func(file string, objs ...map[string]any) {
		var out bytes.Buffer
		for i, obj := range objs {
			red.Object(obj)
			y, err := yaml.Marshal(obj)
			if err != nil {
				continue
			}
			if i > 0 {
				out.WriteString("---\n")
			}
			out.Write(y)
		}
		if out.Len() > 0 {
			b.Files[file] = out.Bytes()
		}
	}
	add("fleet.yaml", snap.FleetRaw.DeepCopy().Object)
	if snap.StatefulSet != nil {
		add("workload.yaml", typed(snap.StatefulSet, "apps/v1", "StatefulSet"))
	}
	if snap.Deployment != nil {
		add("workload.yaml", typed(snap.Deployment, "apps/v1", "Deployment"))
		var rs []map[string]any
		for i := range snap.ReplicaSets {
			rs = append(rs, typed(&snap.ReplicaSets[i], "apps/v1", "ReplicaSet"))
		}
		add("replicasets.yaml", rs...)
	}
	var pods, claims, previews []map[string]any
	for i := range snap.Pods {
		pods = append(pods, typed(&snap.Pods[i], "v1", "Pod"))
	}
	add("pods.yaml", pods...)
	for i := range snap.Claims {
		claims = append(claims, typed(&snap.Claims[i], "v1", "PersistentVolumeClaim"))
	}
	add("claims.yaml", claims...)
	if snap.ReservationRaw != nil {
		add("reservation.yaml", snap.ReservationRaw.DeepCopy().Object)
	}
	for i := range snap.PreviewsRaw {
		previews = append(previews, snap.PreviewsRaw[i].DeepCopy().Object)
	}
	add("previews.yaml", previews...)

	var kids []map[string]any
	for _, ch := range children(f) {
		u, err := c.Dynamic.Resource(ch.gvr).Namespace(ns).Get(ctx, ch.name, metav1.GetOptions{})
		switch {
		case err == nil:
			kids = append(kids, u.Object)
		case apierrors.IsNotFound(err): // not rendered for this fleet, or the API is not installed
		default:
			problems = append(problems, Problem{What: ch.kind + " " + ch.name, Why: explain(err)})
		}
	}
	add("children.yaml", kids...)

	// Member Pod descriptions, from the redacted Pods.
	for _, obj := range pods {
		p := &corev1.Pod{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj, p) == nil {
			b.Files["describe/"+p.Name+".txt"] = []byte(describePod(p, snap, now))
		}
	}
	b.Files["events.txt"] = []byte(eventsTable(snap.Events, now))

	st := BuildStatus(snap, now)
	var screen bytes.Buffer
	_ = Render(&screen, st)
	b.Files["status.txt"] = screen.Bytes()
	if y, err := yaml.Marshal(st); err == nil {
		b.Files["status.yaml"] = y
	}

	logLines, logProblem := o.operatorLog(ctx, c, ns, name, ro)
	if logProblem != nil {
		problems = append(problems, *logProblem)
	}
	b.Files["operator.log"] = []byte(strings.Join(logLines, "\n") + "\n")

	b.Problems = problems
	b.Files["README.txt"] = []byte(readme(ns, name, now, b, len(logLines)))
	for n, data := range b.Files { // the last pass: no secret value survives in any file
		b.Files[n] = []byte(red.Text(string(data)))
	}
	return b, nil
}

// typed converts a client-go object to a map with its apiVersion and kind.
func typed(obj runtime.Object, apiVersion, kind string) map[string]any {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return map[string]any{"apiVersion": apiVersion, "kind": kind, "error": err.Error()}
	}
	m["apiVersion"], m["kind"] = apiVersion, kind
	return m
}

// secretNames are the Secrets the fleet and its Pods refer to.
func secretNames(snap *Snapshot) []string {
	set := map[string]bool{}
	f := snap.Fleet
	for _, e := range f.Spec.Env {
		if e.SecretKeyRef != nil {
			set[e.SecretKeyRef.Name] = true
		}
	}
	if t := f.Spec.Telemetry; t != nil && t.HeadersSecretKeyRef != nil {
		set[t.HeadersSecretKeyRef.Name] = true
	}
	if ep := f.Spec.Storage.Endpoint; ep != nil {
		set[ep.CredentialsSecretName] = true
	}
	if x := f.Spec.Export; x != nil && x.Kafka != nil && x.Kafka.PropertiesSecretKeyRef != nil {
		set[x.Kafka.PropertiesSecretKeyRef.Name] = true
	}
	for _, p := range snap.Pods {
		for _, ctr := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			for _, e := range ctr.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					set[e.ValueFrom.SecretKeyRef.Name] = true
				}
			}
			for _, e := range ctr.EnvFrom {
				if e.SecretRef != nil {
					set[e.SecretRef.Name] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		if n != "" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// learnSecretValues reads the Secrets the fleet refers to, only to scrub their values from
// the bundle's text; nothing of them is written. A Secret that cannot be read is reported:
// structural redaction still applies, but a value that leaked into free text stays unknown.
func (o *Options) learnSecretValues(ctx context.Context, c Clients, snap *Snapshot, red *Redactor) []Problem {
	var problems []Problem
	for _, n := range secretNames(snap) {
		s, err := c.Kube.CoreV1().Secrets(snap.Fleet.Namespace).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				problems = append(problems, Problem{What: "a Secret the fleet refers to (read only to scrub its values from log lines and events)", Why: explainSecret(err)})
			}
			continue
		}
		red.AddSecretValues(s.Data)
		for _, v := range s.StringData {
			red.AddValue(v)
		}
	}
	return problems
}

// explainSecret is explain without the Secret's name, which is itself redacted.
func explainSecret(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden (the view role grants no Secrets): structural redaction applies, but a value that leaked into free text cannot be recognised"
	}
	return "could not be read"
}

// operatorLog returns the operator's log lines about the fleet, the latest ro.tail of them.
func (o *Options) operatorLog(ctx context.Context, c Clients, ns, name string, ro *reportOptions) ([]string, *Problem) {
	var lines []string
	if ro.operatorLog != "" {
		fh, err := os.Open(ro.operatorLog)
		if err != nil {
			return nil, &Problem{What: "operator log " + ro.operatorLog, Why: err.Error()}
		}
		defer fh.Close()
		lines = fleetLines(fh, ns, name)
	} else {
		pods, err := c.Kube.CoreV1().Pods(ro.operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: ro.operatorSelector})
		if err != nil {
			return nil, &Problem{What: "operator Pods in " + ro.operatorNamespace + " (" + ro.operatorSelector + ")",
				Why: explain(err) + "; pass --operator-log FILE with the operator's log, or ask an administrator for it"}
		}
		if len(pods.Items) == 0 {
			return nil, &Problem{What: "operator log", Why: "no Pod in " + ro.operatorNamespace + " matches " + ro.operatorSelector +
				" (set --operator-namespace and --operator-selector, or pass --operator-log FILE)"}
		}
		sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
		since := int64(ro.since.Seconds())
		for _, p := range pods.Items {
			container := p.Annotations["kubectl.kubernetes.io/default-container"]
			if container == "" && len(p.Spec.Containers) > 0 {
				container = p.Spec.Containers[0].Name
			}
			opts := &corev1.PodLogOptions{Container: container}
			if since > 0 {
				opts.SinceSeconds = &since
			}
			rc, err := c.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
			if err != nil {
				return lines, &Problem{What: "log of operator Pod " + p.Namespace + "/" + p.Name, Why: explain(err)}
			}
			for _, l := range fleetLines(rc, ns, name) {
				lines = append(lines, p.Name+" "+l)
			}
			rc.Close()
		}
	}
	if ro.tail > 0 && len(lines) > ro.tail {
		lines = lines[len(lines)-ro.tail:]
	}
	return lines, nil
}

// fleetLines are the lines of an operator log about fleet ns/name: JSON lines whose fleet,
// CelldFleet or namespace and name fields name it (the operator's mutation lines, the
// reconciler's and the application observer's), or other lines that contain NS/NAME.
func fleetLines(r io.Reader, ns, name string) []string {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if aboutFleet(line, ns, name) {
			out = append(out, line)
		}
	}
	return out
}

func aboutFleet(line, ns, name string) bool {
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return strings.Contains(line, ns+"/"+name)
	}
	ref := func(v any) bool {
		switch t := v.(type) {
		case string:
			return t == ns+"/"+name
		case map[string]any:
			return t["namespace"] == ns && t["name"] == name
		}
		return false
	}
	if ref(m["fleet"]) || ref(m["CelldFleet"]) || (m["namespace"] == ns && m["name"] == name) {
		return true
	}
	return strings.Contains(line, `"`+ns+"/"+name+`"`)
}

// describePod is a short description of a member Pod, in the spirit of kubectl describe.
func describePod(p *corev1.Pod, snap *Snapshot, now time.Time) string {
	var b strings.Builder
	tw := printers.GetNewTabWriter(&b)
	w := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	w("Name:\t%s", p.Name)
	w("Namespace:\t%s", p.Namespace)
	w("UID:\t%s", p.UID)
	zone := snap.Zones[p.Spec.NodeName]
	w("Node:\t%s (zone %s)", dash(p.Spec.NodeName), dash(zone))
	w("Phase:\t%s", podPhase(p))
	if p.Status.StartTime != nil {
		w("Started:\t%s (%s ago)", p.Status.StartTime.UTC().Format(time.RFC3339), age(*p.Status.StartTime, metav1.NewTime(now)))
	}
	if p.DeletionTimestamp != nil {
		w("Deleting since:\t%s", p.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	w("IP:\t%s", dash(p.Status.PodIP))
	w("Revision:\t%s", dash(p.Labels[revisionLabel]))
	if len(p.Finalizers) > 0 {
		w("Finalizers:\t%s", strings.Join(p.Finalizers, ", "))
	}
	if len(p.Spec.SchedulingGates) > 0 {
		var g []string
		for _, s := range p.Spec.SchedulingGates {
			g = append(g, s.Name)
		}
		w("Scheduling gates:\t%s", strings.Join(g, ", "))
	}
	for _, k := range sortedKeys(p.Annotations) {
		if strings.HasPrefix(k, "celld.eric.dev/") {
			w("Annotation:\t%s=%s", k, p.Annotations[k])
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(&b, "Conditions:")
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, "  %s=%s %s %s\n", c.Type, c.Status, c.Reason, oneLine(c.Message))
	}
	fmt.Fprintln(&b, "Containers:")
	statuses := map[string]corev1.ContainerStatus{}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		statuses[s.Name] = s
	}
	for _, ctr := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		s := statuses[ctr.Name]
		fmt.Fprintf(&b, "  %s:\n    image: %s\n    ready: %t, restarts: %d\n    state: %s\n", ctr.Name, ctr.Image, s.Ready, s.RestartCount, containerState(s.State))
		if s.LastTerminationState.Terminated != nil {
			fmt.Fprintf(&b, "    last state: %s\n", containerState(s.LastTerminationState))
		}
		if len(ctr.Env) > 0 {
			fmt.Fprintln(&b, "    env:")
			for _, e := range ctr.Env {
				switch {
				case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
					fmt.Fprintf(&b, "      %s: from a Secret (%s)\n", e.Name, Redacted)
				case e.ValueFrom != nil:
					fmt.Fprintf(&b, "      %s: from the Pod or a ConfigMap\n", e.Name)
				default:
					fmt.Fprintf(&b, "      %s=%s\n", e.Name, e.Value)
				}
			}
		}
		for _, e := range ctr.EnvFrom {
			if e.SecretRef != nil {
				fmt.Fprintf(&b, "    envFrom: a Secret (%s)\n", Redacted)
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			fmt.Fprintf(&b, "Volume %s: claim %s\n", v.Name, v.PersistentVolumeClaim.ClaimName)
		}
	}
	fmt.Fprintln(&b, "Events:")
	for _, e := range snap.Events {
		if e.Regarding == "Pod/"+p.Name || e.Related == "Pod/"+p.Name {
			fmt.Fprintf(&b, "  %s ago  %s  %s  %s\n", age(e.Last, metav1.NewTime(now)), e.Type, e.Reason, oneLine(e.Note))
		}
	}
	return b.String()
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "Running since " + s.Running.StartedAt.UTC().Format(time.RFC3339)
	case s.Waiting != nil:
		return "Waiting: " + s.Waiting.Reason + " " + oneLine(s.Waiting.Message)
	case s.Terminated != nil:
		t := s.Terminated
		return fmt.Sprintf("Terminated: exit code %d, %s %s", t.ExitCode, t.Reason, oneLine(t.Message))
	}
	return "unknown"
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func eventsTable(events []Event, now time.Time) string {
	var b strings.Builder
	tw := printers.GetNewTabWriter(&b)
	fmt.Fprintln(tw, "LAST SEEN\tTYPE\tREASON\tOBJECT\tRELATED\tCOUNT\tMESSAGE")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.Last.UTC().Format(time.RFC3339), e.Type, e.Reason, e.Regarding, dash(e.Related), e.Count, oneLine(e.Note))
	}
	_ = tw.Flush()
	_ = now
	return b.String()
}

func readme(ns, name string, now time.Time, b *Bundle, logLines int) string {
	var s strings.Builder
	fmt.Fprintf(&s, "Support bundle of CelldFleet %s/%s, written by kubectl celld report at %s.\n\n", ns, name, now.UTC().Format(time.RFC3339))
	s.WriteString(`Every Secret value and every secret reference is redacted (` + Redacted + `): Secret data, env
secretKeyRef and envFrom secretRef, the fleet's secretKeyRef, headersSecretKeyRef,
propertiesSecretKeyRef and credentialsSecretName, kubectl's last-applied record and literal env
values named like secrets; the values of the Secrets the fleet refers to, when they could be
read, are scrubbed from every file. Check the bundle before you share it all the same.

Files:
`)
	names := make([]string, 0, len(b.Files)+1)
	for n := range b.Files {
		names = append(names, n)
	}
	names = append(names, "README.txt")
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&s, "  %s\n", n)
	}
	fmt.Fprintf(&s, "\noperator.log holds %d lines about the fleet.\n", logLines)
	if len(b.Problems) > 0 {
		s.WriteString("\nCould not be read:\n")
		for _, p := range b.Problems {
			fmt.Fprintf(&s, "  %s: %s\n", p.What, p.Why)
		}
	}
	return s.String()
}
