package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/localcluster"
)

// The operator runs as the shipped binary, two replicas with leader election as the chart
// installs them, each behind its own recording proxy to the API server. The proxy is the
// operator's journal: every write it sends (and the object the API server answers with) is
// judged as it passes, whichever replica sent it, across kills and restarts. It is also how a
// replica is killed between two requests of one action.
const (
	operatorNamespace = "celld-system"
	leaseName         = "celld-operator.celld.eric.dev"
	// restartDelay is how long a killed or stopped replica stays down, as a kubelet's restart.
	restartDelay = 2 * time.Second
)

// The self-healing timers, shortened as in the e2e suite so that replacements happen within a
// campaign; the leader-election timers are controller-runtime's defaults (the chart's).
var operatorTimers = struct{ replacementDelay, absorbWindow, terminationMargin time.Duration }{
	20 * time.Second, 8 * time.Second, 5 * time.Second,
}

// writeRecord is one write the operator sent that the API server accepted.
type writeRecord struct {
	Replica int       `json:"replica"`
	At      time.Time `json:"at"`
	Method  string    `json:"method"`
	Path    string    `json:"path"`
	Status  int       `json:"status"`
	// Namespace, Resource and Name are parsed from Path.
	Namespace string `json:"namespace,omitempty"`
	Resource  string `json:"resource"`
	Name      string `json:"name,omitempty"`
	// Labels and Kind are from the object the API server answered with (none for a Status).
	Kind   string            `json:"kind,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Replicas is the answered object's spec.replicas (a workload or its scale), if any.
	Replicas *int32 `json:"replicas,omitempty"`
	// Intent is the answered object's replacement intent (the annotation
	// celld.eric.dev/replacement-claim a replacement's Pod delete carries), if any.
	Intent string `json:"intent,omitempty"`
}

// operators runs the replicas and their proxies.
type operators struct {
	ctx      context.Context // restarts run until it ends
	bin      string
	dir      string
	upstream *url.URL
	rt       http.RoundTripper
	log      *operatorLog
	// onWrite is called for every accepted write, in the order the proxy saw them.
	onWrite func(writeRecord)

	mu       sync.Mutex
	replicas []*replica
	// armed: SIGKILL the replica that sends the next member or workload DELETE.
	armed     bool
	lastLease map[int]time.Time
	handoffs  []handoff
	kills     int
	exits     []exit
}

type replica struct {
	id      int
	addr    string
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool // by the campaign: not restarted by exit
	// startedAt and backoff: a replica that exits on its own soon after its start (the API
	// server is still away) waits twice as long before the next start, as a kubelet's
	// CrashLoopBackOff does, from restartDelay up to maxCrashBackoff.
	startedAt time.Time
	backoff   time.Duration
}

// maxCrashBackoff caps the wait before restarting a replica that keeps exiting on its own;
// the kubelet's cap is 5 minutes, far longer than an API server restart in the campaign.
const maxCrashBackoff = 16 * time.Second

// crashLoopWindow: a replica that exits on its own within this of its start is crash-looping.
const crashLoopWindow = 10 * time.Second

// handoff is one leader change the campaign caused: from the kill or stop to the next lease
// write by another replica.
type handoff struct {
	Cause string
	From  int
	To    int
	Took  time.Duration
}

func startOperators(ctx context.Context, cfg *rest.Config, bin, dir string, n int, log *operatorLog, onWrite func(writeRecord)) (*operators, error) {
	up, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	o := &operators{ctx: ctx, bin: bin, dir: dir, upstream: up, rt: rt, log: log, onWrite: onWrite, lastLease: map[int]time.Time{}}
	for i := range n {
		r := &replica{id: i}
		if err := o.serveProxy(ctx, r); err != nil {
			return nil, err
		}
		o.replicas = append(o.replicas, r)
		if err := o.start(r); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// serveProxy listens on loopback for replica r and forwards to the API server with the admin
// credentials, streaming watches.
func (o *operators) serveProxy(ctx context.Context, r *replica) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.addr = ln.Addr().String()
	p := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(o.upstream); pr.Out.Host = o.upstream.Host },
		Transport:     recorder{o: o, replica: r.id},
		FlushInterval: -1,
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + r.addr}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "operator"}
	kc.CurrentContext = "proxy"
	return clientcmd.WriteToFile(*kc, o.kubeconfig(r))
}

func (o *operators) kubeconfig(r *replica) string {
	return filepath.Join(o.dir, fmt.Sprintf("operator-%d.kubeconfig", r.id))
}

// start launches replica r's process. Caller must not hold mu.
func (o *operators) start(r *replica) error {
	cmd := exec.Command(o.bin, "--leader-elect=true", "--operator-namespace="+operatorNamespace, "--network-policy-enforced",
		"--storage-provisioners="+localcluster.ProvisionerName,
		"--member-replacement-delay="+operatorTimers.replacementDelay.String(), "--unsafe-allow-short-replacement-delay",
		"--absorb-window="+operatorTimers.absorbWindow.String(), "--termination-margin="+operatorTimers.terminationMargin.String(),
		"--waiting-requeue-period=3s", "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.kubeconfig(r))
	w := o.log.writer(r.id)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start operator replica %d: %w", r.id, err)
	}
	done := make(chan struct{})
	o.mu.Lock()
	r.cmd, r.done, r.stopped, r.startedAt = cmd, done, false, time.Now()
	o.mu.Unlock()
	o.log.note(r.id, "started, pid %d", cmd.Process.Pid)
	go o.supervise(r, cmd, done)
	return nil
}

// supervise waits for one process of replica r and, when it exited on its own (the campaign
// neither killed nor stopped it), restarts it after restartDelay as the chart's Deployment
// would. A replica exits on its own when it loses the lease it held (the API server was
// away longer than the renew deadline): that is the operator's designed reaction, so the
// campaign counts it and brings the replica back.
func (o *operators) supervise(r *replica, cmd *exec.Cmd, done chan struct{}) {
	err := cmd.Wait()
	close(done)
	o.mu.Lock()
	own := r.cmd == cmd
	var delay time.Duration
	if own {
		r.cmd = nil
		delete(o.lastLease, r.id)
		o.exits = append(o.exits, exit{Replica: r.id, At: time.Now(), Err: fmt.Sprint(err)})
		delay = restartDelay
		if time.Since(r.startedAt) < crashLoopWindow && r.backoff > 0 {
			delay = min(2*r.backoff, maxCrashBackoff)
		}
		r.backoff = delay
	}
	o.mu.Unlock()
	if own && o.ctx.Err() == nil {
		o.log.note(r.id, "exited on its own (%v); restarting it in %s", err, delay)
		go o.restartAfter(o.ctx, r, delay)
	}
}

// exit is a replica process that ended without the campaign asking.
type exit struct {
	Replica int
	At      time.Time
	Err     string
}

// Exits returns the replica processes that ended on their own so far.
func (o *operators) Exits() []exit {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]exit(nil), o.exits...)
}

// leader is the replica that last renewed the lease within its duration, or, when none holds
// it (a handoff in progress), the first running replica (held false).
func (o *operators) leader() (r *replica, held bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var best *replica
	var at time.Time
	for _, r := range o.replicas {
		if t := o.lastLease[r.id]; r.cmd != nil && t.After(at) && time.Since(t) < 15*time.Second {
			best, at = r, t
		}
	}
	if best == nil {
		for _, r := range o.replicas {
			if r.cmd != nil {
				return r, false
			}
		}
	}
	return best, best != nil
}

// Kill SIGKILLs the leader and restarts it after restartDelay.
func (o *operators) KillLeader(ctx context.Context) string {
	r, held := o.leader()
	if r == nil {
		return "no replica running"
	}
	cause := "kill-leader"
	if !held {
		cause += " (no replica held the lease: killed a candidate)"
	}
	o.kill(ctx, r, cause)
	return fmt.Sprintf("SIGKILL replica %d: %s", r.id, cause)
}

// Stop stops the leader gracefully (SIGTERM, it releases the lease) and restarts it.
func (o *operators) StopLeader(ctx context.Context) string {
	r, held := o.leader()
	if r == nil {
		return "no replica running"
	}
	cause := "stop-leader"
	if !held {
		cause += " (no replica held the lease: stopped a candidate)"
	}
	o.mu.Lock()
	cmd, done := r.cmd, r.done
	r.cmd, r.backoff = nil, 0
	delete(o.lastLease, r.id)
	o.mu.Unlock()
	if cmd == nil {
		return "no replica running"
	}
	t0 := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	o.log.note(r.id, "stopped gracefully in %s", time.Since(t0).Round(time.Millisecond))
	o.watchHandoff(cause, r.id, t0)
	go o.restartLater(ctx, r)
	return fmt.Sprintf("SIGTERM replica %d: %s", r.id, cause)
}

// Arm makes the next member or workload DELETE a replica sends kill it before it learns the
// answer.
func (o *operators) Arm() {
	o.mu.Lock()
	o.armed = true
	o.mu.Unlock()
}

func (o *operators) kill(ctx context.Context, r *replica, cause string) {
	o.mu.Lock()
	cmd := r.cmd
	r.cmd, r.backoff = nil, 0 // a kill is no crash: the restart starts a fresh backoff
	o.kills++
	// its lease writes say nothing any more: the restarted process is a candidate
	delete(o.lastLease, r.id)
	o.mu.Unlock()
	if cmd == nil {
		return
	}
	t0 := time.Now()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	o.log.note(r.id, "SIGKILL (%s)", cause)
	o.watchHandoff(cause, r.id, t0)
	go o.restartLater(ctx, r)
}

func (o *operators) restartLater(ctx context.Context, r *replica) {
	o.restartAfter(ctx, r, restartDelay)
}

func (o *operators) restartAfter(ctx context.Context, r *replica, delay time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(delay):
	}
	o.mu.Lock()
	if r.cmd != nil {
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	if err := o.start(r); err != nil {
		o.log.note(r.id, "restart failed: %v", err)
	}
}

// watchHandoff records how long until another replica (or the same, restarted) writes the
// lease after from went away at t0.
func (o *operators) watchHandoff(cause string, from int, t0 time.Time) {
	go func() {
		// polls the proxies' record of lease writes for up to two minutes; no handoff by
		// then is simply not recorded
		_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			for id, t := range o.lastLease {
				if t.After(t0) {
					o.handoffs = append(o.handoffs, handoff{Cause: cause, From: from, To: id, Took: t.Sub(t0)})
					return true, nil
				}
			}
			return false, nil
		})
	}()
}

// Handoffs returns the leader changes measured so far.
func (o *operators) Handoffs() []handoff {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]handoff(nil), o.handoffs...)
}

// EnsureRunning starts every replica the campaign left down.
func (o *operators) EnsureRunning() error {
	for _, r := range o.replicas {
		o.mu.Lock()
		down := r.cmd == nil
		o.mu.Unlock()
		if down {
			if err := o.start(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stop ends every replica gracefully.
func (o *operators) StopAll() {
	for _, r := range o.replicas {
		o.mu.Lock()
		cmd, done := r.cmd, r.done
		r.cmd = nil
		o.mu.Unlock()
		if cmd != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
			}
		}
	}
}

// recorder forwards one replica's requests and records what the API server accepted.
type recorder struct {
	o       *operators
	replica int
}

func (rc recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rc.o.rt.RoundTrip(req)
	if err != nil || req.Method == http.MethodGet || req.URL.Query().Has("dryRun") {
		return resp, err
	}
	rec := writeRecord{Replica: rc.replica, At: time.Now(), Method: req.Method, Path: req.URL.Path, Status: resp.StatusCode}
	rec.Namespace, rec.Resource, rec.Name = parsePath(req.URL.Path)
	if strings.HasSuffix(rec.Path, "/leases/"+leaseName) {
		// a killed replica's last renewal may still complete upstream: it holds nothing
		if resp.StatusCode >= 300 || req.Context().Err() != nil {
			return resp, err
		}
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		// a graceful stop's release writes the Lease with no holder: that hands nothing over
		if rerr == nil && leaseHeld(body) {
			rc.o.mu.Lock()
			rc.o.lastLease[rc.replica] = rec.At
			rc.o.mu.Unlock()
		}
		return resp, nil
	}
	if resp.StatusCode >= 300 {
		return resp, err
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr == nil {
		var annotations map[string]string
		rec.Kind, rec.Labels, annotations, rec.Replicas = decodeAnswer(body)
		rec.Intent = annotations[v1.AnnotationReplacementClaim]
	}
	rc.o.onWrite(rec)
	if req.Method == http.MethodDelete && killsOnDelete(rec) {
		rc.o.mu.Lock()
		armed := rc.o.armed
		rc.o.armed = false
		var r *replica
		if armed {
			r = rc.o.replicas[rc.replica]
		}
		rc.o.mu.Unlock()
		if r != nil {
			rc.o.kill(rc.o.ctx, r, "kill-leader-on-delete after "+rec.Method+" "+rec.Path)
			_ = resp.Body.Close()
			return nil, errors.New("chaos: the replica was killed before it read this answer")
		}
	}
	return resp, nil
}

// decodeAnswer reads the kind, labels and spec.replicas of the object the API server answered
// a write with. controller-runtime's client asks for protobuf for the built-in kinds (Pods,
// claims, workloads, Services, policies) and JSON for custom resources, so both are read; an
// answer neither can read leaves kind empty.
func decodeAnswer(body []byte) (kind string, labels, annotations map[string]string, replicas *int32) {
	obj, gvk, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err == nil && gvk != nil {
		if acc, aerr := apimeta.Accessor(obj); aerr == nil {
			labels, annotations = acc.GetLabels(), acc.GetAnnotations()
		}
		switch o := obj.(type) {
		case *appsv1.StatefulSet:
			replicas = o.Spec.Replicas
		case *appsv1.Deployment:
			replicas = o.Spec.Replicas
		case *autoscalingv1.Scale:
			replicas = &o.Spec.Replicas
		}
		return gvk.Kind, labels, annotations, replicas
	}
	var answer struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &answer) == nil {
		return answer.Kind, answer.Metadata.Labels, answer.Metadata.Annotations, nil
	}
	return "", nil, nil, nil
}

// leaseHeld reports whether a Lease the API server answered (JSON or protobuf: client-go's
// leader election asks for protobuf) names a holder.
func leaseHeld(body []byte) bool {
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	l, ok := obj.(*coordinationv1.Lease)
	return err == nil && ok && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
}

// killsOnDelete: the deletes an armed kill waits for.
func killsOnDelete(r writeRecord) bool {
	switch r.Resource {
	case "pods", "persistentvolumeclaims", "statefulsets", "deployments":
		return true
	}
	return false
}

// parsePath splits /api/v1/namespaces/NS/RES/NAME[/sub] and /apis/G/V/... into namespace,
// resource (with subresource as RES/sub) and name.
func parsePath(p string) (ns, resource, name string) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	if resource == "namespaces" && ns == "" && len(parts) == 2 {
		ns = name
	}
	return ns, resource, name
}

// operatorLog is every replica's output, stamped, in one file and a ring of the last minutes
// for the failure report; every line also passes the secret scanner.
type operatorLog struct {
	mu    sync.Mutex
	file  *os.File
	lines []stampedLine
	scan  func(line string)
}

type stampedLine struct {
	at   time.Time
	text string
}

func newOperatorLog(path string, scan func(string)) (*operatorLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &operatorLog{file: f, scan: scan}, nil
}

func (l *operatorLog) add(replica int, text string) {
	now := time.Now()
	line := fmt.Sprintf("%s [r%d] %s", now.Format("15:04:05.000"), replica, text)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.file.WriteString(line + "\n")
	l.lines = append(l.lines, stampedLine{now, line})
	cut := 0
	for cut < len(l.lines) && now.Sub(l.lines[cut].at) > 3*time.Minute {
		cut++
	}
	l.lines = l.lines[cut:]
	if l.scan != nil {
		l.scan(text)
	}
}

func (l *operatorLog) note(replica int, format string, args ...any) {
	l.add(replica, "chaos: "+fmt.Sprintf(format, args...))
}

// writer returns a line-splitting writer for one replica's output.
func (l *operatorLog) writer(replica int) io.Writer {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			l.add(replica, sc.Text())
		}
	}()
	return pw
}

// Last returns the lines of the last d.
func (l *operatorLog) Last(d time.Duration) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if time.Since(s.at) <= d {
			out = append(out, s.text)
		}
	}
	return out
}
