package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/sidecarinjector"
)

// The mesh toggles (mesh-on, mesh-off) put a fleet in the Istio mesh and take it out again.
// The local cluster has Istio's security CRDs but no Istio: the campaign serves
// tests/sidecarinjector for every fleet namespace, with failure policy Fail as Istio's injector
// has it (a Pod the injector could not answer for is refused and its workload controller
// retries; it is never created without the proxy its template asks for). The proxy style
// (native sidecar or plain container) follows the seed's parity, so a replay injects the same.
//
// Joining or leaving rolls every member, one at a time, behind a transitional
// PeerAuthentication (docs/networking.md); rule a judges the roll like any other. Rule h: a
// fleet that reports Ready/Provisioned for its generation runs a proxy in every member (not
// finished, terminating ones included) when spec.mesh.istio is set, and in none when it is
// not: the operator's MeshMixed, judged from the Pods the test's watch sees. After the storm,
// each fleet's mesh objects must match its spec.mesh too (meshSettled).

// meshSeen: a Provisioned fleet's members may disagree with spec.mesh this long in the
// monitor's view (its fleet and Pod watches are separate streams) before rule h fails.
const meshSeen = 5 * time.Second

// meshSettleBound: after every fleet is Ready, its mesh objects match spec.mesh within this
// (the pass that sees the last proxy gone deletes them; a leader handoff can come first).
const meshSettleBound = time.Minute

// meshView is what rule h knows of one fleet.
type meshView struct {
	wanted      bool  // spec.mesh.istio is set
	provisioned bool  // Ready/Provisioned for its generation
	generation  int64 // the fleet's metadata.generation
	wrongSince  time.Time
	counted     int64 // the generation last counted as joined (meshJoined)
}

// observeFleet folds one version of the fleet into the view.
func (v *meshView) observeFleet(fl *v1.CelldFleet) {
	v.wanted = fl.Spec.Mesh != nil && fl.Spec.Mesh.Istio != nil
	ready := meta.FindStatusCondition(fl.Status.Conditions, v1.ConditionReady)
	v.provisioned = ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == v1.ReasonProvisioned &&
		fl.Status.ObservedGeneration == fl.Generation
	v.generation = fl.Generation
}

// judgeMesh applies rule h to f. Caller holds mu.
func (m *monitor) judgeMesh(f *fleetView, now time.Time) {
	if f.uid == "" || f.deleting || !f.mesh.provisioned {
		f.mesh.wrongSince = time.Time{}
		return
	}
	m.checks[ruleMesh]++
	pods := f.podList()
	var wrong []string
	live := 0
	for _, p := range pods {
		if p.finished {
			continue
		}
		live++
		if p.proxied != f.mesh.wanted {
			wrong = append(wrong, p.name)
		}
	}
	if len(wrong) == 0 {
		f.mesh.wrongSince = time.Time{}
		if f.mesh.wanted && live > 0 && f.mesh.counted != f.mesh.generation {
			f.mesh.counted = f.mesh.generation
			m.meshJoined++
		}
		return
	}
	if f.mesh.wrongSince.IsZero() {
		f.mesh.wrongSince = now
		return
	}
	// after an API server restart the Pod watch may resume late: wait until it has
	if now.Sub(f.mesh.wrongSince) < meshSeen || m.reconnecting(now) {
		return
	}
	want, has := "no proxy", "one"
	if f.mesh.wanted {
		want, has = "a proxy", "none"
	}
	m.violate(ruleMesh, "fleet %s/%s has reported Ready/Provisioned for generation %d for %s while spec.mesh asks %s in every member and %v run %s; pods: %s",
		f.ns, f.name, f.mesh.generation, now.Sub(f.mesh.wrongSince).Round(time.Millisecond), want, wrong, has, describePods(pods))
}

// startInjector serves the sidecar injector for every fleet namespace of the campaign.
func (c *campaign) startInjector(ctx context.Context) error {
	style, name := sidecarinjector.NativeSidecar, "native sidecar (istio-proxy init container, restartPolicy Always)"
	if c.seed%2 != 0 {
		style, name = sidecarinjector.PlainSidecar, "plain istio-proxy container"
	}
	var namespaces []string
	for _, f := range c.fleets {
		namespaces = append(namespaces, f.ns)
	}
	in, err := sidecarinjector.Start(ctx, c.cs, sidecarinjector.Options{
		Namespaces: namespaces, Style: style, Name: "chaos-sidecar-injector",
		FailurePolicy: admissionregistrationv1.Fail, ReadyTimeout: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("sidecar injector: %w", err)
	}
	c.injector = in
	c.logf("sidecar injector serving %s: %s, failure policy Fail", strings.Join(namespaces, ", "), name)
	return nil
}

// stopInjector unregisters the injector, if it runs.
func (c *campaign) stopInjector() {
	if c.injector != nil {
		_ = c.injector.Stop(context.Background())
	}
}

// meshPatch is the merge patch of a mesh toggle.
func meshPatch(on bool) string {
	if on {
		return `{"spec":{"mesh":{"istio":{}}}}`
	}
	return `{"spec":{"mesh":null}}`
}

// meshSettled returns "" when f's mesh objects match its spec.mesh, else what does not:
// meshed, the AuthorizationPolicy FLEET-mesh exists, the transitional PeerAuthentication is
// gone and members reach istiod (TCP 15012); not meshed, neither policy is left and istiod
// egress is closed. Every member's proxy is rule h's, checked on the same read here.
func (c *campaign) meshSettled(ctx context.Context, f *campaignFleet) string {
	fl := &v1.CelldFleet{}
	if err := c.cl.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.spec.Name}, fl); err != nil {
		return err.Error()
	}
	meshed := fl.Spec.Mesh != nil && fl.Spec.Mesh.Istio != nil
	exists := func(resource string) (bool, error) {
		_, err := c.dyn.Resource(schemaGVR("security.istio.io", resource)).Namespace(f.ns).Get(ctx, f.spec.Name+"-mesh", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	authz, err := exists("authorizationpolicies")
	if err != nil {
		return err.Error()
	}
	peer, err := exists("peerauthentications")
	if err != nil {
		return err.Error()
	}
	np := &networkingv1.NetworkPolicy{}
	if err := c.cl.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.spec.Name}, np); err != nil {
		return err.Error()
	}
	egress := istiodEgress(np)
	pods, err := c.members(ctx, f)
	if err != nil {
		return err.Error()
	}
	var wrong []string
	for _, p := range pods {
		if sidecarinjector.HasProxy(&p.Spec) != meshed {
			wrong = append(wrong, p.Name)
		}
	}
	var why []string
	if len(wrong) > 0 {
		why = append(why, fmt.Sprintf("members %v disagree with spec.mesh about their proxy", wrong))
	}
	if authz != meshed {
		why = append(why, fmt.Sprintf("AuthorizationPolicy %s-mesh exists: %v", f.spec.Name, authz))
	}
	if peer {
		why = append(why, fmt.Sprintf("the transitional PeerAuthentication %s-mesh outlived the mixed membership", f.spec.Name))
	}
	if egress != meshed {
		why = append(why, fmt.Sprintf("istiod egress open: %v", egress))
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%s (meshed: %v): %s", f.ns, f.spec.Name, meshed, strings.Join(why, "; "))
}

// istiodEgress: the policy lets members reach istiod's TCP 15012.
func istiodEgress(np *networkingv1.NetworkPolicy) bool {
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			if p.Port != nil && p.Port.IntVal == 15012 {
				return true
			}
		}
	}
	return false
}

// meshedFleet is a monitor with one fleet that reports Provisioned for generation 2, meshed or
// not as asked, with three members proxied as given.
func meshedFleet(t *testing.T, meshed bool, proxied ...bool) (*monitor, *fleetView) {
	t.Helper()
	m := watchedFleet(false, 0)
	f := m.fleets["ns"]
	spec := map[string]any{}
	if meshed {
		spec["mesh"] = map[string]any{"istio": map[string]any{}}
	}
	fl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "celld.eric.dev/v1alpha1", "kind": "CelldFleet",
		"metadata": map[string]any{"namespace": "ns", "name": "pf", "uid": "u1", "generation": int64(2)}, "spec": spec,
		"status": map[string]any{"observedGeneration": int64(2), "conditions": []any{map[string]any{
			"type": v1.ConditionReady, "status": "True", "reason": v1.ReasonProvisioned, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}}}
	for i, p := range proxied {
		name := fmt.Sprint("pf-", i)
		f.pods[name] = memberPod{name: name, ordinal: i, serving: true, proxied: p}
	}
	m.onFleet(nil, fl, false)
	if !f.mesh.provisioned || f.mesh.wanted != meshed {
		t.Fatalf("the view did not read the fleet: %+v", f.mesh)
	}
	return m, f
}

func TestTheMeshRuleFailsAProvisionedFleetWhoseMembersDisagreeWithSpecMeshOnlyOnceConfirmed(t *testing.T) {
	m, f := meshedFleet(t, true, true, false, true)
	m.judgeMesh(f, time.Now())
	if m.Violation() != "" {
		t.Fatalf("a disagreement must last %s before it fails (the watches are separate streams): %s", meshSeen, m.Violation())
	}
	m.judgeMesh(f, time.Now().Add(meshSeen))
	if !strings.Contains(m.Violation(), ruleMesh) || !strings.Contains(m.Violation(), "[pf-1]") {
		t.Fatalf("a meshed fleet Provisioned with an unproxied member must fail rule h naming it, got %q", m.Violation())
	}

	m, f = meshedFleet(t, false, false, true, false)
	m.judgeMesh(f, time.Now())
	m.judgeMesh(f, time.Now().Add(meshSeen))
	if !strings.Contains(m.Violation(), ruleMesh) {
		t.Fatalf("a fleet out of the mesh Provisioned with a proxied member must fail rule h, got %q", m.Violation())
	}

	m, f = meshedFleet(t, true, true, false, true)
	f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1, finished: true}
	m.judgeMesh(f, time.Now())
	m.judgeMesh(f, time.Now().Add(time.Minute))
	if m.Violation() != "" || m.meshJoined != 1 {
		t.Fatalf("a finished Pod runs no proxy and does not count: %q, joined %d", m.Violation(), m.meshJoined)
	}
	m.judgeMesh(f, time.Now().Add(time.Minute))
	if m.meshJoined != 1 {
		t.Fatalf("one generation is counted once, got %d", m.meshJoined)
	}
}

func TestTheMeshRuleJudgesOnlyAFleetProvisionedForItsGeneration(t *testing.T) {
	m, f := meshedFleet(t, true, true, false, false)
	f.mesh.provisioned = false // rolling: Provisioning, or an older generation's Ready
	m.judgeMesh(f, time.Now())
	m.judgeMesh(f, time.Now().Add(time.Minute))
	if m.Violation() != "" {
		t.Fatalf("a fleet that does not claim Provisioned may be mixed: %s", m.Violation())
	}
	m, f = meshedFleet(t, true, true, false, false)
	m.judgeMesh(f, time.Now())
	m.addAPIRestart()() // the Pod watch may resume late: the rule waits for it
	m.judgeMesh(f, time.Now().Add(meshSeen))
	if m.Violation() != "" {
		t.Fatalf("rule h judged during the reconnect window after an API server restart: %s", m.Violation())
	}
}
