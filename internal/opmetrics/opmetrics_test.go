package opmetrics

import (
	"crypto/tls"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfoIsOneWithTheVersionLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := RegisterBuildInfo(reg, "1.2.3"); err != nil {
		t.Fatal(err)
	}
	if err := RegisterBuildInfo(reg, "1.2.3"); err != nil {
		t.Fatalf("a second registration must keep the first, not fail: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != "celld_operator_build_info" || len(families[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want the one celld_operator_build_info series", families)
	}
	m := families[0].GetMetric()[0]
	if m.GetGauge().GetValue() != 1 {
		t.Errorf("celld_operator_build_info = %v, want 1", m.GetGauge().GetValue())
	}
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != "1.2.3" || labels["goversion"] != runtime.Version() || labels["revision"] == "" || len(labels) != 3 {
		t.Errorf("labels %v, want exactly version=1.2.3, goversion=%s and a revision", labels, runtime.Version())
	}
	if n, err := testutil.GatherAndCount(reg, "celld_operator_build_info"); err != nil || n != 1 {
		t.Errorf("%d series (%v)", n, err)
	}
}

func TestSecureServingFiltersAndPlainServingDoesNot(t *testing.T) {
	secure := ServerOptions(Serving{BindAddress: ":8443", Secure: true, CertDir: "/certs"})
	if !secure.SecureServing || secure.FilterProvider == nil || secure.CertDir != "/certs" || secure.BindAddress != ":8443" {
		t.Fatalf("secure options %+v: want HTTPS, the authentication and authorization filter and the cert dir", secure)
	}
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	for _, opt := range secure.TLSOpts {
		opt(cfg)
	}
	if strings.Join(cfg.NextProtos, ",") != "http/1.1" || cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("TLS config offers %v (min %x), want HTTP/1.1 only and TLS 1.2 or later", cfg.NextProtos, cfg.MinVersion)
	}
	plain := ServerOptions(Serving{BindAddress: "127.0.0.1:18084"})
	if plain.SecureServing || plain.FilterProvider != nil || len(plain.TLSOpts) != 0 {
		t.Errorf("plain options %+v: want HTTP without a filter", plain)
	}
}
