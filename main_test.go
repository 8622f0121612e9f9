package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld-operator/internal/opmetrics"
)

func TestReplacementDelayBelowOneMinuteIsRefusedWithTheReason(t *testing.T) {
	_, err := parseFlags([]string{"--member-replacement-delay=30s"})
	if err == nil || !strings.Contains(err.Error(), "below the minimum of 1m0s") || !strings.Contains(err.Error(), "use at least 1m") {
		t.Fatalf("want a clear refusal, got %v", err)
	}
	o, err := parseFlags([]string{"--member-replacement-delay=90s"})
	if err != nil || o.fleet.MemberReplacementDelay != 90*time.Second {
		t.Fatalf("90s must be accepted: %v", err)
	}
}

func TestApplicationRefreshBelowOneMinuteIsRefused(t *testing.T) {
	_, err := parseFlags([]string{"--application-refresh=30s"})
	if err == nil || !strings.Contains(err.Error(), "--application-refresh=30s is below the minimum of 1m0s") {
		t.Fatalf("want a clear refusal, got %v", err)
	}
	o, err := parseFlags([]string{"--application-refresh=20m"})
	if err != nil || o.applicationRefresh != 20*time.Minute {
		t.Fatalf("20m must be accepted: %v", err)
	}
	if o, err = parseFlags(nil); err != nil || o.applicationRefresh != 5*time.Minute {
		t.Fatalf("the default must stay 5m: %v %v", err, o)
	}
}

func TestDefaultsComeFromTheSeeds(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.fleet.MemberReplacementDelay != 10*time.Minute || o.fleet.NetworkPolicyEnforced || !o.leaderElect ||
		o.fleet.OperatorServiceAccount != "celld-operator" || o.probeAddr != ":8082" || o.metrics.BindAddress != "0" ||
		!o.metrics.Secure || o.metrics.CertDir != "" ||
		strings.Join(o.fleet.StorageProvisioners, ",") != "ebs.csi.aws.com" {
		t.Fatalf("defaults drifted: %+v", o)
	}
}

// TestMetricsAreSecureUnlessTurnedOff: HTTPS with authentication and authorization is the
// default; --metrics-secure=false is the explicit opt-out of local runs.
func TestMetricsAreSecureUnlessTurnedOff(t *testing.T) {
	o, err := parseFlags([]string{"--metrics-bind-address=:8084", "--metrics-cert-dir=/certs"})
	if err != nil {
		t.Fatal(err)
	}
	if opts := opmetrics.ServerOptions(o.metrics); !opts.SecureServing || opts.FilterProvider == nil || opts.CertDir != "/certs" || opts.BindAddress != ":8084" {
		t.Errorf("by default the metrics server must be HTTPS with the authentication and authorization filter: %+v", opts)
	}
	o, err = parseFlags([]string{"--metrics-bind-address=127.0.0.1:18084", "--metrics-secure=false"})
	if err != nil {
		t.Fatal(err)
	}
	if opts := opmetrics.ServerOptions(o.metrics); opts.SecureServing || opts.FilterProvider != nil {
		t.Errorf("--metrics-secure=false must serve plain HTTP: %+v", opts)
	}
}

func TestWatchesFileErrorsNameTheProblem(t *testing.T) {
	if _, err := loadWatches(""); err != nil {
		t.Fatalf("the embedded watches.yaml must load: %v", err)
	}
	dir := t.TempDir()
	for _, c := range []struct{ name, body, want string }{
		{"unknown-chart", "- {group: celld.eric.dev, version: v1alpha1, kind: CelldFleet, chart: helm-charts/nope}\n", "helm-charts/nope"},
		{"duplicate", "- {group: celld.eric.dev, version: v1alpha1, kind: CelldFleet, chart: helm-charts/celld-fleet}\n- {group: celld.eric.dev, version: v1alpha1, kind: CelldFleet, chart: helm-charts/celld-fleet}\n", "listed twice"},
	} {
		path := filepath.Join(dir, c.name+".yaml")
		if err := os.WriteFile(path, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadWatches(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error mentioning %q, got %v", c.name, c.want, err)
		}
	}
}
