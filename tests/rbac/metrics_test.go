package rbac

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/celld/celld-operator/internal/opmetrics"
)

// The operator serves /metrics the way main.go does by default: HTTPS, and only to a bearer
// token that the API server authenticates (a TokenReview) and whose user may get /metrics (a
// SubjectAccessReview), both asked with the operator's own identity. So the operator's RBAC
// (chart or CSV) must let it create both reviews, and the metrics reader ClusterRole of
// config/rbac must be what admits a scraper. checkMetricsEndpoint proves it on the API server:
// no token is refused, a ServiceAccount without the role is refused, one bound to it reads
// the operator's series.

// freeLocalAddr returns a loopback address with a port free at the time of the call.
func freeLocalAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrape GETs /metrics from the operator with token (none when empty). The certificate is the
// self-signed one the operator generates without --metrics-cert-dir; what is under test is the
// authentication and authorization, not the certificate.
func scrape(ctx context.Context, addr, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the operator's self-signed certificate
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// serviceAccountToken creates ServiceAccount ns/name (if missing) and returns a bound token.
func serviceAccountToken(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := admin.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), sa) })
	tr, err := kubernetes.NewForConfigOrDie(adminCfg).CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// checkMetricsEndpoint runs the three requests against op's /metrics.
func checkMetricsEndpoint(ctx context.Context, t *testing.T, op *operator) {
	t.Helper()
	ns := op.src.operatorNamespace

	// The endpoint comes up with the manager; nothing is decided before it answers.
	var code int
	var body string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		code, body, err = scrape(ctx, op.metricsAddr, "")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the operator's metrics endpoint %s never answered: %v", op.metricsAddr, err)
	}
	if code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without a token: %d %q, want 401", code, body)
	}

	stranger := serviceAccountToken(ctx, t, ns, "metrics-stranger")
	if code, body, err := scrape(ctx, op.metricsAddr, stranger); err != nil || code != http.StatusForbidden {
		t.Fatalf("GET /metrics as a ServiceAccount without the metrics reader role: %d %q (%v), want 403", code, body, err)
	}

	// the reader role as config/rbac ships it, bound to a scraper
	objs, err := decodeFile(root + "/config/rbac/metrics_reader_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "ClusterRole" || objs[0].GetName() != opmetrics.ReaderClusterRole {
		t.Fatalf("config/rbac/metrics_reader_role.yaml must hold the ClusterRole %s", opmetrics.ReaderClusterRole)
	}
	role := objs[0]
	if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(role.DeepCopy()), client.FieldOwner("rbac-test"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), role.DeepCopy()) })
	reader := serviceAccountToken(ctx, t, ns, "metrics-reader")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rbac-test-metrics-reader-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: opmetrics.ReaderClusterRole},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "metrics-reader", Namespace: ns}}}
	if err := admin.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), binding) })
	// The binding is in effect once the API server's authorizer says so; only then is the
	// operator asked (it caches a denial for 30 s).
	user := "system:serviceaccount:" + ns + ":metrics-reader"
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}
		if err := admin.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("the API server never allowed %s to get /metrics through %s: %v", user, opmetrics.ReaderClusterRole, err)
	}
	code, body, err = scrape(ctx, op.metricsAddr, reader)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics as a ServiceAccount bound to %s: %d %q (%v), want 200%s", opmetrics.ReaderClusterRole, code, body, err,
			describeDenied(op.rec.deniedCalls(nil)))
	}
	for _, want := range []string{"celld_operator_build_info{", "controller_runtime_reconcile_total{"} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %s", strings.TrimSuffix(want, "{"))
		}
	}
	t.Logf("metrics endpoint %s: no token 401, %s 403, %s 200 (%d bytes)", op.metricsAddr,
		"metrics-stranger", "metrics-reader", len(body))
}

// decodeFile reads every object of a YAML file.
func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return decodeAll(data)
}
