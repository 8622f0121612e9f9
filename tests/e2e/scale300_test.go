package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/controllers/workload"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// The read-model benchmark of docs/performance.md: SCALE_FLEETS (300) three-member
// PersistentFleets, SCALE_PER_NAMESPACE (10; 0 puts them all in one namespace) per namespace,
// measured against the API server's own pace and then left settled for SCALE_SETTLE (5 min).
// Run it with make test-scale.
var _ = Describe("scale: the read model", Label("scale", "read-model"), Serial, func() {
	It("brings SCALE_FLEETS fleets to Ready at the API server's pace, then costs no request", func(ctx context.Context) {
		Expect(binaryOperator()).NotTo(BeEmpty(), "the read-model benchmark measures the operator binary in its own process: run it with make test-scale (it sets %s)", binaryEnv)
		fleets := envInt("SCALE_FLEETS", 300)
		settle := envDuration("SCALE_SETTLE", 5*time.Minute)
		perNamespace := envInt("SCALE_PER_NAMESPACE", 10)
		if os.Getenv("SCALE_PER_NAMESPACE") == "0" {
			perNamespace = fleets
		}
		report("fleets per namespace", perNamespace)
		names := func(n int) (namespaces []string) {
			for range (fleets + perNamespace - 1) / perNamespace {
				namespaces = append(namespaces, fleetNamespace(ctx, n2s(n)))
			}
			return namespaces
		}
		fleetAt := func(namespaces []string, i int) (string, string) {
			return namespaces[i/perNamespace], fmt.Sprintf("s%d", i%perNamespace)
		}

		// SCALE_BASELINE=0 skips the side-by-side baseline: the 1,000-fleet run measures the
		// settled operator, and the baseline would double the cluster's objects.
		var baseline time.Duration
		if os.Getenv("SCALE_BASELINE") != "0" {
			By("baseline: the rendered objects applied directly, at the API server's own pace")
			base := names(0)
			cpu, api := clusterCPU(), apiserverTime(ctx)
			start := time.Now()
			applyRendered(ctx, fleets, func(i int) (string, string) { return fleetAt(base, i) })
			framework.EventuallyWithin(ctx, 15*time.Minute, func() int { ready, _ := statefulSets(ctx, base); return ready }).
				Should(Equal(fleets), "baseline StatefulSets never became ready")
			baseline = time.Since(start)
			report(fmt.Sprintf("%d fleets: baseline (server-side apply of the rendered objects) to all Ready", fleets), baseline.Round(100*time.Millisecond))
			report("baseline, to all Ready: CPU seconds by process", cpuSince(cpu))
			report("baseline, to all Ready: API server request seconds, top resources", apiserverSince(ctx, api))
			for _, ns := range base {
				Expect(kube().Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			}
			// The operator is measured on a cluster that has finished with the baseline: its
			// namespaces are gone (claims and all), and so are the volumes they bound, whose
			// deletion would otherwise still load the API server and the provisioner while the
			// operator's fleets come up.
			framework.EventuallyWithin(ctx, 10*time.Minute, func() int { return leftOf(ctx, base) }).Should(BeZero(), "the baseline's namespaces and volumes never went")
		}

		By("the operator: the same fleets as CelldFleets")
		namespaces := names(1)
		// Without the baseline's minutes the binary may still be starting: its counters are the
		// first thing measured.
		framework.EventuallyWithin(ctx, 2*time.Minute, func() error { _, err := operatorRequests(ctx); return err }).
			Should(Succeed(), "the operator binary never served its metrics")
		cpu0, _, err := operatorProcess()
		Expect(err).NotTo(HaveOccurred())
		req0, err := operatorRequests(ctx)
		Expect(err).NotTo(HaveOccurred())
		work0, err := operatorWork(ctx)
		Expect(err).NotTo(HaveOccurred())
		cpu, api := clusterCPU(), apiserverTime(ctx)
		start := time.Now()
		// The fleets are created eight at a time, as the baseline applies its objects: the
		// comparison is of the operator's pace with the API server's, not of two client loops.
		inParallel(fleets, func(i int) error {
			ns, name := fleetAt(namespaces, i)
			return kube().Create(ctx, persistentFleet(ns, name, 3))
		})
		report(fmt.Sprintf("%d fleets: CelldFleets created (client side)", fleets), time.Since(start).Round(100*time.Millisecond))
		// when every StatefulSet existed (the operator's first passes are done), and when every
		// one was ready, as the baseline measures
		var stsCreated, stsReady time.Duration
		framework.EventuallyWithin(ctx, max(20*time.Minute, time.Duration(fleets)*2*time.Second), func() int {
			if stsReady == 0 {
				ready, created := statefulSets(ctx, namespaces)
				if stsCreated == 0 && created == fleets {
					stsCreated = time.Since(start)
				}
				if ready == fleets {
					stsReady = time.Since(start)
				}
			}
			return readyFleets(ctx, namespaces)
		}).Should(Equal(fleets), "the fleets never became Ready")
		if stsCreated > 0 {
			report(fmt.Sprintf("%d fleets: operator, creation to every StatefulSet created (its first passes)", fleets), stsCreated.Round(100*time.Millisecond))
		}
		report("first pass: a fleet's creation to its StatefulSet's, median / p95 / max (1 s resolution)", firstPassLatency(ctx, namespaces))
		ready := time.Since(start)
		if stsReady == 0 {
			stsReady = ready
		}
		report(fmt.Sprintf("%d fleets: operator, creation to every StatefulSet ready (the baseline's measure)", fleets), stsReady.Round(100*time.Millisecond))
		req1, err := operatorRequests(ctx)
		Expect(err).NotTo(HaveOccurred())
		work1, err := operatorWork(ctx)
		Expect(err).NotTo(HaveOccurred())
		report(fmt.Sprintf("%d fleets: operator, creation to all Ready", fleets), ready.Round(100*time.Millisecond))
		report("operator, creation to all Ready: CPU seconds by process", cpuSince(cpu))
		report("operator, creation to all Ready: API server request seconds, top resources", apiserverSince(ctx, api))
		if baseline > 0 {
			report(fmt.Sprintf("%d fleets: operator time / baseline time", fleets), fmt.Sprintf("%.2f", ready.Seconds()/baseline.Seconds()))
		}
		report("creation to Ready: operator requests per fleet by method (GET 404: reads of what is not there)", perFleet(delta(req0, req1), fleets))
		creation := workReport(delta(work0, work1), fleets)
		report("creation to Ready: where the operator's time went (its passes, work queue and status writes)", creation)
		Expect(creation).To(HaveKey("queue wait, mean (ms)"), "the operator's metrics must account for its passes")
		if path, err := saveHeapProfile(ctx, fmt.Sprintf("heap-%d-fleets-ready.pprof", fleets)); err == nil {
			report("heap profile when every fleet was Ready", path)
		} else {
			report("heap profile when every fleet was Ready: not taken", err.Error())
		}
		_, rssReady, err := operatorProcess()
		Expect(err).NotTo(HaveOccurred())
		report("operator process: peak RSS MiB, creation to Ready", rssReady/1024)

		By("settled: the observer's first result lands, then the operator is left alone")
		framework.EventuallyWithin(ctx, 10*time.Minute, func() int { return convergedFleets(ctx, namespaces) }).Should(Equal(fleets),
			func() string { return notConverged(ctx, namespaces) })
		settledAt := time.Now()
		req2, err := operatorRequests(ctx)
		Expect(err).NotTo(HaveOccurred())
		Consistently(ctx, func() int { return readyFleets(ctx, namespaces) }).
			WithTimeout(settle).WithPolling(30 * time.Second).Should(Equal(fleets))
		window := time.Since(settledAt)
		req3, err := operatorRequests(ctx)
		Expect(err).NotTo(HaveOccurred())
		d := delta(req2, req3)
		total := 0.0
		for _, v := range d {
			total += v
		}
		rate := total / float64(fleets) / window.Seconds()
		report(fmt.Sprintf("settled %s: requests per fleet per second (rest_client_requests_total, every method, watches included)", window.Round(time.Second)), fmt.Sprintf("%.5f", rate))
		report("settled: requests by method, whole operator", d)
		if rss, err := operatorRSS(); err == nil {
			report("settled: operator RSS MiB / KiB per fleet", fmt.Sprintf("%d / %d", rss/1024, rss/fleets))
		}
		if path, err := saveHeapProfile(ctx, fmt.Sprintf("heap-%d-fleets-settled.pprof", fleets)); err == nil {
			report("heap profile of the settled fleets", path)
		}
		Expect(rate).To(BeNumerically("<=", 0.01), "settled fleets must cost at most 0.01 requests per fleet per second")

		By("drift: a NetworkPolicy widened by hand is restored, 20 times")
		var took []time.Duration
		for trial := range 20 {
			ns, name := fleetAt(namespaces, (trial*7)%fleets)
			took = append(took, widenAndAwaitRestore(ctx, ns, name))
		}
		slices.Sort(took)
		report("drift: NetworkPolicy restore, median of 20", took[len(took)/2].Round(time.Millisecond))
		report("drift: NetworkPolicy restore, p95 of 20", took[len(took)*95/100].Round(time.Millisecond))
		Expect(took[len(took)/2]).To(BeNumerically("<=", time.Second), "the median restore must be within 1 s")

		cpu1, rss, err := operatorProcess()
		Expect(err).NotTo(HaveOccurred())
		report("operator process: peak RSS MiB", rss/1024)
		report("operator process: CPU seconds from creation to the end", fmt.Sprintf("%.1f", cpu1-cpu0))
		// Issue 29's bounds: 200 MiB up to 300 fleets, 400 MiB at 1,000.
		limit := 200
		if fleets > 300 {
			limit = 400
		}
		Expect(rss/1024).To(BeNumerically("<=", limit), "the operator's peak RSS must stay within %d MiB at %d fleets", limit, fleets)
	})
})

func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func perFleet(m map[string]float64, fleets int) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprintf("%.1f", v/float64(fleets))
	}
	return out
}

func n2s(n int) string { return "sc" + strconv.Itoa(n) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// applyRendered server-side applies, for n fleets, exactly what the operator would render:
// the StatefulSet and the chart's children, under a made-up fleet UID.
func applyRendered(ctx context.Context, n int, at func(int) (string, string)) {
	GinkgoHelper()
	renderer, err := children.NewFleetRenderer()
	Expect(err).NotTo(HaveOccurred())
	facts := children.OperatorFacts{Namespace: e2eOptions.OperatorNamespace, ServiceAccount: e2eOptions.OperatorServiceAccount, NetworkPolicyEnforced: true}
	sets := make([][]*unstructured.Unstructured, 0, n)
	for i := range n {
		ns, name := at(i)
		f := persistentFleet(ns, name, 3)
		f.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		f.Default()
		objs, err := renderer.Render(f, facts)
		Expect(err).NotTo(HaveOccurred())
		sts := workload.StatefulSet(f, workload.Options{ReservationName: reservation.Name(f.Spec.Storage.Bucket, "")}, 3)
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sts)
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: raw}
		u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
		objs = append(objs, u)
		sets = append(sets, objs)
	}
	inParallel(n, func(i int) error {
		for _, o := range sets[i] {
			o.SetManagedFields(nil)
			if err := kube().Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("baseline"), client.ForceOwnership); err != nil {
				return fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
		return nil
	})
}

// inParallel runs do(0) to do(n-1), eight at a time, and fails on the first error.
func inParallel(n int, do func(i int) error) {
	GinkgoHelper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := do(i); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
}

// firstPassLatency is the time from each fleet's creation to its StatefulSet's, both stamped by
// the API server (whole seconds): how long a new fleet waited for its first pass to create its
// workload. It returns the median, the 95th percentile and the maximum.
func firstPassLatency(ctx context.Context, namespaces []string) string {
	GinkgoHelper()
	var took []time.Duration
	for _, ns := range namespaces {
		fl, sts := &v1.CelldFleetList{}, &appsv1.StatefulSetList{}
		Expect(kube().List(ctx, fl, client.InNamespace(ns))).To(Succeed())
		Expect(kube().List(ctx, sts, client.InNamespace(ns))).To(Succeed())
		created := map[string]time.Time{}
		for _, s := range sts.Items {
			created[s.Name] = s.CreationTimestamp.Time
		}
		for _, f := range fl.Items {
			if at, ok := created[f.Name]; ok {
				took = append(took, at.Sub(f.CreationTimestamp.Time))
			}
		}
	}
	Expect(took).NotTo(BeEmpty(), "no fleet has a StatefulSet")
	slices.Sort(took)
	return fmt.Sprintf("%s / %s / %s", took[len(took)/2], took[len(took)*95/100], took[len(took)-1])
}

// statefulSets counts the StatefulSets of the namespaces whose three members are ready, and
// all of them.
func statefulSets(ctx context.Context, namespaces []string) (ready, created int) {
	for _, ns := range namespaces {
		list := &appsv1.StatefulSetList{}
		if kube().List(ctx, list, client.InNamespace(ns)) != nil {
			return 0, 0
		}
		created += len(list.Items)
		for _, s := range list.Items {
			if s.Status.ReadyReplicas == 3 {
				ready++
			}
		}
	}
	return ready, created
}

func podsIn(ctx context.Context, namespaces []string) int {
	n := 0
	for _, ns := range namespaces {
		list := &corev1.PodList{}
		if kube().List(ctx, list, client.InNamespace(ns)) != nil {
			return -1
		}
		n += len(list.Items)
	}
	return n
}

// clusterCPU reads the CPU seconds each process of the local cluster has used: every process
// the cluster directory's run/ names (etcd, the API server, the controller manager, the
// scheduler, kwok, metrics-server), this test process (the celld simulator serving every
// member's readiness and /state, and the volume provisioner) and the operator binary.
func clusterCPU() map[string]float64 {
	dir := cmp.Or(os.Getenv("CELLD_E2E_DIR"), filepath.Join(".artifacts", "cluster"))
	out := map[string]float64{}
	pids, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	for _, f := range pids {
		if raw, err := os.ReadFile(f); err == nil {
			out[strings.TrimSuffix(filepath.Base(f), ".pid")], _ = procStats("/proc/" + strings.TrimSpace(string(raw)))
		}
	}
	out["test process (members, provisioner)"], _ = procStats("/proc/self")
	if cpu, _, err := operatorProcess(); err == nil {
		out["operator"] = cpu
	}
	return out
}

// cpuSince is the CPU seconds each process used since before was read, and their sum.
func cpuSince(before map[string]float64) map[string]string {
	out, total := map[string]string{}, 0.0
	for name, now := range clusterCPU() {
		out[name] = fmt.Sprintf("%.1f", now-before[name])
		total += now - before[name]
	}
	out["all"] = fmt.Sprintf("%.1f", total)
	return out
}

// apiserverTime reads the API server's request seconds (apiserver_request_duration_seconds_sum:
// the time requests were in flight, queueing included, not CPU) by verb and resource, every
// client's; watches are left out (their seconds are how long they stayed open).
func apiserverTime(ctx context.Context) map[string]float64 {
	raw, err := framework.Cluster.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred(), "read the API server's metrics")
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_duration_seconds_sum{") {
			continue
		}
		verb := label(line, "verb")
		if verb == "WATCH" || verb == "CONNECT" {
			continue // long-running: their seconds are how long a watch stayed open
		}
		key := verb + " " + label(line, "resource")
		if sub := label(line, "subresource"); sub != "" {
			key += "/" + sub
		}
		out[key] += value(line)
	}
	return out
}

// apiserverSince is the API server's request seconds since before, the eight largest by verb
// and resource, and their total.
func apiserverSince(ctx context.Context, before map[string]float64) map[string]string {
	type spent struct {
		key string
		s   float64
	}
	var all []spent
	total := 0.0
	for k, v := range apiserverTime(ctx) {
		if d := v - before[k]; d > 0 {
			all = append(all, spent{k, d})
			total += d
		}
	}
	slices.SortFunc(all, func(a, b spent) int { return cmp.Compare(b.s, a.s) })
	out := map[string]string{"all": fmt.Sprintf("%.1f", total)}
	for _, x := range all[:min(len(all), 8)] {
		out[x.key] = fmt.Sprintf("%.1f", x.s)
	}
	return out
}

// leftOf counts what remains of the namespaces: each namespace still there, each of their Pods
// and each PersistentVolume bound to one of their claims; -1 when a list fails.
func leftOf(ctx context.Context, namespaces []string) int {
	pods := podsIn(ctx, namespaces)
	if pods < 0 {
		return -1
	}
	n := pods
	for _, ns := range namespaces {
		err := kube().Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if err == nil {
			n++
		} else if !apierrors.IsNotFound(err) {
			return -1
		}
	}
	pvs := &corev1.PersistentVolumeList{}
	if kube().List(ctx, pvs) != nil {
		return -1
	}
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef != nil && slices.Contains(namespaces, pv.Spec.ClaimRef.Namespace) {
			n++
		}
	}
	return n
}

func fleetsWhere(ctx context.Context, namespaces []string, ok func(*v1.CelldFleet) bool) int {
	n := 0
	for _, ns := range namespaces {
		list := &v1.CelldFleetList{}
		if kube().List(ctx, list, client.InNamespace(ns)) != nil {
			return 0
		}
		for i := range list.Items {
			if ok(&list.Items[i]) {
				n++
			}
		}
	}
	return n
}

func readyFleets(ctx context.Context, namespaces []string) int {
	return fleetsWhere(ctx, namespaces, func(f *v1.CelldFleet) bool {
		return conditionOf(f, v1.ConditionReady) == "True/"+v1.ReasonProvisioned && f.Status.ReadyReplicas == 3
	})
}

func convergedFleets(ctx context.Context, namespaces []string) int {
	return fleetsWhere(ctx, namespaces, func(f *v1.CelldFleet) bool {
		return conditionOf(f, v1.ConditionApplicationConverged) == "True/"+v1.ReasonConverged
	})
}

// notConverged describes up to five fleets without ApplicationConverged=True: the condition,
// when the observer last published (an observedAt that keeps moving means its collections run
// and find the members unavailable; one that stops means they stopped) and the fleet's members.
func notConverged(ctx context.Context, namespaces []string) string {
	var out []string
	for _, ns := range namespaces {
		list := &v1.CelldFleetList{}
		if err := kube().List(ctx, list, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for i := range list.Items {
			f := &list.Items[i]
			c := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionApplicationConverged)
			if len(out) == 5 || (c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1.ReasonConverged) {
				continue
			}
			line := fmt.Sprintf("%s/%s: Ready %s, %d ready members", f.Namespace, f.Name, conditionOf(f, v1.ConditionReady), f.Status.ReadyReplicas)
			if c != nil {
				line += fmt.Sprintf("; ApplicationConverged %s/%s %q", c.Status, c.Reason, c.Message)
			}
			if a := f.Status.Application; a != nil && a.ObservedAt != nil {
				line += fmt.Sprintf("; observedAt %s (%s ago), unavailable nodes %d", a.ObservedAt.Format(time.RFC3339), time.Since(a.ObservedAt.Time).Round(time.Second), a.UnavailableNodes)
			}
			out = append(out, line)
		}
	}
	return "fleets not converged:\n" + strings.Join(out, "\n")
}

func conditionOf(f *v1.CelldFleet, t string) string {
	for _, c := range f.Status.Conditions {
		if c.Type == t {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}

// widenAndAwaitRestore opens the fleet's NetworkPolicy to every source by hand and returns how
// long the operator took to restore it, timed by a watch rather than a poll.
func widenAndAwaitRestore(ctx context.Context, ns, name string) time.Duration {
	GinkgoHelper()
	// Watch from the list's resourceVersion, which is current: the policy's own is its
	// creation's, older than the API server's watch window after a hundred fleets (410 Gone).
	nps := framework.Cluster.Client.NetworkingV1().NetworkPolicies(ns)
	list, err := nps.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	Expect(err).NotTo(HaveOccurred())
	Expect(list.Items).To(HaveLen(1), "NetworkPolicy %s/%s", ns, name)
	np := &list.Items[0]
	want := np.Spec
	w, err := nps.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: list.ResourceVersion})
	Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	Expect(kube().Update(ctx, np, client.FieldOwner("kubectl-edit"))).To(Succeed())
	start := time.Now()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			Expect(ok).To(BeTrue(), "the watch of NetworkPolicy %s/%s ended", ns, name)
			if got, isNP := e.Object.(*networkingv1.NetworkPolicy); isNP && e.Type == watch.Modified &&
				got.ResourceVersion != np.ResourceVersion && equality.Semantic.DeepEqual(got.Spec, want) {
				return time.Since(start)
			}
		case <-deadline:
			Fail(fmt.Sprintf("NetworkPolicy %s/%s was not restored within 30 s", ns, name))
		}
	}
}
