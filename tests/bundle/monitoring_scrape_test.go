package bundle

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The chart's scrape configuration, rendered the way Helm would: the ServiceMonitor keeps the
// series' own namespace label (honorLabels), scrapes HTTPS with a token the metrics reader role
// admits, and verifies the certificate unless told, explicitly, not to.

// metricsValues are chart values with metrics and the ServiceMonitor on, plus extra under
// metrics.serviceMonitor and extraMetrics under metrics.
func metricsValues(serviceMonitor, extraMetrics map[string]any) map[string]any {
	sm := map[string]any{"enabled": true}
	for k, v := range serviceMonitor {
		sm[k] = v
	}
	m := map[string]any{"enabled": true, "serviceMonitor": sm}
	for k, v := range extraMetrics {
		m[k] = v
	}
	return map[string]any{"metrics": m}
}

// endpoint returns the ServiceMonitor's only endpoint.
func endpoint(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(one(t, objs, "ServiceMonitor", "celld-operator").Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want 1", len(eps))
	}
	return eps[0].(map[string]any)
}

func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	return deployment(t, objs).Spec.Template.Spec.Containers[0].Args
}

// TestServiceMonitorScrapesHTTPSWithTheScraperToken: the default authentication. The token the
// ServiceMonitor sends is the chart's Secret of the scraper ServiceAccount, and that
// ServiceAccount is bound to the metrics reader ClusterRole, whose rules are
// config/rbac/metrics_reader_role.yaml's.
func TestServiceMonitorScrapesHTTPSWithTheScraperToken(t *testing.T) {
	objs := mustRender(t, metricsValues(map[string]any{"tlsConfig": map[string]any{"insecureSkipVerify": true}}, nil))
	ep := endpoint(t, objs)
	if ep["honorLabels"] != true {
		t.Errorf("the endpoint's honorLabels is %v: Prometheus would rename the fleets' namespace label exported_namespace, and every alert grouped by (namespace, fleet) would group by the operator's namespace", ep["honorLabels"])
	}
	if ep["scheme"] != "https" || ep["port"] != "metrics" {
		t.Errorf("the endpoint scrapes %v on port %v, want https on metrics", ep["scheme"], ep["port"])
	}
	if _, ok := ep["bearerTokenFile"]; ok {
		t.Error("with the scraper token the endpoint must not also send Prometheus's own token")
	}
	secretName, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
	key, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "key")
	typ, _, _ := unstructured.NestedString(ep, "authorization", "type")
	if typ != "Bearer" || key != "token" || secretName == "" {
		t.Fatalf("the endpoint's authorization is %v, want a Bearer token from a Secret's token key", ep["authorization"])
	}
	secret := one(t, objs, "Secret", secretName)
	sa, _ := secret.GetAnnotations()["kubernetes.io/service-account.name"]
	if typ, _, _ := unstructured.NestedString(secret.Object, "type"); typ != "kubernetes.io/service-account-token" || sa == "" {
		t.Fatalf("Secret %s is a %q for ServiceAccount %q; want a ServiceAccount token the token controller fills in", secretName, typ, sa)
	}
	one(t, objs, "ServiceAccount", sa)
	binding := one(t, objs, "ClusterRoleBinding", "celld-operator-metrics-reader")
	if ref, _, _ := unstructured.NestedString(binding.Object, "roleRef", "name"); ref != "celld-operator-metrics-reader" {
		t.Errorf("the binding grants %s, want the metrics reader role", ref)
	}
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if !slices.ContainsFunc(subjects, func(s any) bool {
		m := s.(map[string]any)
		return m["kind"] == "ServiceAccount" && m["name"] == sa && m["namespace"] == "celld-system"
	}) {
		t.Errorf("the metrics reader binding's subjects %v lack the ServiceAccount %s whose token the ServiceMonitor sends", subjects, sa)
	}
	reader := one(t, objs, "ClusterRole", "celld-operator-metrics-reader")
	cfg := objects(t, repo(t, "config", "rbac", "metrics_reader_role.yaml"))
	if got, want := policyRules(t, reader), policyRules(t, cfg[0]); !reflect.DeepEqual(got, want) {
		t.Errorf("the chart's metrics reader rules differ from config/rbac/metrics_reader_role.yaml:\n chart  %v\n config %v", got, want)
	}
	if cfg[0].GetName() != "celld-operator-metrics-reader" {
		t.Errorf("config/rbac names the reader role %s; the docs and internal/opmetrics say celld-operator-metrics-reader", cfg[0].GetName())
	}
	tls, _, _ := unstructured.NestedMap(ep, "tlsConfig")
	if tls["insecureSkipVerify"] != true || tls["serverName"] != "celld-operator-metrics.celld-system.svc" {
		t.Errorf("tlsConfig %v: want the explicit insecureSkipVerify and the Service's name", tls)
	}
	if args := strings.Join(managerArgs(t, objs), " "); !strings.Contains(args, "--metrics-secure=true") || strings.Contains(args, "--metrics-cert-dir") {
		t.Errorf("operator args %q: want --metrics-secure=true and no cert dir", args)
	}
}

// TestServiceMonitorRefusesAnUnverifiableCertificateUnlessTold: without certSecret the
// certificate is self-signed; the chart renders no ServiceMonitor that would silently fail (or
// silently skip verification) until insecureSkipVerify is set explicitly.
func TestServiceMonitorRefusesAnUnverifiableCertificateUnlessTold(t *testing.T) {
	_, err := render(t, metricsValues(nil, nil))
	if err == nil || !strings.Contains(err.Error(), "insecureSkipVerify") || !strings.Contains(err.Error(), "certSecret") {
		t.Fatalf("render without certSecret or insecureSkipVerify: %v; want a refusal naming both ways out", err)
	}
	// the endpoint itself needs no ServiceMonitor to be secure
	objs := mustRender(t, map[string]any{"metrics": map[string]any{"enabled": true}})
	one(t, objs, "ClusterRole", "celld-operator-metrics-reader")
	if n := len(kinds(objs, "ClusterRoleBinding")); n != 1 {
		t.Errorf("%d ClusterRoleBindings without a ServiceMonitor or readerSubjects, want only the operator's", n)
	}
}

// TestServiceMonitorVerifiesTheCertSecret: with certSecret the operator serves it from a
// read-only mount and the ServiceMonitor verifies it against its ca.crt.
func TestServiceMonitorVerifiesTheCertSecret(t *testing.T) {
	objs := mustRender(t, metricsValues(nil, map[string]any{"certSecret": "metrics-tls"}))
	ep := endpoint(t, objs)
	tls, _, _ := unstructured.NestedMap(ep, "tlsConfig")
	if _, skip := tls["insecureSkipVerify"]; skip {
		t.Errorf("tlsConfig %v skips verification although certSecret gives a CA", tls)
	}
	name, _, _ := unstructured.NestedString(tls, "ca", "secret", "name")
	key, _, _ := unstructured.NestedString(tls, "ca", "secret", "key")
	if name != "metrics-tls" || key != "ca.crt" || tls["serverName"] != "celld-operator-metrics.celld-system.svc" {
		t.Errorf("tlsConfig %v: want the CA from metrics-tls's ca.crt and the Service's name", tls)
	}
	d := deployment(t, objs)
	c := d.Spec.Template.Spec.Containers[0]
	dir := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--metrics-cert-dir="); ok {
			dir = v
		}
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.MountPath == dir && m.ReadOnly && m.Name == "metrics-certs")
	}
	secret := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		secret = secret || (v.Name == "metrics-certs" && v.Secret != nil && v.Secret.SecretName == "metrics-tls")
	}
	if dir == "" || !mounted || !secret {
		t.Errorf("--metrics-cert-dir=%q, mounted read-only there: %v, from Secret metrics-tls: %v", dir, mounted, secret)
	}
	// the chart's extra volumes stay next to the certificate's
	objs = mustRender(t, map[string]any{"metrics": map[string]any{"enabled": true, "certSecret": "metrics-tls"},
		"extraVolumes":      []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{}}},
		"extraVolumeMounts": []any{map[string]any{"name": "tmp", "mountPath": "/tmp"}}})
	d = deployment(t, objs)
	if v, m := d.Spec.Template.Spec.Volumes, d.Spec.Template.Spec.Containers[0].VolumeMounts; len(v) != 2 || len(m) != 2 {
		t.Errorf("volumes %v and mounts %v: want the certificate's and the extra one", v, m)
	}
}

// TestServiceMonitorWithATokenSecret: authentication=tokenSecret sends the token of a Secret
// the user names (for example one of Prometheus's own ServiceAccount), bound to the reader role
// through readerSubjects, with authorization credentials: never the deprecated bearerTokenFile,
// which the Prometheus Operator can refuse. No scraper ServiceAccount or Secret renders, and the
// Secret's name is required.
func TestServiceMonitorWithATokenSecret(t *testing.T) {
	objs := mustRender(t, metricsValues(map[string]any{"authentication": "tokenSecret",
		"tokenSecret": map[string]any{"name": "prometheus-k8s-token"},
		"tlsConfig":   map[string]any{"insecureSkipVerify": true}},
		map[string]any{"readerSubjects": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}}}))
	ep := endpoint(t, objs)
	want := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "prometheus-k8s-token", "key": "token"}}
	if !reflect.DeepEqual(ep["authorization"], want) {
		t.Errorf("endpoint authorization %v, want %v", ep["authorization"], want)
	}
	if _, ok := ep["bearerTokenFile"]; ok {
		t.Errorf("endpoint %v sends bearerTokenFile, which the Prometheus Operator deprecates", ep)
	}
	if ep["honorLabels"] != true || ep["scheme"] != "https" {
		t.Errorf("endpoint %v: want honorLabels and https", ep)
	}
	if n := len(kinds(objs, "Secret")); n != 0 {
		t.Errorf("%d Secrets render although the token is the user's", n)
	}
	binding := one(t, objs, "ClusterRoleBinding", "celld-operator-metrics-reader")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "prometheus-k8s" {
		t.Errorf("the metrics reader binding's subjects are %v, want only prometheus-k8s", subjects)
	}
	if _, err := render(t, metricsValues(map[string]any{"authentication": "tokenSecret", "tlsConfig": map[string]any{"insecureSkipVerify": true}}, nil)); err == nil || !strings.Contains(err.Error(), "tokenSecret.name") {
		t.Errorf("tokenSecret without a Secret name: got %v, want an error naming metrics.serviceMonitor.tokenSecret.name", err)
	}
	if _, err := render(t, metricsValues(map[string]any{"authentication": "prometheusToken"}, nil)); err == nil {
		t.Error("the bearerTokenFile mode prometheusToken is still accepted")
	}
}

// TestServiceMonitorPlainHTTP: metrics.secure=false (local runs) scrapes http, sends no token
// and grants no reader role; honorLabels holds there too.
func TestServiceMonitorPlainHTTP(t *testing.T) {
	objs := mustRender(t, metricsValues(nil, map[string]any{"secure": false}))
	ep := endpoint(t, objs)
	if ep["scheme"] != "http" || ep["authorization"] != nil || ep["tlsConfig"] != nil || ep["honorLabels"] != true {
		t.Errorf("endpoint %v: want http with honorLabels, no token and no TLS", ep)
	}
	if n := len(kinds(objs, "Secret")) + len(kinds(objs, "ClusterRoleBinding")) - 1; n != 0 {
		t.Errorf("%d reader objects render for a plain HTTP endpoint", n)
	}
	for _, o := range kinds(objs, "ClusterRole") {
		if o.GetName() == "celld-operator-metrics-reader" {
			t.Error("the metrics reader role renders for a plain HTTP endpoint, which checks no role")
		}
	}
	if args := strings.Join(managerArgs(t, objs), " "); !strings.Contains(args, "--metrics-secure=false") {
		t.Errorf("operator args %q lack --metrics-secure=false", args)
	}
}
