package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/application"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/tests/e2e/framework"
	"github.com/celld/celld-operator/tests/localcluster"
)

var k8sClient client.Client

// kube returns a controller-runtime client for this Ginkgo process.
func kube() client.Client {
	GinkgoHelper()
	if k8sClient == nil {
		scheme := runtime.NewScheme()
		Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
		Expect(v1.AddToScheme(scheme)).To(Succeed())
		c, err := client.New(framework.Cluster.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		k8sClient = c
	}
	return k8sClient
}

// fleetNamespace creates a namespace with the runtime ServiceAccount a fleet needs.
func fleetNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns := framework.NewNamespace(ctx, prefix)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "celld-runtime"}}
	Expect(kube().Create(ctx, sa)).To(Succeed())
	return ns
}

// persistentFleet is a PersistentFleet on the local cluster's zonal StorageClass with a short
// shutdown budget, so deletions and rollouts finish in seconds.
func persistentFleet(ns, name string, replicas int32) *v1.CelldFleet {
	f := corpus.Persistent()
	f.Namespace, f.Name = ns, name
	f.Spec.Replicas = new(replicas)
	f.Spec.Storage.Bucket = ns + "-" + name // a fresh bucket per spec: reservations are permanent
	f.Spec.Storage.StorageClassName = new(localcluster.StorageClassName)
	f.Spec.Lifecycle = &v1.LifecycleSpec{ShutdownSeconds: 2, TerminationGraceSeconds: 10}
	return f
}

func bucketFleet(ns, name string, replicas int32, layout v1.BucketWorkload) *v1.CelldFleet {
	f := persistentFleet(ns, name, replicas)
	f.Spec.Profile, f.Spec.BucketWorkload = v1.ProfileBucket, layout
	f.Spec.Storage.StorageClassName = nil
	return f
}

func getFleet(ctx context.Context, ns, name string) *v1.CelldFleet {
	GinkgoHelper()
	f := &v1.CelldFleet{}
	Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, f)).To(Succeed())
	return f
}

// condition returns a fleet condition's "Status/Reason", or "" when absent.
func condition(ctx context.Context, ns, name, t string) string {
	c := meta.FindStatusCondition(getFleet(ctx, ns, name).Status.Conditions, t)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// waitFleetReady waits until the fleet reports Ready with n ready members and Provisioned.
func waitFleetReady(ctx context.Context, ns, name string, n int32) {
	GinkgoHelper()
	framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
		f := getFleet(ctx, ns, name)
		ready := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionReady)
		g.Expect(ready).NotTo(BeNil(), "no Ready condition yet")
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s %s", ready.Reason, ready.Message)
		g.Expect(ready.Reason).To(Equal(v1.ReasonProvisioned), ready.Message)
		g.Expect(f.Status.ReadyReplicas).To(Equal(n))
		g.Expect(f.Status.ObservedGeneration).To(Equal(f.Generation))
	}).Should(Succeed())
}

func statefulSetOf(ctx context.Context, ns, name string) *appsv1.StatefulSet {
	GinkgoHelper()
	s := &appsv1.StatefulSet{}
	Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

// claimUIDs maps claim names to UIDs: a changed UID is a fresh disk.
func claimUIDs(ctx context.Context, ns string) map[string]types.UID {
	GinkgoHelper()
	list := &corev1.PersistentVolumeClaimList{}
	Expect(kube().List(ctx, list, client.InNamespace(ns))).To(Succeed())
	out := map[string]types.UID{}
	for _, c := range list.Items {
		if c.DeletionTimestamp == nil {
			out[c.Name] = c.UID
		}
	}
	return out
}

func podUID(ctx context.Context, ns, name string) types.UID {
	if p := framework.Pod(ctx, ns, name); p != nil {
		return p.UID
	}
	return ""
}

func patchFleet(ctx context.Context, ns, name, patch string) {
	GinkgoHelper()
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(kube().Patch(ctx, f, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// operatorDeletes returns the Pod and claim deletes the operator issued in ns, oldest first.
func operatorDeletes(ns string) []deleteRecord {
	GinkgoHelper()
	out := readJournal("operator-deletes.jsonl", func(r deleteRecord) bool { return r.Namespace == ns })
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// readJournal returns the records of one of the operator's JSONL journals in .artifacts that
// keep accepts. The in-process operator creates every journal as it starts, so a missing
// journal fails the spec: a check that no delete or write happened proves nothing when nothing
// was recording (the binary operator of the read-model benchmark records none).
func readJournal[T any](name string, keep func(T) bool) []T {
	GinkgoHelper()
	f, err := os.Open(filepath.Join(artifactsDir(), name))
	Expect(err).NotTo(HaveOccurred(), "the operator's journal %s is missing: nothing recorded what the operator did", name)
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r T
		if json.Unmarshal(sc.Bytes(), &r) == nil && keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// expectNoOperatorDeletes is the safety monitor of ordinary operations: a rollout, a scale or a
// pause must never make the operator delete a Pod or a claim.
func expectNoOperatorDeletes(ns, during string) {
	GinkgoHelper()
	Expect(operatorDeletes(ns)).To(BeEmpty(), "the operator deleted a Pod or claim during %s", during)
}

// membersDown counts the fleet's members that exist but are not Ready, or are missing.
func membersDown(ctx context.Context, ns, name string, n int32) int {
	down := 0
	for i := range n {
		p := framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))
		if p == nil || !framework.IsReady(p) || p.DeletionTimestamp != nil {
			down++
		}
	}
	return down
}

// expectEvent waits for an event with reason in ns: events are delivered asynchronously, after
// the action they report.
func expectEvent(ctx context.Context, ns, reason string) {
	GinkgoHelper()
	framework.EventuallyWithin(ctx, framework.Short, func() []string { return eventReasons(ctx, ns) }).
		Should(ContainElement(reason), "event %s in %s", reason, ns)
}

// events returns the reasons of the events about a fleet.
func eventReasons(ctx context.Context, ns string) []string {
	GinkgoHelper()
	list, err := framework.Cluster.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	return out
}

func resourceGi(n int64) resource.Quantity { return *resource.NewQuantity(n<<30, resource.BinarySI) }

// operatorWrites returns the write requests the lifecycle reconciler sent about namespace ns
// (or about cluster-scoped objects named in names) since a time. The application observer's
// status writes are left out: it is a separate component that publishes a changed observation
// at once and an unchanged one at most once every 5 min (docs/application.md).
// operatorReads are the operator's reads (GET and LIST, not watches) in namespace ns since.
func operatorReads(ns string, since time.Time) []writeRecord {
	GinkgoHelper()
	return readJournal("operator-reads.jsonl", func(r writeRecord) bool {
		return !r.At.Before(since) && strings.Contains(r.Path, "/namespaces/"+ns+"/")
	})
}

func operatorWrites(ns string, since time.Time, names ...string) []writeRecord {
	GinkgoHelper()
	return readJournal("operator-writes.jsonl", func(r writeRecord) bool {
		if r.At.Before(since) || r.Manager == application.FieldManager {
			return false
		}
		return strings.Contains(r.Path, "/namespaces/"+ns+"/") || slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(r.Path, "/"+n) })
	})
}
