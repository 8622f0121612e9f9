package operatorupgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

var (
	fleetsGVR       = schema.GroupVersionResource{Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version, Resource: "celldfleets"}
	reservationsGVR = schema.GroupVersionResource{Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version, Resource: "celldstoragereservations"}
)

// monitor is the run's continuous safety monitor. It follows every change of the fleets, their
// members, claims, workloads and reservations through watches (never a poll, so no transient
// state hides between two reads) and every write either operator sends (through the proxies),
// and records the first violation of:
//
//   - no claim, reservation, fleet or workload is deleted or marked for deletion;
//   - no operator sends a DELETE of anything;
//   - a member Pod is deleted, or a member is down, only while its fleet's workload template
//     differs from the template of the phase's start (a rolling update of a changed template),
//     and never more than one member of a fleet is down at once;
//   - no fleet is Blocked, and a fleet is not Ready only while its template changed.
//
// Whether a template changed is decided by a live read of the workload when a Pod event needs
// it, so the order in which separate watches deliver events cannot excuse a deletion.
type monitor struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface

	mu         sync.Mutex
	phase      string
	violations []string
	fleets     map[types.UID]*fleetWatch // by fleet UID
	events     int
	stopped    bool
	resumes    []string // watches the server closed and the monitor resumed
}

// fleetWatch is what the monitor knows of one fleet.
type fleetWatch struct {
	ns, name, kind string // kind: StatefulSet or Deployment
	want           int
	pods           map[string]*corev1.Pod
	baseline       corev1.PodTemplateSpec // the workload's template at the phase's start
	changed        bool                   // the template differs from baseline (this phase)
	changedAt      time.Time
	maxDown        int
	podDeletes     []string
	notReady       []string // Ready transitions away from True, with reason
	lastReady      string
	lastRV         uint64 // of the newest fleet state judged
	memberDownAt   map[string]time.Time
}

func newMonitor(cs kubernetes.Interface, dyn dynamic.Interface) *monitor {
	return &monitor{cs: cs, dyn: dyn, fleets: map[types.UID]*fleetWatch{}}
}

func (m *monitor) violate(format string, args ...any) {
	msg := fmt.Sprintf("[%s] %s: ", m.phase, time.Now().Format(time.RFC3339Nano)) + fmt.Sprintf(format, args...)
	m.violations = append(m.violations, msg)
}

// Resumes returns the watches the server closed and the monitor resumed.
func (m *monitor) Resumes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.resumes...)
}

// Violations returns every violation seen, the first one first.
func (m *monitor) Violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.violations...)
}

// track adds a fleet (its workload must exist).
func (m *monitor) track(ctx context.Context, f *v1.CelldFleet) error {
	kind := "StatefulSet"
	if f.Spec.Profile == v1.ProfileBucket && f.Spec.BucketWorkload != v1.BucketWorkloadOrdered {
		kind = "Deployment"
	}
	fw := &fleetWatch{ns: f.Namespace, name: f.Name, kind: kind, want: int(*f.Spec.Replicas), pods: map[string]*corev1.Pod{}, memberDownAt: map[string]time.Time{}}
	tpl, err := m.template(ctx, fw)
	if err != nil {
		return err
	}
	fw.baseline = tpl
	m.mu.Lock()
	m.fleets[f.UID] = fw
	m.mu.Unlock()
	return nil
}

// startPhase names the phase for the report and takes each workload's current template as the
// baseline: from now on a Pod may be deleted only after it changes.
func (m *monitor) startPhase(ctx context.Context, name string) error {
	m.mu.Lock()
	fleets := make([]*fleetWatch, 0, len(m.fleets))
	for _, fw := range m.fleets {
		fleets = append(fleets, fw)
	}
	m.mu.Unlock()
	base := map[*fleetWatch]corev1.PodTemplateSpec{}
	for _, fw := range fleets {
		tpl, err := m.template(ctx, fw)
		if err != nil {
			return err
		}
		base[fw] = tpl
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.phase = name
	for fw, tpl := range base {
		fw.baseline, fw.changed, fw.changedAt, fw.maxDown, fw.podDeletes, fw.notReady = tpl, false, time.Time{}, 0, nil, nil
	}
	return nil
}

func (m *monitor) template(ctx context.Context, fw *fleetWatch) (corev1.PodTemplateSpec, error) {
	if fw.kind == "Deployment" {
		d, err := m.cs.AppsV1().Deployments(fw.ns).Get(ctx, fw.name, metav1.GetOptions{})
		if err != nil {
			return corev1.PodTemplateSpec{}, err
		}
		return d.Spec.Template, nil
	}
	s, err := m.cs.AppsV1().StatefulSets(fw.ns).Get(ctx, fw.name, metav1.GetOptions{})
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	return s.Spec.Template, nil
}

// templateChanged reports whether fw's workload template now differs from the phase's
// baseline, reading the workload live; once changed, it stays changed for the phase. Caller
// holds mu.
func (m *monitor) templateChanged(fw *fleetWatch) bool {
	if fw.changed {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tpl, err := m.template(ctx, fw)
	if err != nil {
		m.violate("read workload %s/%s to judge a member change: %v", fw.ns, fw.name, err)
		return false
	}
	if !equality.Semantic.DeepEqual(tpl, fw.baseline) {
		fw.changed, fw.changedAt = true, time.Now()
	}
	return fw.changed
}

// run starts the watches; they end with ctx. A watch the server closes is resumed from the
// last resourceVersion it delivered. When that is refused as too old (the API server closes
// every watch of a custom resource when its CRD is replaced, and the new watch cache starts at
// a later resourceVersion), the monitor lists the objects and treats each one whose
// resourceVersion differs from the last it saw as changed (a missing one as deleted) before it
// watches again: every state after the gap is judged, and a change made within the gap (a few
// milliseconds) is seen in its final state, each such relist noted in the report. Fleet
// statuses are also judged as each operator writes them, through the proxies, which has no
// gap at all.
func (m *monitor) run(ctx context.Context, namespaces []string) error {
	var sources []*source
	for _, ns := range namespaces {
		// The members as they are now, then every change from that list on: a watch from
		// nothing would replay them one by one and count the others as down.
		pods, err := m.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID})
		if err != nil {
			return err
		}
		m.mu.Lock()
		for i := range pods.Items {
			if fw := m.fleetOf(pods.Items[i].Labels); fw != nil {
				fw.pods[pods.Items[i].Name] = &pods.Items[i]
			}
		}
		m.mu.Unlock()
		podSrc := &source{what: "Pods in " + ns, rv: pods.ResourceVersion, on: m.onPod,
			watch: func(o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = v1.LabelFleetUID
				return m.cs.CoreV1().Pods(ns).Watch(ctx, o)
			},
			list: func(o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = v1.LabelFleetUID
				return m.cs.CoreV1().Pods(ns).List(ctx, o)
			}}
		podSrc.remember(pods)
		sources = append(sources, podSrc,
			&source{what: "claims in " + ns, on: m.onClaim,
				watch: func(o metav1.ListOptions) (watch.Interface, error) {
					return m.cs.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, o)
				},
				list: func(o metav1.ListOptions) (runtime.Object, error) {
					return m.cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, o)
				}},
			&source{what: "StatefulSets in " + ns, on: m.onWorkload,
				watch: func(o metav1.ListOptions) (watch.Interface, error) {
					return m.cs.AppsV1().StatefulSets(ns).Watch(ctx, o)
				},
				list: func(o metav1.ListOptions) (runtime.Object, error) { return m.cs.AppsV1().StatefulSets(ns).List(ctx, o) }},
			&source{what: "Deployments in " + ns, on: m.onWorkload,
				watch: func(o metav1.ListOptions) (watch.Interface, error) {
					return m.cs.AppsV1().Deployments(ns).Watch(ctx, o)
				},
				list: func(o metav1.ListOptions) (runtime.Object, error) { return m.cs.AppsV1().Deployments(ns).List(ctx, o) }},
			&source{what: "fleets in " + ns, on: m.onFleet,
				watch: func(o metav1.ListOptions) (watch.Interface, error) {
					return m.dyn.Resource(fleetsGVR).Namespace(ns).Watch(ctx, o)
				},
				list: func(o metav1.ListOptions) (runtime.Object, error) {
					return m.dyn.Resource(fleetsGVR).Namespace(ns).List(ctx, o)
				}})
	}
	sources = append(sources, &source{what: "reservations", on: m.onReservation,
		watch: func(o metav1.ListOptions) (watch.Interface, error) {
			return m.dyn.Resource(reservationsGVR).Watch(ctx, o)
		},
		list: func(o metav1.ListOptions) (runtime.Object, error) {
			return m.dyn.Resource(reservationsGVR).List(ctx, o)
		}})
	for _, s := range sources {
		if s.rv == "" { // list first, so the watch replays nothing and the gap check knows everything
			list, err := s.list(metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list %s: %w", s.what, err)
			}
			s.remember(list)
		}
		w, err := s.open()
		if err != nil {
			return fmt.Errorf("watch %s: %w", s.what, err)
		}
		go m.follow(ctx, s, w)
	}
	return nil
}

// source is one watched collection and what the monitor last saw of it.
type source struct {
	what  string
	watch func(metav1.ListOptions) (watch.Interface, error)
	list  func(metav1.ListOptions) (runtime.Object, error)
	on    func(watch.EventType, runtime.Object)
	rv    string
	seen  map[string]runtime.Object // by namespace/name, the last state delivered
}

func (s *source) open() (watch.Interface, error) {
	long := int64(3 * 3600)
	return s.watch(metav1.ListOptions{ResourceVersion: s.rv, AllowWatchBookmarks: true, TimeoutSeconds: &long})
}

func key(o runtime.Object) string {
	a, err := meta.Accessor(o)
	if err != nil {
		return ""
	}
	return a.GetNamespace() + "/" + a.GetName()
}

func resourceVersion(o runtime.Object) string {
	if a, err := meta.Accessor(o); err == nil {
		return a.GetResourceVersion()
	}
	return ""
}

// remember records a list as the last state seen.
func (s *source) remember(list runtime.Object) {
	s.seen = map[string]runtime.Object{}
	items, _ := meta.ExtractList(list)
	for _, o := range items {
		s.seen[key(o)] = o
	}
	if a, err := meta.ListAccessor(list); err == nil {
		s.rv = a.GetResourceVersion()
	}
}

// follow delivers s's events until ctx ends, resuming (or relisting) when the server closes
// the watch.
func (m *monitor) follow(ctx context.Context, s *source, w watch.Interface) {
	for {
		expired := false
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					expired = true
					continue
				}
				m.mu.Lock()
				m.violate("watch of %s failed: %v", s.what, err)
				m.mu.Unlock()
				continue
			}
			if rv := resourceVersion(ev.Object); rv != "" {
				s.rv = rv
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(s.seen, key(ev.Object))
			} else {
				s.seen[key(ev.Object)] = ev.Object
			}
			s.on(ev.Type, ev.Object)
		}
		m.mu.Lock()
		done := ctx.Err() != nil || m.stopped
		m.mu.Unlock()
		if done {
			return
		}
		var err error
		if !expired {
			if w, err = s.open(); err == nil {
				m.note("%s: watch closed by the server, resumed from resourceVersion %s", s.what, s.rv)
				continue
			}
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				m.fail(ctx, "watch of %s closed and cannot resume from resourceVersion %s: %v", s.what, s.rv, err)
				return
			}
		}
		if err := m.relist(s); err != nil {
			m.fail(ctx, "relist %s after its watch expired: %v", s.what, err)
			return
		}
		if w, err = s.open(); err != nil {
			m.fail(ctx, "watch of %s cannot resume after a relist: %v", s.what, err)
			return
		}
	}
}

// relist lists s and delivers every difference from what the monitor last saw.
func (m *monitor) relist(s *source) error {
	from := s.rv
	list, err := s.list(metav1.ListOptions{})
	if err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	var changed []string
	now := map[string]bool{}
	for _, o := range items {
		k := key(o)
		now[k] = true
		prev, ok := s.seen[k]
		switch {
		case !ok:
			changed = append(changed, k+" (new)")
			s.on(watch.Added, o)
		case resourceVersion(prev) != resourceVersion(o):
			changed = append(changed, k)
			s.on(watch.Modified, o)
		}
	}
	for k, o := range s.seen {
		if !now[k] {
			changed = append(changed, k+" (gone)")
			s.on(watch.Deleted, o)
		}
	}
	s.remember(list)
	m.note("%s: watch expired at resourceVersion %s (the server restarted its watch cache); relisted at %s, changed meanwhile: %v", s.what, from, s.rv, changed)
	return nil
}

func (m *monitor) note(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resumes = append(m.resumes, time.Now().Format(time.RFC3339Nano)+" "+fmt.Sprintf(format, args...))
}

func (m *monitor) fail(ctx context.Context, format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ctx.Err() == nil && !m.stopped {
		m.violate(format, args...)
	}
}

// stop ends the monitoring; watches closing afterwards are expected.
func (m *monitor) stop() {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
}

func (m *monitor) fleetOf(labels map[string]string) *fleetWatch {
	return m.fleets[types.UID(labels[v1.LabelFleetUID])]
}

func (m *monitor) onPod(t watch.EventType, obj runtime.Object) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	fw := m.fleetOf(p.Labels)
	if fw == nil {
		return
	}
	prev := fw.pods[p.Name]
	gone := t == watch.Deleted || p.DeletionTimestamp != nil
	if gone && (prev == nil || prev.UID != p.UID || prev.DeletionTimestamp == nil) {
		what := fmt.Sprintf("%s/%s (uid %s) %s", p.Namespace, p.Name, p.UID, map[bool]string{true: "deleted", false: "marked for deletion"}[t == watch.Deleted])
		fw.podDeletes = append(fw.podDeletes, time.Now().Format(time.RFC3339Nano)+" "+what)
		if !m.templateChanged(fw) {
			m.violate("member Pod %s while the %s template of fleet %s/%s is unchanged: a member restarted without a rollout", what, fw.kind, fw.ns, fw.name)
		}
	}
	if t == watch.Deleted {
		delete(fw.pods, p.Name)
	} else {
		fw.pods[p.Name] = p
	}
	m.judgeDown(fw, string(t)+" "+p.Name)
}

// judgeDown counts the fleet's members that are serving (Running, Ready, not terminating).
// Caller holds mu.
func (m *monitor) judgeDown(fw *fleetWatch, after string) {
	var serving []string
	for n, p := range fw.pods {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
			serving = append(serving, n)
		}
	}
	down := fw.want - len(serving)
	if down > fw.maxDown {
		fw.maxDown = down
	}
	if down <= 0 {
		return
	}
	sort.Strings(serving)
	switch {
	case down > 1:
		m.violate("%d of %d members of fleet %s/%s down at once (after %s); serving: [%s]", down, fw.want, fw.ns, fw.name, after, strings.Join(serving, " "))
	case !m.templateChanged(fw):
		m.violate("a member of fleet %s/%s is down (after %s) while its template is unchanged; serving: [%s]", fw.ns, fw.name, after, strings.Join(serving, " "))
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (m *monitor) onClaim(t watch.EventType, obj runtime.Object) {
	c, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	if t == watch.Deleted || c.DeletionTimestamp != nil {
		m.violate("claim %s/%s (uid %s) was deleted (%s)", c.Namespace, c.Name, c.UID, t)
	}
}

func (m *monitor) onWorkload(t watch.EventType, obj runtime.Object) {
	var om metav1.Object
	switch w := obj.(type) {
	case *appsv1.StatefulSet:
		om = w
	case *appsv1.Deployment:
		om = w
	default:
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	if t == watch.Deleted || om.GetDeletionTimestamp() != nil {
		m.violate("workload %T %s/%s was deleted (%s)", obj, om.GetNamespace(), om.GetName(), t)
	}
	if fw := m.fleetOf(om.GetLabels()); fw != nil {
		m.templateChanged(fw)
	}
}

func (m *monitor) onFleet(t watch.EventType, obj runtime.Object) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	f := &v1.CelldFleet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, f); err != nil {
		m.mu.Lock()
		m.violate("decode fleet %s/%s: %v", u.GetNamespace(), u.GetName(), err)
		m.mu.Unlock()
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	if t == watch.Deleted || f.DeletionTimestamp != nil {
		m.violate("fleet %s/%s was deleted (%s)", f.Namespace, f.Name, t)
	}
	fw := m.fleets[f.UID]
	if fw == nil {
		return
	}
	// A state older than one judged already (the proxy and the watch deliver the same write
	// in either order) is not judged again.
	if rv, err := strconv.ParseUint(f.ResourceVersion, 10, 64); err == nil {
		if rv < fw.lastRV {
			return
		}
		fw.lastRV = rv
	}
	if b := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionBlocked); b != nil && b.Status == metav1.ConditionTrue {
		m.violate("fleet %s/%s is Blocked: %s: %s", f.Namespace, f.Name, b.Reason, b.Message)
	}
	r := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionReady)
	state := "absent"
	if r != nil {
		state = string(r.Status) + "/" + r.Reason
	}
	if state != fw.lastReady && fw.lastReady != "" && (r == nil || r.Status != metav1.ConditionTrue) {
		fw.notReady = append(fw.notReady, time.Now().Format(time.RFC3339Nano)+" Ready "+state)
		if !m.templateChanged(fw) {
			m.violate("fleet %s/%s left Ready (%s) while its template is unchanged", f.Namespace, f.Name, state)
		}
	}
	fw.lastReady = state
}

func (m *monitor) onReservation(t watch.EventType, obj runtime.Object) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	if t == watch.Deleted || u.GetDeletionTimestamp() != nil {
		m.violate("reservation %s was deleted (%s)", u.GetName(), t)
	}
}

// onFleetStatus judges a fleet status as an operator wrote it.
func (m *monitor) onFleetStatus(u *unstructured.Unstructured) { m.onFleet(watch.Modified, u) }

// onWrite judges every write an operator sent: no DELETE of anything.
func (m *monitor) onWrite(r writeRecord) {
	if r.Method != "DELETE" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violate("operator %s sent DELETE %s", r.Operator, r.Path)
}

// fleetReport is the monitor's summary of one fleet for a phase.
type fleetReport struct {
	Fleet            string   `json:"fleet"`
	Workload         string   `json:"workload"`
	TemplateChanged  bool     `json:"templateChanged"`
	MaxMembersDown   int      `json:"maxMembersDown"`
	MemberPodDeletes []string `json:"memberPodDeletes,omitempty"`
	ReadyLeft        []string `json:"readyLeft,omitempty"`
}

func (m *monitor) report() []fleetReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []fleetReport
	for _, fw := range m.fleets {
		out = append(out, fleetReport{Fleet: fw.ns + "/" + fw.name, Workload: fw.kind, TemplateChanged: fw.changed, MaxMembersDown: fw.maxDown,
			MemberPodDeletes: append([]string(nil), fw.podDeletes...), ReadyLeft: append([]string(nil), fw.notReady...)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Fleet < out[j].Fleet })
	return out
}

// templateDiff describes how two templates differ, for the report: the JSON of each
// top-level part that changed.
func templateDiff(a, b corev1.PodTemplateSpec) string {
	var parts []string
	pair := func(name string, x, y any) {
		if !equality.Semantic.DeepEqual(x, y) {
			xj, _ := json.Marshal(x)
			yj, _ := json.Marshal(y)
			parts = append(parts, fmt.Sprintf("%s: %s -> %s", name, xj, yj))
		}
	}
	pair("labels", a.Labels, b.Labels)
	pair("annotations", a.Annotations, b.Annotations)
	for i := range max(len(a.Spec.Containers), len(b.Spec.Containers)) {
		var x, y *corev1.Container
		if i < len(a.Spec.Containers) {
			x = &a.Spec.Containers[i]
		}
		if i < len(b.Spec.Containers) {
			y = &b.Spec.Containers[i]
		}
		pair(fmt.Sprintf("containers[%d]", i), x, y)
	}
	as, bs := a.Spec, b.Spec
	as.Containers, bs.Containers = nil, nil
	pair("spec (but containers)", as, bs)
	return strings.Join(parts, "\n")
}
