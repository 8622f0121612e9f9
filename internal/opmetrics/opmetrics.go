// Package opmetrics configures how the operator serves its metrics: HTTPS with Kubernetes
// authentication and authorization by default, and the celld_operator_build_info series.
// main.go and the tests that run the operator as it ships (tests/rbac) use the same options.
package opmetrics

import (
	"crypto/tls"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ReaderClusterRole is the ClusterRole that may read /metrics (nonResourceURLs /metrics, get):
// config/rbac/metrics_reader_role.yaml, the chart's and the bundle's copies.
const ReaderClusterRole = "celld-operator-metrics-reader"

// Serving says how /metrics is served.
type Serving struct {
	// BindAddress is the listen address; "0" turns the metrics server off.
	BindAddress string
	// Secure serves HTTPS and lets a request through only when its bearer token authenticates
	// (TokenReview) and its user may get the /metrics path (SubjectAccessReview). false serves
	// plain HTTP to anyone who reaches the port: local runs and tests only.
	Secure bool
	// CertDir holds tls.crt and tls.key (reloaded when they change); without them the server
	// uses a self-signed certificate generated at start.
	CertDir string
}

// ServerOptions returns the controller-runtime metrics server options for s. HTTP/2 is off on
// the secure server: a single client could otherwise exhaust it with stream resets
// (CVE-2023-44487, CVE-2023-39325), and Prometheus scrapes over HTTP/1.1.
func ServerOptions(s Serving) metricsserver.Options {
	o := metricsserver.Options{BindAddress: s.BindAddress, SecureServing: s.Secure}
	if s.Secure {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.CertDir = s.CertDir
		o.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
			c.NextProtos = []string{"http/1.1"}
			c.MinVersion = tls.VersionTLS12
		}}
	}
	return o
}

// BuildInfo returns the celld_operator_build_info gauge: always 1, labelled with the operator's
// version (set at link time), the Go version and the VCS revision the binary was built from
// ("unknown" when the build recorded none).
func BuildInfo(version string) prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "celld_operator_build_info",
		Help: "Always 1; labelled with the operator's version, the Go version it was built with and its VCS revision.",
		ConstLabels: prometheus.Labels{
			"version": version, "goversion": runtime.Version(), "revision": revision,
		},
	})
	g.Set(1)
	return g
}

// RegisterBuildInfo registers BuildInfo(version) on reg once; a second registration (another
// manager in the same process) keeps the first.
func RegisterBuildInfo(reg prometheus.Registerer, version string) error {
	if err := reg.Register(BuildInfo(version)); err != nil {
		if _, ok := err.(prometheus.AlreadyRegisteredError); !ok {
			return err
		}
	}
	return nil
}
