package children

import (
	"errors"
	"strings"
	"testing"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func TestRenderRefusesAnUnattestedNetworkPolicy(t *testing.T) {
	f := loadSample(t, "../../config/samples/bucket.yaml")
	facts := testFacts()
	facts.NetworkPolicyEnforced = false
	_, err := testRenderer.Render(f, facts)
	var blocked *BlockedError
	if !errors.As(err, &blocked) || blocked.Reason != v1.ReasonIsolationUnverified {
		t.Fatalf("Render = %v; want IsolationUnverified", err)
	}
}

func TestTheSchemaRefusesUnknownValues(t *testing.T) {
	r, err := NewRenderer(FleetChart, map[string]string{"operator.surprise": "true"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Render(loadSample(t, "../../config/samples/bucket.yaml"), testFacts())
	if err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Fatalf("Render with an unknown value = %v; the strict schema must refuse it", err)
	}
}

func TestKafkaEgressCoversEachDistinctBrokerPortOnce(t *testing.T) {
	got, err := brokerPorts([]string{"b-2.kafka:9096", "b-1.kafka:9092", "b-3.kafka:9096"})
	if err != nil || len(got) != 2 || got[0] != 9092 || got[1] != 9096 {
		t.Fatalf("brokerPorts = %v, %v; want [9092 9096]", got, err)
	}
}

func TestCollectorPortDefaultsToTheScheme(t *testing.T) {
	for url, want := range map[string]int64{"http://otel:4318": 4318, "https://otel.example.com/v1": 443, "http://otel": 80} {
		if got, err := urlPort(url); err != nil || got[0] != want {
			t.Errorf("urlPort(%s) = %v, %v; want %d", url, got, err, want)
		}
	}
}

func TestACachedRenderIsReusedAndIsTheCallersToModify(t *testing.T) {
	r, err := NewFleetRenderer()
	if err != nil {
		t.Fatal(err)
	}
	f := loadSample(t, "../../config/samples/routing-ingress.yaml")
	first, err := r.Render(f, testFacts())
	if err != nil {
		t.Fatal(err)
	}
	first[0].SetName("scribbled")
	second, err := r.Render(f, testFacts())
	if err != nil {
		t.Fatal(err)
	}
	if second[0].GetName() == "scribbled" {
		t.Fatal("a caller's edit leaked into the render cache")
	}
	if r.renders != 1 {
		t.Fatalf("an unchanged fleet rendered the chart %d times; want once", r.renders)
	}
	f.Spec.Routing.Hostnames = append(f.Spec.Routing.Hostnames, "new.example.com")
	if _, err := r.Render(f, testFacts()); err != nil {
		t.Fatal(err)
	}
	if r.renders != 2 {
		t.Fatalf("a changed fleet was served from the cache (renders = %d)", r.renders)
	}
}
