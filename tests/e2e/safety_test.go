package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// The safety monitor runs after every spec, whatever it tested, over every namespace the spec
// created. It reads the operator's own journal of deletes and writes, so it judges what the
// operator did, not what Kubernetes did:
//   - a claim is deleted only by a replacement (a MemberDiskLost or MemberReplaced event
//     about that member) or after the operator deleted the fleet's workload (fleet deletion);
//   - two claims are never given up within the absorb window of each other outside deletion:
//     a second replacement that soon would replace a member while another is down;
//   - a paused fleet gets no workload write and no member delete from the operator.
var _ = AfterEach(func(ctx context.Context) {
	for _, ns := range framework.SpecNamespaces() {
		checkSafety(ctx, ns)
	}
})

func checkSafety(ctx context.Context, ns string) {
	GinkgoHelper()
	deletes, deletions := []deleteRecord(nil), time.Time{}
	if binaryOperator() != "" {
		// The binary journals nothing; its log's mutation lines name every delete it sent.
		// Whether a fleet was paused is not in them: the binary runs only the benchmarks,
		// which pause nothing.
		deletes, deletions = binaryDeletes(ns)
	} else {
		for _, w := range operatorWrites(ns, time.Time{}) {
			Expect(w.Paused).To(BeFalse(), "safety: the operator sent %s %s while a fleet of %s was paused", w.Method, w.Path, ns)
		}
		deletes, deletions = operatorDeletes(ns), workloadDeletions(ns)
	}
	var last time.Time
	for _, d := range deletes {
		if d.Kind != "PersistentVolumeClaim" {
			continue
		}
		if !deletions.IsZero() && d.At.After(deletions) {
			continue // fleet deletion removes every claim
		}
		member := strings.TrimPrefix(d.Name, "data-")
		// Events arrive asynchronously after the action they report, so poll for a while.
		framework.EventuallyWithin(ctx, framework.Short, func() bool { return replacementEvent(ctx, ns, member) }).Should(BeTrue(),
			"safety: the operator deleted claim %s/%s without a replacement event or fleet deletion", ns, d.Name)
		Expect(last.IsZero() || d.At.Sub(last) >= e2eOptions.AbsorbWindow).To(BeTrue(),
			"safety: the operator gave up two disks in %s within %s of each other: a member was replaced while another was down", ns, d.At.Sub(last))
		last = d.At
	}
}

// workloadDeletions is when the operator first deleted a workload in ns, or zero.
func workloadDeletions(ns string) time.Time {
	for _, w := range operatorWrites(ns, time.Time{}) {
		if w.Method == "DELETE" && (strings.Contains(w.Path, "/statefulsets/") || strings.Contains(w.Path, "/deployments/")) {
			return w.At
		}
	}
	return time.Time{}
}

// replacementEvent reports whether a MemberDiskLost or MemberReplaced event names member.
func replacementEvent(ctx context.Context, ns, member string) bool {
	events, err := framework.Cluster.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, e := range events.Items {
		if (e.Reason == v1.EventMemberDiskLost || e.Reason == v1.EventMemberReplaced) && strings.Contains(e.Note, member) {
			return true
		}
	}
	return false
}

// binaryDeletes reads the operator binary's log: the claim and Pod deletes it sent in ns, in
// order, and when it first deleted a workload there (zero if never).
func binaryDeletes(ns string) (deletes []deleteRecord, workloads time.Time) {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(artifactsDir(), "operator.log"))
	Expect(err).NotTo(HaveOccurred(), "the operator binary's log is missing: nothing recorded what it did")
	for line := range strings.SplitSeq(string(raw), "\n") {
		var m struct {
			Msg    string    `json:"msg"`
			TS     time.Time `json:"ts"`
			Action string    `json:"action"`
			Fleet  string    `json:"fleet"`
			Object string    `json:"object"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Msg != "mutation" || m.Action != "delete" || !strings.HasPrefix(m.Fleet, ns+"/") {
			continue
		}
		kind, name, _ := strings.Cut(m.Object, "/")
		switch kind {
		case "StatefulSet", "Deployment":
			if workloads.IsZero() {
				workloads = m.TS
			}
		case "PersistentVolumeClaim", "Pod":
			deletes = append(deletes, deleteRecord{Kind: kind, Namespace: ns, Name: name, At: m.TS})
		}
	}
	return deletes, workloads
}
