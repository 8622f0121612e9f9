package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/preview"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// The previews measurement of docs/performance.md (issue 14, item 8): SCALE_PREVIEWS (100)
// previews of one parent created at once. It reports the time until all are Ready, the
// operator's API writes per preview (from its write journal with the in-process operator, from
// rest_client_requests_total with the binary) and the operator's memory. Labelled scale: make
// test leaves it out, make test-scale runs it.
var _ = Describe("scale: previews", Label("scale"), Serial, func() {
	It("brings SCALE_PREVIEWS previews of one parent to Ready together, then deletes them", func(ctx context.Context) {
		n := envInt("SCALE_PREVIEWS", 100)
		ns := fleetNamespace(ctx, "pvs")
		mon := watchPreviewSafety(ctx, ns)
		parent := previewParent(ctx, ns, "dev")
		bucket := parent.Spec.Previews.Storage.Bucket
		answerIngresses(ctx, ns)

		runtime.GC()
		heap0 := heapInUse()
		req0 := binaryRequests(ctx)
		start := time.Now()
		var previews []*v1.CelldPreview
		for i := range n {
			previews = append(previews, createPreview(ctx, ns, fmt.Sprintf("pr-%03d", i), "dev", 0, nil))
		}
		created := time.Since(start)

		// readyAt is when each preview was first seen Ready; readyNow how many are Ready at the
		// last poll (a member whose simulated readiness flaps under load takes its preview back
		// to Pending for a while).
		readyAt, readyNow := map[string]time.Duration{}, 0
		framework.EventuallyWithin(ctx, 20*time.Minute, func() int {
			list := &v1.CelldPreviewList{}
			if kube().List(ctx, list, client.InNamespace(ns)) != nil {
				return -1
			}
			readyNow = 0
			for _, p := range list.Items {
				if p.Status.Phase != v1.PreviewReady {
					continue
				}
				readyNow++
				if _, seen := readyAt[p.Name]; !seen {
					readyAt[p.Name] = time.Since(start)
				}
			}
			return len(readyAt)
		}).WithPolling(time.Second).Should(Equal(n), "the previews never all became Ready")
		allReady := time.Since(start)
		req1 := binaryRequests(ctx)
		heap1 := heapInUse()
		times := make([]time.Duration, 0, n)
		for _, d := range readyAt {
			times = append(times, d)
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })

		report(fmt.Sprintf("%d previews: creating them (client side)", n), created.Round(100*time.Millisecond))
		report(fmt.Sprintf("%d previews: creation to first Ready", n), times[0].Round(100*time.Millisecond))
		report(fmt.Sprintf("%d previews: creation to half Ready", n), times[n/2].Round(100*time.Millisecond))
		report(fmt.Sprintf("%d previews: creation to all Ready (each seen Ready at least once)", n), allReady.Round(100*time.Millisecond))
		report(fmt.Sprintf("%d previews: Ready at that moment", n), readyNow)

		names := []string{reservation.Name(bucket, "")}
		for _, p := range previews {
			names = append(names, reservation.Name(bucket, preview.FleetName(p)))
		}
		if binaryOperator() == "" {
			writes := operatorWrites(ns, start, names...)
			report(fmt.Sprintf("%d previews: operator writes to all Ready, per preview", n), fmt.Sprintf("%.1f", float64(len(writes))/float64(n)))
			report("previews: operator writes per preview by resource", writesByResource(writes, n))
			// A reservation's create goes to the cluster-scoped collection, whose path names no
			// object: counted apart, since the start (the spec runs alone).
			creates := readJournal("operator-writes.jsonl", func(r writeRecord) bool {
				return !r.At.Before(start) && r.Method == "POST" && strings.HasSuffix(r.Path, "/celldstoragereservations")
			})
			report("previews: reservation creates per preview (pool and prefixes)", fmt.Sprintf("%.2f", float64(len(creates))/float64(n)))
			report("previews: in-process heap in use (operator and test) MiB, before and at all Ready", fmt.Sprintf("%d, %d", heap0>>20, heap1>>20))
			_, rss := procStats("/proc/self")
			report("previews: in-process peak RSS (operator and test) MiB", rss/1024)
		} else {
			report(fmt.Sprintf("%d previews: operator requests to all Ready, per preview by method", n), perFleet(delta(req0, req1), n))
			_, rss, err := operatorProcess()
			Expect(err).NotTo(HaveOccurred())
			report("previews: operator binary peak RSS MiB", rss/1024)
			report("previews: operator binary RSS now MiB", currentRSS()/1024)
		}

		By("deleting every preview at once")
		start = time.Now()
		for _, p := range previews {
			Expect(kube().Delete(ctx, p)).To(Succeed())
		}
		framework.EventuallyWithin(ctx, 20*time.Minute, func() int {
			list := &v1.CelldPreviewList{}
			if kube().List(ctx, list, client.InNamespace(ns)) != nil {
				return -1
			}
			return len(list.Items)
		}).WithPolling(time.Second).Should(BeZero(), "the previews were never all released")
		report(fmt.Sprintf("%d previews: deletion to all released (each after its fleet)", n), time.Since(start).Round(100*time.Millisecond))
		mon.Check(fmt.Sprintf("%d previews created and deleted at once", n))
		expectDeletesByPreviewRules(ns, mon)
	})
})

// answerIngresses publishes an address on every Ingress of ns that has none, as an ingress
// controller would, until the spec ends.
func answerIngresses(ctx context.Context, ns string) {
	ctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			list := &networkingv1.IngressList{}
			if kube().List(ctx, list, client.InNamespace(ns)) == nil {
				for i := range list.Items {
					ing := &list.Items[i]
					if len(ing.Status.LoadBalancer.Ingress) == 0 && ing.DeletionTimestamp == nil {
						ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
						_ = kube().Status().Update(ctx, ing)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// binaryRequests reads the binary operator's request counters, or nil in-process.
func binaryRequests(ctx context.Context) map[string]float64 {
	GinkgoHelper()
	if binaryOperator() == "" {
		return nil
	}
	m, err := operatorRequests(ctx)
	Expect(err).NotTo(HaveOccurred())
	return m
}

// currentRSS is the binary operator's resident set now (KiB).
func currentRSS() int {
	raw, err := os.ReadFile(filepath.Join(artifactsDir(), "operator.pid"))
	if err != nil {
		return 0
	}
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(raw)) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return kib
		}
	}
	return 0
}

// writesByResource counts writes per preview by the resource they wrote (the path's resource
// segment, /status kept apart).
func writesByResource(writes []writeRecord, n int) map[string]string {
	count := map[string]int{}
	for _, w := range writes {
		parts := strings.Split(strings.Trim(w.Path, "/"), "/")
		res := ""
		for i, p := range parts {
			if p == "namespaces" && i+2 < len(parts) {
				res = parts[i+2]
				break
			}
		}
		if res == "" && len(parts) >= 4 {
			res = parts[len(parts)-2] // a cluster-scoped object: .../RESOURCE/NAME
		}
		if strings.HasSuffix(w.Path, "/status") {
			res += "/status"
		}
		count[w.Method+" "+res]++
	}
	out := map[string]string{}
	for k, v := range count {
		out[k] = fmt.Sprintf("%.2f", float64(v)/float64(n))
	}
	return out
}
