package workload_test

import (
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/workload"
)

// TestWorkloadsCarryOwnershipLabelsAndNoOwnerReferences: the fleet UID label is the selector and
// the proof of ownership on the workload, its Pods and its claims; no owner reference, so a
// foreground delete of the fleet cannot cascade past the finalizer's ordered teardown.
func TestWorkloadsCarryOwnershipLabelsAndNoOwnerReferences(t *testing.T) {
	names, fleets := samples(t)
	for _, name := range names {
		f := fleets[name]
		obj := render(f, testOptions(f))
		var meta metav1.ObjectMeta
		var selector *metav1.LabelSelector
		var pod corev1.PodTemplateSpec
		var claims []corev1.PersistentVolumeClaim
		switch w := obj.(type) {
		case *appsv1.StatefulSet:
			meta, selector, pod, claims = w.ObjectMeta, w.Spec.Selector, w.Spec.Template, w.Spec.VolumeClaimTemplates
		case *appsv1.Deployment:
			meta, selector, pod = w.ObjectMeta, w.Spec.Selector, w.Spec.Template
		}
		want := map[string]string{
			v1.LabelFleetUID:               string(testUID),
			"app.kubernetes.io/name":       "celld",
			"app.kubernetes.io/instance":   f.Name,
			"app.kubernetes.io/managed-by": "celld-operator",
		}
		if meta.Name != f.Name || meta.Namespace != testNamespace || !maps.Equal(meta.Labels, want) {
			t.Errorf("%s: workload %s/%s labels %v, want %s/%s %v", name, meta.Namespace, meta.Name, meta.Labels, testNamespace, f.Name, want)
		}
		if len(meta.OwnerReferences) != 0 || len(pod.OwnerReferences) != 0 {
			t.Errorf("%s: the workload must carry no owner references", name)
		}
		if !selects(selector.MatchLabels, f) || len(selector.MatchExpressions) != 0 || !maps.Equal(selector.MatchLabels, workload.Selector(f)) {
			t.Errorf("%s: selector %v, want the fleet UID only", name, selector)
		}
		for k, v := range want {
			if pod.Labels[k] != v {
				t.Errorf("%s: Pod label %s=%q, want %q", name, k, pod.Labels[k], v)
			}
		}
		for _, c := range claims {
			if !selects(c.Labels, f) || len(c.OwnerReferences) != 0 {
				t.Errorf("%s: claim template labels %v / owners %v, want the fleet UID only", name, c.Labels, c.OwnerReferences)
			}
		}
	}
}

// TestPersistentFleetStatefulSet pins the shape the lifecycle depends on.
func TestPersistentFleetStatefulSet(t *testing.T) {
	f := fleet(t, "persistent")
	o := testOptions(f)
	s := workload.StatefulSet(f, o, 4)
	sp := s.Spec
	if sp.ServiceName != "persistent-peers" || sp.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("serviceName %q, podManagementPolicy %q", sp.ServiceName, sp.PodManagementPolicy)
	}
	if sp.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || *sp.UpdateStrategy.RollingUpdate.Partition != 0 ||
		sp.UpdateStrategy.RollingUpdate.MaxUnavailable != nil {
		t.Errorf("update strategy %+v, want RollingUpdate partition 0, one member at a time", sp.UpdateStrategy)
	}
	r := sp.PersistentVolumeClaimRetentionPolicy
	if r == nil || r.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || r.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("claim retention %+v, want Retain/Retain: only the operator deletes a fleet's disks", r)
	}
	if len(sp.VolumeClaimTemplates) != 1 {
		t.Fatalf("want one claim template, got %d", len(sp.VolumeClaimTemplates))
	}
	c := sp.VolumeClaimTemplates[0]
	if c.Name != v1.ClaimTemplateName || c.Annotations[v1.AnnotationStorageReservation] != o.ReservationName {
		t.Errorf("claim template %q annotations %v", c.Name, c.Annotations)
	}
	if len(c.Spec.AccessModes) != 1 || c.Spec.AccessModes[0] != corev1.ReadWriteOncePod || *c.Spec.StorageClassName != "ebs-gp3" {
		t.Errorf("claim spec %+v, want ReadWriteOncePod on ebs-gp3", c.Spec)
	}
	if got := c.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("20Gi")) != 0 {
		t.Errorf("claim size %s, want 20Gi", got.String())
	}
	for _, v := range sp.Template.Spec.Volumes {
		if v.Name == v1.ClaimTemplateName {
			t.Error("a PersistentFleet member's data must come from its claim, not a Pod volume")
		}
	}
	if mountPath(sp.Template, v1.ClaimTemplateName) != "/work" {
		t.Error("the data claim must be mounted at /work")
	}
	if _, ok := sp.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
		t.Error("a PersistentFleet member keeps its data on its claim and requests no ephemeral storage")
	}
	o.ReservationName = ""
	if a := workload.StatefulSet(f, o, 3).Spec.VolumeClaimTemplates[0].Annotations; a != nil {
		t.Errorf("without a reservation name the claim template has no annotation, got %v", a)
	}
}

// TestBucketLayouts: the Deployment replaces one member at a time without surging, and both
// Bucket layouts keep data on a size-limited emptyDir that is also requested as ephemeral storage.
func TestBucketLayouts(t *testing.T) {
	f := fleet(t, "bucket")
	d := workload.Deployment(f, testOptions(f), 5)
	st := d.Spec.Strategy
	if st.Type != appsv1.RollingUpdateDeploymentStrategyType || st.RollingUpdate.MaxUnavailable.IntValue() != 1 || st.RollingUpdate.MaxSurge.IntValue() != 0 {
		t.Errorf("strategy %+v, want RollingUpdate maxUnavailable 1 maxSurge 0", st)
	}
	if *d.Spec.Replicas != 5 {
		t.Errorf("replicas %d, want 5", *d.Spec.Replicas)
	}
	o := fleet(t, "bucket-ordered")
	s := workload.StatefulSet(o, testOptions(o), 3)
	if len(s.Spec.VolumeClaimTemplates) != 0 || s.Spec.ServiceName != "bucket-ordered-peers" {
		t.Errorf("the Ordered layout is the StatefulSet shape without claims")
	}
	for _, c := range []struct {
		name         string
		tpl          corev1.PodTemplateSpec
		limit, apply string
	}{
		{"Deployment", d.Spec.Template, "10Gi", "10Gi"},
		{"Ordered", s.Spec.Template, "10Gi", "10Gi"},
		{"preview scratch", workload.PodTemplate(fleet(t, "bucket-ordered", preview), testOptions(o)), "512Mi", "64Mi"},
	} {
		checkScratch(t, c.name, c.tpl, c.limit, c.apply)
	}
}

func checkScratch(t *testing.T, name string, tpl corev1.PodTemplateSpec, limit, request string) {
	t.Helper()
	var size *resource.Quantity
	for _, v := range tpl.Spec.Volumes {
		if v.Name == v1.ClaimTemplateName && v.EmptyDir != nil {
			size = v.EmptyDir.SizeLimit
		}
	}
	if size == nil || size.Cmp(resource.MustParse(limit)) != 0 {
		t.Errorf("%s: data emptyDir sizeLimit %v, want %s", name, size, limit)
	}
	r := tpl.Spec.Containers[0].Resources
	l, q := r.Limits[corev1.ResourceEphemeralStorage], r.Requests[corev1.ResourceEphemeralStorage]
	if l.Cmp(resource.MustParse(limit)) != 0 || q.Cmp(resource.MustParse(request)) != 0 {
		t.Errorf("%s: ephemeral-storage request %s limit %s, want %s/%s", name, q.String(), l.String(), request, limit)
	}
	if mountPath(tpl, v1.ClaimTemplateName) != "/work" {
		t.Errorf("%s: data must be mounted at /work", name)
	}
}

func mountPath(tpl corev1.PodTemplateSpec, volume string) string {
	for _, m := range tpl.Spec.Containers[0].VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	return ""
}

// TestMemberContainer: ports, readiness only, resources, grace and the restricted security
// profile, for every sample.
func TestMemberContainer(t *testing.T) {
	names, fleets := samples(t)
	for _, name := range names {
		f := fleets[name]
		spec := workload.PodTemplate(f, testOptions(f)).Spec
		if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
			t.Fatalf("%s: a member runs celld alone", name)
		}
		c := spec.Containers[0]
		if c.Name != "celld" || c.Image != f.Spec.RuntimeImage {
			t.Errorf("%s: container %s image %s", name, c.Name, c.Image)
		}
		if len(c.Ports) != 2 || c.Ports[0].Name != "application" || c.Ports[0].ContainerPort != 8080 ||
			c.Ports[1].Name != "peer" || c.Ports[1].ContainerPort != 8081 {
			t.Errorf("%s: ports %v", name, c.Ports)
		}
		p := c.ReadinessProbe
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/.well-known/celld/health" || p.HTTPGet.Port.IntValue() != 8080 ||
			p.PeriodSeconds != 2 || p.TimeoutSeconds != 1 || p.FailureThreshold != 3 {
			t.Errorf("%s: readiness probe %+v", name, p)
		}
		if c.LivenessProbe != nil || c.StartupProbe != nil {
			t.Errorf("%s: a recovering member must not be restarted by a liveness or startup probe", name)
		}
		if *spec.TerminationGracePeriodSeconds != int64(f.Spec.Lifecycle.TerminationGraceSeconds) {
			t.Errorf("%s: grace %d", name, *spec.TerminationGracePeriodSeconds)
		}
		if spec.ServiceAccountName != f.Spec.ServiceAccountName || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: service account %q automount %v", name, spec.ServiceAccountName, *spec.AutomountServiceAccountToken)
		}
		checkResources(t, name, f, c.Resources)
		checkSecurity(t, name, spec)
	}
}

func checkResources(t *testing.T, name string, f *v1.CelldFleet, r corev1.ResourceRequirements) {
	t.Helper()
	x := f.Spec.Execution
	for _, c := range []struct {
		list corev1.ResourceList
		res  corev1.ResourceName
		want *resource.Quantity
	}{
		{r.Requests, corev1.ResourceCPU, x.CPURequest}, {r.Requests, corev1.ResourceMemory, x.MemoryRequest},
		{r.Limits, corev1.ResourceCPU, x.CPULimit}, {r.Limits, corev1.ResourceMemory, x.MemoryLimit},
	} {
		got, ok := c.list[c.res]
		if ok != (c.want != nil) || (ok && got.Cmp(*c.want) != 0) {
			t.Errorf("%s: %s = %v (set %v), want %v", name, c.res, got.String(), ok, c.want)
		}
	}
}

func checkSecurity(t *testing.T, name string, spec corev1.PodSpec) {
	t.Helper()
	ps := spec.SecurityContext
	if *ps.RunAsUser != 10001 || *ps.RunAsGroup != 10001 || *ps.FSGroup != 10001 || !*ps.RunAsNonRoot ||
		ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod security %+v", name, ps)
	}
	cs := spec.Containers[0].SecurityContext
	if *cs.AllowPrivilegeEscalation || !*cs.ReadOnlyRootFilesystem || len(cs.Capabilities.Drop) != 1 || cs.Capabilities.Drop[0] != "ALL" ||
		len(cs.Capabilities.Add) != 0 {
		t.Errorf("%s: container security %+v", name, cs)
	}
	if mountPath(corev1.PodTemplateSpec{Spec: spec}, "tmp") != "/tmp" {
		t.Errorf("%s: a read-only root needs a writable /tmp", name)
	}
}

// TestMeshMembership: meshed fleets ask for the sidecar; a fleet that left the mesh keeps
// injection off explicitly; a fleet that never joined carries neither.
func TestMeshMembership(t *testing.T) {
	history := func(f *v1.CelldFleet) {
		f.Annotations = map[string]string{v1.AnnotationIstioControlPlane: "istio-system"}
	}
	leave := func(f *v1.CelldFleet) { f.Spec.Mesh = nil }
	for _, c := range []struct {
		name        string
		sample      string
		mutate      []func(*v1.CelldFleet)
		labels      map[string]string // mesh labels expected; others must be absent
		annotations map[string]string
	}{
		{"never meshed", "persistent", nil, nil, nil},
		{"meshed", "istio-mesh", nil, map[string]string{"sidecar.istio.io/inject": "true", v1.LabelFleetName: "istio-mesh"},
			map[string]string{"sidecar.istio.io/nativeSidecar": "true", "traffic.sidecar.istio.io/excludeOutboundIPRanges": "169.254.170.23/32"}},
		{"left the mesh", "istio-mesh", []func(*v1.CelldFleet){leave, history}, map[string]string{"sidecar.istio.io/inject": "false"}, nil},
		{"history with an empty value still counts", "persistent", []func(*v1.CelldFleet){func(f *v1.CelldFleet) {
			f.Annotations = map[string]string{v1.AnnotationIstioControlPlane: ""}
		}}, map[string]string{"sidecar.istio.io/inject": "false"}, nil},
		{"an empty mesh block is not membership", "persistent", []func(*v1.CelldFleet){func(f *v1.CelldFleet) {
			f.Spec.Mesh = &v1.MeshSpec{}
		}}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fleet(t, c.sample, c.mutate...)
			meta := workload.PodTemplate(f, testOptions(f)).ObjectMeta
			for _, k := range []string{"sidecar.istio.io/inject", v1.LabelFleetName} {
				if got, want := meta.Labels[k], c.labels[k]; got != want {
					t.Errorf("label %s = %q, want %q", k, got, want)
				}
			}
			if !maps.Equal(meta.Annotations, c.annotations) && (len(meta.Annotations) != 0 || len(c.annotations) != 0) {
				t.Errorf("annotations %v, want %v", meta.Annotations, c.annotations)
			}
		})
	}
}

// TestRenderingDoesNotAliasTheFleet: the reconciler may edit a rendered object (say, to copy it
// onto the live one); that must never reach the fleet it was rendered from.
func TestRenderingDoesNotAliasTheFleet(t *testing.T) {
	f := fleet(t, "tuned", everything)
	want := f.DeepCopy()
	s := workload.StatefulSet(f, testOptions(f), 3)
	spec := &s.Spec.Template.Spec
	spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0] = "x"
	spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
	*s.Spec.VolumeClaimTemplates[0].Spec.StorageClassName = "x"
	s.Spec.Template.Labels[v1.LabelFleetUID] = "x"
	if f.Spec.Placement.Zones[0] != want.Spec.Placement.Zones[0] || f.Spec.Execution.CPURequest.Cmp(*want.Spec.Execution.CPURequest) != 0 ||
		*f.Spec.Storage.StorageClassName != *want.Spec.Storage.StorageClassName || f.UID != want.UID {
		t.Error("editing the rendered StatefulSet changed the fleet")
	}
}

// TestMemberAndClaimNames: names the StatefulSet derives, and the parser the healing code uses.
func TestMemberAndClaimNames(t *testing.T) {
	if got := workload.PeersService("f"); got != "f-peers" {
		t.Errorf("PeersService = %q", got)
	}
}

// TestUndefaultedFleetRendersLikeDefaulted: the reconciler defaults before rendering, but a
// fleet that skipped it must render the same, not panic a reconcile worker.
func TestUndefaultedFleetRendersLikeDefaulted(t *testing.T) {
	for _, sample := range []string{"persistent", "bucket", "bucket-ordered"} {
		f := fleet(t, sample)
		raw := f.DeepCopy()
		raw.Spec.Lifecycle, raw.Spec.Execution, raw.Spec.BucketWorkload = nil, nil, ""
		if sample == "bucket-ordered" {
			raw.Spec.BucketWorkload = v1.BucketWorkloadOrdered
		}
		raw.Spec.Placement.Mode = ""
		o := testOptions(f)
		got, want := workload.PodTemplate(raw, o), workload.PodTemplate(f, o)
		got.Spec.Containers[0].Resources, want.Spec.Containers[0].Resources = corev1.ResourceRequirements{}, corev1.ResourceRequirements{}
		if workload.SpecHash(&got) != workload.SpecHash(&want) {
			t.Errorf("%s: an undefaulted fleet renders a different template (resources aside)", sample)
		}
	}
}
