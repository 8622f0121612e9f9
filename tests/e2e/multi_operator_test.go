package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/tests/e2e/framework"
	"github.com/celld/celld-operator/tests/localcluster"
)

// Two operator instances on one cluster (issue 29, item 5; docs/operations.md, "More than one
// operator"). Each is the built binary in its own process, running as its own ServiceAccount
// with the RBAC a chart release with fleetNamespaces (and watchNamespaces) gives it: the
// ClusterRole of config/rbac/role.yaml, the leader-election Role in its own operator namespace
// and the fleet Role of config/rbac/fleet_namespace_role.yaml in each of its namespaces only.
// WATCH_NAMESPACE names those namespaces, as the chart's watchNamespaces and OLM's
// OperatorGroup do. A third instance, started in the first one's operator namespace, shows why
// every instance needs its own: the Lease is one per operator namespace.
//
// The suite's own operator (in-process, or the binary of CELLD_E2E_OPERATOR_BINARY) watches
// every namespace and would reconcile these fleets too. Nothing in the suite confines it, so
// the spec fences it off with a ValidatingAdmissionPolicy: every write of the suite's identity
// (the cluster's admin certificate) in the spec's namespaces, and to a reservation of a fleet
// there, is refused, except a Pod's status, which the celld simulator writes with the same
// identity and the operator never does. The spec's own writes impersonate another user.
//
// The file's package-level names start with "mo" (multi-operator).
var _ = Describe("two operator instances on one cluster", Label("multi-operator"), Serial, func() {
	It("keeps each instance to the fleets of its own namespaces and arbitrates a shared bucket through the cluster-scoped reservation", func(ctx context.Context) {
		bin := moBinary()
		_, err := os.Stat(bin)
		Expect(err).NotTo(HaveOccurred(), "the spec runs the operator binary %s: build it with make build (or set %s)", bin, binaryEnv)

		By("namespaces: two operator namespaces, two fleet namespaces per instance, one of neither")
		opA, opB := framework.NewNamespace(ctx, "mo-op-a"), framework.NewNamespace(ctx, "mo-op-b")
		nsA1, nsA2 := fleetNamespace(ctx, "mo-a1"), fleetNamespace(ctx, "mo-a2")
		nsB1, nsB2 := fleetNamespace(ctx, "mo-b1"), fleetNamespace(ctx, "mo-b2")
		nsN := fleetNamespace(ctx, "mo-neither")
		nsC := fleetNamespace(ctx, "mo-c")
		a := &moInstance{name: "a", opNS: opA, sa: "celld-operator-a", watch: []string{nsA1, nsA2}}
		b := &moInstance{name: "b", opNS: opB, sa: "celld-operator-b", watch: []string{nsB1, nsB2}}
		// c is installed like a and b, but in a's operator namespace: a second chart release
		// in the same namespace.
		c := &moInstance{name: "c", opNS: opA, sa: "celld-operator-c", watch: []string{nsC}}
		instances := []*moInstance{a, b, c}
		mine := []string{nsA1, nsA2, nsB1, nsB2, nsN, nsC}

		By("RBAC of three releases: each ServiceAccount gets the fleet Role in its own namespaces only")
		for _, in := range instances {
			moGrant(ctx, in)
		}

		By("the suite's operator is fenced off the spec's namespaces by admission")
		spec := moFence(ctx, mine)

		By("instances a and b start, each with its own WATCH_NAMESPACE and operator namespace, and each leads")
		a.start(bin)
		b.start(bin)
		leaseA := moAwaitLease(ctx, opA, a)
		moAwaitLease(ctx, opB, b)
		By("instance c starts in a's operator namespace: it shares a's Lease")
		c.start(bin)
		cStarted := time.Now()

		By("monitors, from before the first fleet exists")
		var untouched, recorders []*moMonitor
		for _, ns := range []string{nsN, nsC} {
			// Nothing may ever write a fleet of nsN (nobody's) or nsC (c never leads): no
			// finalizer, no status, no child.
			untouched = append(untouched,
				moWatch(ctx, moFleetsGVR, ns, "", moUntouchedFleet),
				moWatch(ctx, moStatefulSetsGVR, ns, "", moAnyObject),
				moWatch(ctx, moServicesGVR, ns, "", moAnyObject),
				moWatch(ctx, moNetworkPoliciesGVR, ns, "", moAnyObject))
		}
		// Every workload and Service a fleet of the shared bucket ever gets, by fleet UID.
		provisioned := &moUIDSet{}
		for _, ns := range []string{nsA2, nsB2} {
			for _, gvr := range []schema.GroupVersionResource{moStatefulSetsGVR, moServicesGVR} {
				recorders = append(recorders, moWatch(ctx, gvr, ns, v1.LabelFleetUID, provisioned.record))
			}
		}
		// Every condition each fleet of the instances ever carried.
		reasons := &moReasonLog{}
		for _, ns := range []string{nsA1, nsA2, nsB1, nsB2} {
			recorders = append(recorders, moWatch(ctx, moFleetsGVR, ns, "", reasons.record))
		}

		By("fleets: one per instance, one in a namespace of neither, one for instance c")
		fa, fb := persistentFleet(nsA1, "a", moMembers), persistentFleet(nsB1, "b", moMembers)
		fn, fc := persistentFleet(nsN, "n", moMembers), persistentFleet(nsC, "c", moMembers)
		for _, f := range []*v1.CelldFleet{fa, fb, fn, fc} {
			Expect(spec.Create(ctx, f)).To(Succeed())
		}

		By("two fleets, one per instance, on the same bucket, created at once")
		bucket := "mo-shared-" + nsA2
		fca, fcb := persistentFleet(nsA2, "shared", moMembers), persistentFleet(nsB2, "shared", moMembers)
		fca.Spec.Storage.Bucket, fcb.Spec.Storage.Bucket = bucket, bucket
		resName := reservation.Name(bucket, "")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, f := range []*v1.CelldFleet{fca, fcb} {
			wg.Go(func() { errs[i] = spec.Create(ctx, f) })
		}
		wg.Wait()
		Expect(errs).To(HaveEach(Succeed()))

		By("each instance makes its own fleet Ready")
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			for _, in := range instances {
				g.Expect(in.running()).To(BeTrue(), "instance %s exited: %s", in.name, in.tail())
			}
			for _, f := range []*v1.CelldFleet{fa, fb} {
				live := getFleet(ctx, f.Namespace, f.Name)
				g.Expect(conditionOf(live, v1.ConditionReady)).To(Equal("True/"+v1.ReasonProvisioned), "fleet %s/%s", f.Namespace, f.Name)
				g.Expect(live.Status.ReadyReplicas).To(Equal(moMembers))
			}
		}).Should(Succeed())

		By("the shared bucket: exactly one fleet holds the reservation and runs, the other reports StorageScopeConflict")
		var winner, loser *v1.CelldFleet
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			res := &v1.CelldStorageReservation{}
			g.Expect(kube().Get(ctx, types.NamespacedName{Name: resName}, res)).To(Succeed())
			liveA, liveB := getFleet(ctx, nsA2, "shared"), getFleet(ctx, nsB2, "shared")
			winner, loser = liveA, liveB
			if res.Spec.FleetUID == string(liveB.UID) {
				winner, loser = liveB, liveA
			}
			g.Expect(res.Spec.FleetUID).To(Equal(string(winner.UID)), "the reservation names neither fleet")
			g.Expect(res.Spec.FleetNamespace).To(Equal(winner.Namespace))
			g.Expect(conditionOf(winner, v1.ConditionReady)).To(Equal("True/"+v1.ReasonProvisioned), "winner %s", winner.Namespace)
			g.Expect(conditionOf(loser, v1.ConditionBlocked)).To(Equal("True/"+v1.ReasonStorageScopeConflict), "loser %s", loser.Namespace)
			blocked := conditionMessage(loser, v1.ConditionBlocked)
			g.Expect(blocked).To(ContainSubstring(resName), "the conflict names the reservation")
			g.Expect(loser.Status.Reservation).To(Equal(resName))
		}).Should(Succeed())
		AddReportEntry("shared bucket", fmt.Sprintf("winner %s/%s, loser %s/%s", winner.Namespace, winner.Name, loser.Namespace, loser.Name))

		By("the winner is deleted by its own instance; the reservation stays, and the loser stays refused")
		Expect(spec.Delete(ctx, winner.DeepCopy())).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func() bool {
			err := kube().Get(ctx, client.ObjectKeyFromObject(winner), &v1.CelldFleet{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "the winner %s/%s was not finalized", winner.Namespace, winner.Name)
		// A spec change makes the loser's instance decide again after the winner is gone.
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, moMembers+1)))
		Expect(spec.Patch(ctx, loser.DeepCopy(), patch)).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			live := getFleet(ctx, loser.Namespace, loser.Name)
			g.Expect(live.Status.ObservedGeneration).To(Equal(live.Generation), "the loser's instance has not decided on the new spec yet")
			g.Expect(conditionOf(live, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonStorageScopeConflict))
		}).Should(Succeed())
		// Blocked fleets are re-examined every 3 s (--waiting-requeue-period): several passes.
		Consistently(ctx, func(g Gomega) {
			live := getFleet(ctx, loser.Namespace, loser.Name)
			g.Expect(conditionOf(live, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonStorageScopeConflict))
			res := &v1.CelldStorageReservation{}
			g.Expect(kube().Get(ctx, types.NamespacedName{Name: resName}, res)).To(Succeed())
			g.Expect(res.Spec.FleetUID).To(Equal(string(winner.UID)), "the reservation changed hands")
		}).WithTimeout(8 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		for _, m := range recorders {
			m.check() // the recorders' watches never ended: they saw every change
		}
		Expect(provisioned.get()).To(ConsistOf(string(winner.UID)), "workloads and Services of the shared bucket's fleets, by fleet UID: only the winner's")
		Expect(reasons.ever(loser.Namespace, loser.Name)).NotTo(ContainElement(HavePrefix(v1.ConditionReady+"=True")), "the loser was Ready at some point")
		for _, r := range reasons.all() {
			Expect(r).NotTo(ContainSubstring(v1.ReasonNamespaceAccessDenied), "a fleet was reconciled by an instance without rights in its namespace")
		}

		By("instance c never led: a kept the Lease for longer than its duration, and c's fleet stayed untouched")
		// c must have had the chance to take an expired Lease: more than the 15 s lease duration
		framework.EventuallyWithin(ctx, time.Minute, func(g Gomega) {
			for _, m := range untouched {
				if v := m.violation(); v != "" {
					StopTrying(v).Now()
				}
			}
			g.Expect(time.Since(cStarted)).To(BeNumerically(">", 20*time.Second))
		}).Should(Succeed())
		lease := &coordinationv1.Lease{}
		Expect(kube().Get(ctx, types.NamespacedName{Namespace: opA, Name: moLeaseName}, lease)).To(Succeed())
		Expect(lease.Spec.HolderIdentity).To(Equal(leaseA.Spec.HolderIdentity), "the Lease of %s changed holder", opA)
		Expect(lease.Spec.LeaseTransitions).To(Equal(leaseA.Spec.LeaseTransitions))
		Expect(c.fleetLog().mutations).To(BeEmpty(), "instance c changed something although a holds the Lease of their operator namespace")
		Expect(c.fleetLog().reconciles).To(BeZero(), "instance c reconciled a fleet although a holds the Lease")
		rawC, err := os.ReadFile(c.logPath())
		Expect(err).NotTo(HaveOccurred())
		Expect(string(rawC)).To(ContainSubstring(`"msg":"Attempting to acquire leader lease...","lock":"`+opA+"/"+moLeaseName+`"`), "c did not contend for a's Lease")
		Expect(string(rawC)).NotTo(ContainSubstring("Successfully acquired lease"))
		for _, m := range untouched {
			m.check()
		}
		for _, in := range instances {
			Expect(in.running()).To(BeTrue(), "instance %s exited: %s", in.name, in.tail())
		}

		By("each instance's log names only fleets of its own namespaces, and no second writer")
		for _, in := range instances {
			seen := in.fleetLog()
			var foreign []string
			for ns := range seen.namespaces {
				if !slices.Contains(in.watch, ns) && ns != in.opNS {
					foreign = append(foreign, ns)
				}
			}
			Expect(foreign).To(BeEmpty(), "instance %s (WATCH_NAMESPACE %v) logged about namespaces %v", in.name, in.watch, foreign)
			for fleet := range seen.mutations {
				Expect(in.watch).To(ContainElement(strings.SplitN(fleet, "/", 2)[0]), "instance %s logged a mutation of %s", in.name, fleet)
			}
			raw, err := os.ReadFile(in.logPath())
			Expect(err).NotTo(HaveOccurred())
			Expect(string(raw)).NotTo(ContainSubstring(nsN), "instance %s mentions the namespace of neither", in.name)
		}
		Expect(a.fleetLog().mutations).To(HaveKey(nsA1+"/a"), "instance a logged no mutation of its fleet: the check above proves nothing")
		Expect(b.fleetLog().mutations).To(HaveKey(nsB1+"/b"), "instance b logged no mutation of its fleet: the check above proves nothing")
		for _, in := range []*moInstance{a, b} {
			// Nobody else writes the instances' objects: a restore would be a second writer
			// (an instance whose namespaces overlap renders another operator namespace into
			// the NetworkPolicy, and the two restore it in turn).
			Expect(in.fleetLog().actions).NotTo(HaveKey("restore"), "instance %s restored an object another writer changed", in.name)
		}

		if binaryOperator() == "" {
			// The in-process operator journals every write that succeeded: the fence held.
			writes := readJournal("operator-writes.jsonl", func(r writeRecord) bool {
				for _, ns := range mine {
					if strings.Contains(r.Path, "/namespaces/"+ns+"/") {
						return true
					}
				}
				return strings.HasSuffix(r.Path, "/"+resName)
			})
			Expect(writes).To(BeEmpty(), "the suite's operator wrote in the spec's namespaces")
		}

		By("every remaining fleet is deleted; a and b finalize their own")
		for _, f := range []*v1.CelldFleet{fa, fb, loser, fn, fc} {
			Expect(spec.Delete(ctx, f.DeepCopy())).To(Succeed())
		}
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			for _, f := range []*v1.CelldFleet{fa, fb, loser, fn, fc} {
				err := kube().Get(ctx, client.ObjectKeyFromObject(f), &v1.CelldFleet{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "fleet %s/%s is still there", f.Namespace, f.Name)
			}
		}).Should(Succeed())
	})
})

// moMembers is the size of every fleet of the spec: one per zone of the local cluster's three.
const moMembers int32 = 3

// moLeaseName is main.go's LeaderElectionID: one Lease per operator namespace.
const moLeaseName = "celld-operator.celld.eric.dev"

var (
	moFleetsGVR          = v1.GroupVersion.WithResource("celldfleets")
	moStatefulSetsGVR    = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	moServicesGVR        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	moNetworkPoliciesGVR = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
)

// moBinary is the operator binary the instances run: CELLD_E2E_OPERATOR_BINARY, or
// bin/manager, which make test-e2e builds first.
func moBinary() string {
	if bin := binaryOperator(); bin != "" {
		return bin
	}
	abs, _ := filepath.Abs(filepath.Join("..", "..", "bin", "manager"))
	return abs
}

// moInstance is one operator binary in its own process, as one chart release runs it.
type moInstance struct {
	name, opNS, sa string
	watch          []string
	kubeconfig     string

	cmd    *exec.Cmd
	exited chan struct{}
}

func (in *moInstance) logPath() string {
	return filepath.Join(artifactsDir(), fmt.Sprintf("multi-operator-%s-%s.log", in.opNS, in.name))
}

// start runs the binary with the instance's identity, operator namespace and WATCH_NAMESPACE
// until the spec ends. Leader election is on, as in a cluster; metrics are off and the probes
// listen on a free loopback port, so instances never compete for a port.
func (in *moInstance) start(bin string) {
	GinkgoHelper()
	in.cmd = exec.Command(bin, "--leader-elect=true", "--operator-namespace="+in.opNS, "--operator-service-account="+in.sa,
		"--network-policy-enforced", "--storage-provisioners="+localcluster.ProvisionerName,
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0",
		// a blocked fleet is re-examined every 3 s instead of 30 s, so the spec sees several
		// passes of the conflicting fleet in seconds
		"--waiting-requeue-period=3s")
	// exec keeps the last value of a variable given twice
	in.cmd.Env = append(os.Environ(), "KUBECONFIG="+in.kubeconfig, "WATCH_NAMESPACE="+strings.Join(in.watch, ","),
		"POD_NAMESPACE=", "POD_SERVICE_ACCOUNT=")
	log, err := os.Create(in.logPath())
	Expect(err).NotTo(HaveOccurred())
	in.cmd.Stdout, in.cmd.Stderr = log, log
	Expect(in.cmd.Start()).To(Succeed(), "start %s", bin)
	in.exited = make(chan struct{})
	go func() {
		_ = in.cmd.Wait()
		_ = log.Close()
		close(in.exited)
	}()
	DeferCleanup(in.stop)
}

// stop ends the process as the kubelet would: SIGTERM, then SIGKILL after the chart's 10 s
// grace.
func (in *moInstance) stop() {
	if !in.running() {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
	case <-time.After(10 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.exited
	}
}

func (in *moInstance) running() bool {
	select {
	case <-in.exited:
		return false
	default:
		return true
	}
}

// tail is the end of the instance's log, for a failure message.
func (in *moInstance) tail() string {
	raw, _ := os.ReadFile(in.logPath())
	if len(raw) > 3000 {
		raw = raw[len(raw)-3000:]
	}
	return string(raw)
}

// moInstanceLog is what an instance's JSON log says about fleets.
type moInstanceLog struct {
	// namespaces every line names: a fleet (the "fleet" key of the mutation and observer
	// lines, or controller-runtime's "CelldFleet"/"CelldPreview" object key) or a "namespace"
	// key
	namespaces map[string]bool
	// mutations counts the "mutation" lines per fleet (namespace/name), actions per action
	mutations, actions map[string]int
	// reconciles counts the lines logged inside a fleet's reconcile
	reconciles int
}

func (in *moInstance) fleetLog() moInstanceLog {
	GinkgoHelper()
	out := moInstanceLog{namespaces: map[string]bool{}, mutations: map[string]int{}, actions: map[string]int{}}
	f, err := os.Open(in.logPath())
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := map[string]any{}
		if !strings.HasPrefix(sc.Text(), "{") || json.Unmarshal(sc.Bytes(), &line) != nil {
			continue // klog's text lines (leader election) name no fleet
		}
		switch fleet := line["fleet"].(type) {
		case string: // the mutation lines: "namespace/name"
			out.namespaces[strings.SplitN(fleet, "/", 2)[0]] = true
			if line["msg"] == "mutation" {
				out.mutations[fleet]++
				if action, ok := line["action"].(string); ok {
					out.actions[action]++
				}
			}
		case map[string]any: // the observer's lines: {"name", "namespace"}
			if ns, ok := fleet["namespace"].(string); ok {
				out.namespaces[ns] = true
			}
		}
		if ns, ok := line["namespace"].(string); ok && ns != "" {
			out.namespaces[ns] = true
		}
		for _, kind := range []string{"CelldFleet", "CelldPreview"} {
			if obj, ok := line[kind].(map[string]any); ok {
				if ns, ok := obj["namespace"].(string); ok {
					out.namespaces[ns] = true
				}
				if kind == "CelldFleet" {
					out.reconciles++
				}
			}
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return out
}

// moGrant gives the instance's ServiceAccount what a chart release gives its own (the
// ClusterRole, the leader-election Role in its operator namespace, the fleet Role in each of its
// namespaces), from the manifests of config/rbac, and writes a kubeconfig with its token.
func moGrant(ctx context.Context, in *moInstance) {
	GinkgoHelper()
	c := kube()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: in.opNS, Name: in.sa}}
	Expect(c.Create(ctx, sa)).To(Succeed())
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: in.opNS, Name: in.sa}}

	cluster := "e2e-" + in.opNS + "-" + in.sa
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: cluster}, Rules: moManifestRules("role.yaml", "ClusterRole")}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cluster}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cluster}}
	for _, o := range []client.Object{cr, crb} {
		Expect(c.Create(ctx, o)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { _ = kube().Delete(ctx, o) })
	}
	bind := func(ns, role string, rules []rbacv1.PolicyRule) {
		Expect(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role}, Rules: rules})).To(Succeed())
		Expect(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role}})).To(Succeed())
	}
	bind(in.opNS, in.sa+"-leader-election", moManifestRules("leader_election_role.yaml", "Role"))
	for _, ns := range in.watch {
		bind(ns, in.sa+"-fleet", moManifestRules("fleet_namespace_role.yaml", "Role"))
	}

	token, err := framework.Cluster.Client.CoreV1().ServiceAccounts(in.opNS).CreateToken(ctx, in.sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	admin := framework.Cluster.Config
	cfg := &rest.Config{Host: admin.Host, BearerToken: token.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData, CAFile: admin.CAFile}}
	in.kubeconfig = filepath.Join(artifactsDir(), fmt.Sprintf("multi-operator-%s-%s.kubeconfig", in.opNS, in.name))
	Expect(writeKubeconfig(cfg, in.kubeconfig)).To(Succeed())
}

// moManifestRules reads the rules of the object of kind in config/rbac/file.
func moManifestRules(file, kind string) []rbacv1.PolicyRule {
	GinkgoHelper()
	f, err := os.Open(filepath.Join("..", "..", "config", "rbac", file))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var doc struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := dec.Decode(&doc); err != nil {
			Fail(fmt.Sprintf("config/rbac/%s holds no %s: %v", file, kind, err))
		}
		if doc.Kind == kind {
			Expect(doc.Rules).NotTo(BeEmpty())
			return doc.Rules
		}
	}
}

// moAwaitLease waits until the instance holds the Lease of its operator namespace, the only
// contender there so far, and returns it.
func moAwaitLease(ctx context.Context, ns string, in *moInstance) *coordinationv1.Lease {
	GinkgoHelper()
	lease := &coordinationv1.Lease{}
	framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
		g.Expect(in.running()).To(BeTrue(), "instance %s exited: %s", in.name, in.tail())
		g.Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: moLeaseName}, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		g.Expect(*lease.Spec.HolderIdentity).NotTo(BeEmpty())
	}).Should(Succeed(), "instance %s never led in %s", in.name, ns)
	return lease
}

// moFence keeps the suite's operator, which watches every namespace, from writing
// anything in namespaces, or to a reservation of a fleet there: a ValidatingAdmissionPolicy
// refuses every write of its identity (the cluster's admin certificate) there. It returns the
// client the spec writes with, which impersonates another user, and waits until the API server
// enforces the policy.
func moFence(ctx context.Context, namespaces []string) client.Client {
	GinkgoHelper()
	review, err := framework.Cluster.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	suite := review.Status.UserInfo.Username
	Expect(suite).NotTo(BeEmpty())
	quoted := make([]string, len(namespaces))
	for i, ns := range namespaces {
		quoted[i] = "'" + ns + "'"
	}
	list := "[" + strings.Join(quoted, ", ") + "]"
	const message = "e2e multi-operator: the suite's operator must not write in this spec's namespaces"
	name := "e2e-multi-operator-" + namespaces[0]
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: new(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "suite-operator", Expression: fmt.Sprintf("request.userInfo.username == '%s'", suite)}},
			Validations: []admissionregistrationv1.Validation{
				// The harness writes as the same admin: the local cluster's provisioner creates
				// PersistentVolumes (cluster-scoped: request.namespace is unset) and the celld
				// simulator patches member Pods' status, which the operator never writes.
				{Expression: "request.resource.resource == 'namespaces' || !has(request.namespace) || !(request.namespace in " + list + ") || " +
					"(request.resource.resource == 'pods' && has(request.subResource) && request.subResource == 'status')", Message: message},
				{Expression: "request.resource.resource != 'celldstoragereservations' || !((object != null ? object : oldObject).spec.fleetNamespace in " + list + ")", Message: message},
			},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		Expect(kube().Create(ctx, o)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { _ = kube().Delete(ctx, o) })
	}
	// The API server loads policies asynchronously: a dry-run write of the suite's identity in
	// each namespace must be refused before any fleet exists.
	framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
		for _, ns := range namespaces {
			probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fence-probe"}}
			err := kube().Create(ctx, probe, client.DryRunAll)
			g.Expect(err).To(HaveOccurred(), "the suite's identity may still write in %s", ns)
			g.Expect(err.Error()).To(ContainSubstring(message))
		}
	}).Should(Succeed())
	cfg := rest.CopyConfig(framework.Cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "e2e-multi-operator-spec", Groups: []string{"system:masters", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: kube().Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// moMonitor follows the objects of one resource in one namespace through a watch, from the
// state a list shows on, and keeps the first violation its judge reports.
type moMonitor struct {
	mu     sync.Mutex
	what   string
	first  string
	closed bool
}

// moWatch lists and then watches gvr in ns (only objects carrying label, when it is not
// empty) until the spec ends; judge returns a violation, or "".
func moWatch(ctx context.Context, gvr schema.GroupVersionResource, ns, label string, judge func(*unstructured.Unstructured) string) *moMonitor {
	GinkgoHelper()
	m := &moMonitor{what: gvr.Resource + " in " + ns}
	res := framework.Cluster.Dynamic.Resource(gvr).Namespace(ns)
	opts := metav1.ListOptions{LabelSelector: label}
	list, err := res.List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	for i := range list.Items {
		m.judge(judge, &list.Items[i], "LIST")
	}
	opts.ResourceVersion = list.GetResourceVersion()
	w, err := res.Watch(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	stopped := make(chan struct{})
	DeferCleanup(func() {
		close(stopped)
		w.Stop()
	})
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				m.judge(judge, u, string(ev.Type))
			}
		}
		select {
		case <-stopped:
		default:
			m.mu.Lock()
			m.closed = true // blind from here on: check fails
			m.mu.Unlock()
		}
	}()
	return m
}

func (m *moMonitor) judge(judge func(*unstructured.Unstructured) string, u *unstructured.Unstructured, event string) {
	v := judge(u)
	m.mu.Lock()
	defer m.mu.Unlock()
	if v != "" && m.first == "" {
		m.first = fmt.Sprintf("%s (%s %s at %s)", v, event, u.GetName(), time.Now().Format(time.RFC3339Nano))
	}
}

func (m *moMonitor) violation() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.first != "" {
		return m.what + ": " + m.first
	}
	if m.closed {
		return m.what + ": the watch ended early, so the monitor stopped seeing changes"
	}
	return ""
}

func (m *moMonitor) check() {
	GinkgoHelper()
	Expect(m.violation()).To(BeEmpty())
}

// moUntouchedFleet: a fleet no operator may write has no finalizer and no status.
func moUntouchedFleet(u *unstructured.Unstructured) string {
	if fin := u.GetFinalizers(); len(fin) > 0 {
		return fmt.Sprintf("fleet %s got finalizers %v", u.GetName(), fin)
	}
	if status, _, _ := unstructured.NestedMap(u.Object, "status"); len(status) > 0 {
		return fmt.Sprintf("fleet %s got a status: %v", u.GetName(), status)
	}
	return ""
}

// moAnyObject: nothing of this kind may exist in the namespace.
func moAnyObject(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s exists (fleet UID label %q)", u.GetKind(), u.GetName(), u.GetLabels()[v1.LabelFleetUID])
}

// moUIDSet records the fleet UID labels of the objects it is shown.
type moUIDSet struct {
	mu   sync.Mutex
	uids []string
}

func (s *moUIDSet) record(u *unstructured.Unstructured) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if uid := u.GetLabels()[v1.LabelFleetUID]; !slices.Contains(s.uids, uid) {
		s.uids = append(s.uids, uid)
	}
	return ""
}

func (s *moUIDSet) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.uids)
}

// moReasonLog records every condition ("Type=Status/Reason") each fleet carried.
type moReasonLog struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (r *moReasonLog) record(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string][]string{}
	}
	key := u.GetNamespace() + "/" + u.GetName()
	for _, c := range conds {
		m, _ := c.(map[string]any)
		s := fmt.Sprintf("%v=%v/%v", m["type"], m["status"], m["reason"])
		if !slices.Contains(r.seen[key], s) {
			r.seen[key] = append(r.seen[key], s)
		}
	}
	return ""
}

func (r *moReasonLog) ever(ns, name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen[ns+"/"+name])
}

func (r *moReasonLog) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for fleet, s := range r.seen {
		for _, c := range s {
			out = append(out, fleet+" "+c)
		}
	}
	sort.Strings(out)
	return out
}
