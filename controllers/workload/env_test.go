package workload_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/workload"
)

// runtimeEnv is the operator-owned prefix every member gets, in order, after identity.
var runtimeEnv = []string{
	"CELLD_BUCKET", "AWS_REGION", "CELLD_DURABILITY", "CELLD_ADDR", "CELLD_INTERNAL_ADDR",
	"CELLD_WATCH", "CELLD_TTL_MS", "CELLD_SHUTDOWN_TOTAL_MS", "CELLD_TOKIO_THREADS",
}

func names(parts ...[]string) []string { return slices.Concat(parts...) }

// everything turns on every env-producing field: execution limits, two user entries (out of
// name order, one a Secret), telemetry with every option, and Kafka export with every option.
func everything(f *v1.CelldFleet) {
	f.Spec.Execution.MaxResidentCells = new(int32(5000))
	f.Spec.Execution.IdleEvictSeconds = new(int32(600))
	f.Spec.Env = []v1.EnvVar{
		{Name: "CELLD_ZZ", Value: new("last-by-name")},
		{Name: "CELLD_HMAC_KEY", SecretKeyRef: &v1.SecretKeyRef{Name: "peer", Key: "hmac"}},
	}
	f.Spec.Telemetry = &v1.TelemetrySpec{
		CollectorURL: "https://otel.example.com", Egress: v1.EgressTarget{CIDR: "10.0.0.9/32"},
		Sampler: "traceidratio", SamplerArg: "0.5",
		FlushMilliseconds: new(int32(1000)), FlushBytes: new(int64(4096)),
		HeadersSecretKeyRef: &v1.SecretKeyRef{Name: "otlp", Key: "headers"},
	}
	f.Spec.Export = &v1.ExportSpec{
		Sink: v1.ExportSinkKafka, Classes: []string{"Orders", "Accounts"}, ExcludeTables: []string{"Orders.audit"},
		MaxTransactionBytes: new(int64(1 << 22)), MaxRecordBytes: new(int64(1 << 20)), QueueBytes: new(int64(1 << 28)),
		Kafka: &v1.ExportKafka{
			Brokers: []string{"b-2.kafka:9092", "b-1.kafka:9092"}, Topic: "changes", RetryMilliseconds: new(int64(2000)),
			PropertiesSecretKeyRef: &v1.SecretKeyRef{Name: "kafka", Key: "client.properties"},
			Egress:                 v1.EgressTarget{CIDR: "10.0.0.0/16"},
		},
	}
}

// TestEnvOrderPerProfile pins the full order of the member environment: identity, runtime,
// tuning, the user's entries in spec order, telemetry, export.
func TestEnvOrderPerProfile(t *testing.T) {
	identity := []string{"POD_IP", "CELLD_NODE", "CELLD_ADVERTISE"}
	withPodName := []string{"POD_IP", "POD_NAME", "CELLD_NODE", "CELLD_ADVERTISE"}
	rest := []string{
		"CELLD_MAX_RESIDENT_CELLS", "CELLD_IDLE_EVICT_S", "CELLD_ZZ", "CELLD_HMAC_KEY",
		"CELLD_OTEL", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"CELLD_OTEL_FLUSH_MS", "CELLD_OTEL_FLUSH_BYTES", "OTEL_EXPORTER_OTLP_HEADERS",
		"CELLD_EXPORT", "CELLD_EXPORT_SINK", "CELLD_EXPORT_CLASSES", "CELLD_EXPORT_TABLES",
		"CELLD_EXPORT_MAX_TX_BYTES", "CELLD_EXPORT_MAX_RECORD_BYTES", "CELLD_EXPORT_QUEUE_BYTES",
		"CELLD_EXPORT_KAFKA_BROKERS", "CELLD_EXPORT_TOPIC", "CELLD_EXPORT_RETRY_MS", "CELLD_EXPORT_KAFKA_PROPERTIES",
	}
	for _, c := range []struct {
		name   string
		sample string
		mutate func(*v1.CelldFleet)
		want   []string
	}{
		{"minimal PersistentFleet", "persistent", nil, names(identity, runtimeEnv)},
		{"minimal Bucket Deployment", "bucket", nil, names(identity, runtimeEnv)},
		{"minimal Ordered Bucket", "bucket-ordered", nil, names(identity, runtimeEnv)},
		{"PersistentFleet with every option", "persistent", everything, names(withPodName, runtimeEnv, rest)},
		{"Bucket with every option", "bucket", everything, names(withPodName, runtimeEnv, rest)},
		{"Bucket export to a separate bucket", "bucket", func(f *v1.CelldFleet) {
			f.Spec.Export = &v1.ExportSpec{Bucket: &v1.ExportBucket{
				Name: "acme-export", FlushMilliseconds: new(int64(10000)), FlushBytes: new(int64(1 << 23)), RetentionDays: new(int32(7)),
			}}
		}, names(identity, runtimeEnv, []string{
			"CELLD_EXPORT", "CELLD_EXPORT_SINK", "CELLD_EXPORT_BUCKET", "CELLD_EXPORT_FLUSH_MS",
			"CELLD_EXPORT_FLUSH_BYTES", "CELLD_EXPORT_RETENTION",
		})},
		{"preview Bucket fleet on a custom endpoint", "bucket-ordered", preview, names(identity,
			[]string{"CELLD_BUCKET", "AWS_REGION", "S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, runtimeEnv[2:])},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mutate []func(*v1.CelldFleet)
			if c.mutate != nil {
				mutate = append(mutate, c.mutate)
			}
			f := fleet(t, c.sample, mutate...)
			got := envNames(workload.PodTemplate(f, testOptions(f)).Spec.Containers[0].Env)
			if !slices.Equal(got, c.want) {
				t.Errorf("env order:\n got  %v\n want %v", got, c.want)
			}
		})
	}
}

// preview makes an Ordered Bucket fleet look like a generated preview fleet.
func preview(f *v1.CelldFleet) {
	f.Spec.Storage.Prefix = "pr-42"
	f.Spec.Storage.PreviewFleetRef = &v1.FleetReference{Name: "parent", UID: "parent-uid"}
	f.Spec.Storage.Endpoint = &v1.StorageEndpoint{URL: "http://minio.storage.svc:9000", CredentialsSecretName: "minio-creds"}
	f.Spec.Storage.Scratch = &v1.ScratchSpec{Request: new(resource.MustParse("64Mi")), Limit: new(resource.MustParse("512Mi"))}
}

// TestEnvValuesPerProfile checks the content the runtime contract fixes, per profile.
func TestEnvValuesPerProfile(t *testing.T) {
	for _, c := range []struct {
		name   string
		sample string
		mutate func(*v1.CelldFleet)
		want   map[string]string // value, or "field:PATH" / "secret:NAME/KEY"
	}{
		{"PersistentFleet: stable name and ordinal DNS, fleet durability", "persistent", nil, map[string]string{
			"POD_IP": "field:status.podIP", "CELLD_NODE": "field:metadata.name",
			"CELLD_ADVERTISE": "$(CELLD_NODE).persistent-peers.apps.svc:8081",
			"CELLD_BUCKET":    "s3://acme-celld-persistent", "AWS_REGION": "us-east-1",
			"CELLD_DURABILITY": "fleet", "CELLD_ADDR": "0.0.0.0:8080", "CELLD_INTERNAL_ADDR": "0.0.0.0:8081",
			"CELLD_WATCH": "/work", "CELLD_TTL_MS": "10000", "CELLD_SHUTDOWN_TOTAL_MS": "20000", "CELLD_TOKIO_THREADS": "2",
		}},
		{"Bucket: Pod UID and Pod IP, bucket durability", "bucket", nil, map[string]string{
			"CELLD_NODE": "field:metadata.uid", "CELLD_ADVERTISE": "$(POD_IP):8081", "CELLD_DURABILITY": "bucket",
		}},
		{"Ordered Bucket is a Bucket member", "bucket-ordered", nil, map[string]string{
			"CELLD_NODE": "field:metadata.uid", "CELLD_ADVERTISE": "$(POD_IP):8081", "CELLD_DURABILITY": "bucket",
		}},
		{"tuning, telemetry and Kafka export", "tuned", everything, map[string]string{
			"CELLD_SHUTDOWN_TOTAL_MS": "40000", "CELLD_MAX_RESIDENT_CELLS": "5000", "CELLD_IDLE_EVICT_S": "600",
			"CELLD_ZZ": "last-by-name", "CELLD_HMAC_KEY": "secret:peer/hmac", "POD_NAME": "field:metadata.name",
			"CELLD_OTEL":               "https://otel.example.com",
			"OTEL_RESOURCE_ATTRIBUTES": "k8s.namespace.name=apps,k8s.pod.name=$(POD_NAME),celld.fleet.name=tuned",
			"OTEL_TRACES_SAMPLER":      "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5",
			"CELLD_OTEL_FLUSH_MS": "1000", "CELLD_OTEL_FLUSH_BYTES": "4096",
			"OTEL_EXPORTER_OTLP_HEADERS": "secret:otlp/headers",
			"CELLD_EXPORT":               "1", "CELLD_EXPORT_SINK": "kafka",
			"CELLD_EXPORT_CLASSES": "Accounts,Orders", "CELLD_EXPORT_TABLES": "Orders.audit",
			"CELLD_EXPORT_MAX_TX_BYTES": "4194304", "CELLD_EXPORT_MAX_RECORD_BYTES": "1048576",
			"CELLD_EXPORT_QUEUE_BYTES":   "268435456",
			"CELLD_EXPORT_KAFKA_BROKERS": "b-1.kafka:9092,b-2.kafka:9092", "CELLD_EXPORT_TOPIC": "changes",
			"CELLD_EXPORT_RETRY_MS":         "2000",
			"CELLD_EXPORT_KAFKA_PROPERTIES": "/etc/celld/export/client.properties",
		}},
		{"bucket export sink, retention in days", "bucket", func(f *v1.CelldFleet) {
			f.Spec.Export = &v1.ExportSpec{Bucket: &v1.ExportBucket{RetentionDays: new(int32(30))}}
		}, map[string]string{"CELLD_EXPORT_SINK": "bucket", "CELLD_EXPORT_RETENTION": "30d"}},
		{"preview fleet: prefix and endpoint", "bucket-ordered", preview, map[string]string{
			"CELLD_BUCKET": "s3://acme-celld-ordered/pr-42", "S3_ENDPOINT": "http://minio.storage.svc:9000",
			"AWS_ACCESS_KEY_ID": "secret:minio-creds/AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY": "secret:minio-creds/AWS_SECRET_ACCESS_KEY",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mutate []func(*v1.CelldFleet)
			if c.mutate != nil {
				mutate = append(mutate, c.mutate)
			}
			f := fleet(t, c.sample, mutate...)
			env := workload.PodTemplate(f, testOptions(f)).Spec.Containers[0].Env
			for name, want := range c.want {
				e, ok := envByName(env, name)
				if !ok {
					t.Errorf("%s is missing", name)
					continue
				}
				if got := describe(e); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func describe(e corev1.EnvVar) string {
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.FieldRef != nil:
		return "field:" + e.ValueFrom.FieldRef.FieldPath
	case e.ValueFrom.SecretKeyRef != nil:
		return "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
	}
	return "?"
}

// TestSecretValuesNeverEnterTheTemplate: every Secret-backed setting is a secretKeyRef for the
// kubelet to resolve; the template holds no value for it, no envFrom (which would import keys
// nobody named) and no Secret volume other than the Kafka properties.
func TestSecretValuesNeverEnterTheTemplate(t *testing.T) {
	f := fleet(t, "bucket-ordered", everything, preview)
	pod := workload.PodTemplate(f, testOptions(f))
	c := pod.Spec.Containers[0]
	if len(c.EnvFrom) != 0 {
		t.Fatalf("members must not import whole Secrets or ConfigMaps: %v", c.EnvFrom)
	}
	secret := map[string]bool{
		"CELLD_HMAC_KEY": true, "OTEL_EXPORTER_OTLP_HEADERS": true,
		"AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true,
	}
	for _, e := range c.Env {
		ref := e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
		if ref != secret[e.Name] {
			t.Errorf("%s: secretKeyRef=%v, want %v", e.Name, ref, secret[e.Name])
		}
		if ref && e.Value != "" {
			t.Errorf("%s carries a literal value next to its secretKeyRef", e.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && (v.Name != "export-kafka" || v.Secret.SecretName != "kafka") {
			t.Errorf("unexpected Secret volume %s (%s)", v.Name, v.Secret.SecretName)
		}
	}
}

// TestEnvReferencesResolve: Kubernetes expands $(VAR) only from entries defined earlier in the
// list; a later or missing one is left as literal text and celld would advertise garbage.
func TestEnvReferencesResolve(t *testing.T) {
	ref := regexp.MustCompile(`\$\(([A-Z0-9_]+)\)`)
	variants := map[string]func(*v1.CelldFleet){"plain": func(*v1.CelldFleet) {}, "everything": everything}
	sampleNames, _ := samples(t)
	for _, sample := range sampleNames {
		for variant, mutate := range variants {
			f := fleet(t, sample, mutate)
			defined := map[string]bool{}
			for _, e := range workload.PodTemplate(f, testOptions(f)).Spec.Containers[0].Env {
				for _, m := range ref.FindAllStringSubmatch(e.Value, -1) {
					if !defined[m[1]] {
						t.Errorf("%s/%s: %s refers to $(%s) before it is defined", sample, variant, e.Name, m[1])
					}
				}
				if defined[e.Name] {
					t.Errorf("%s/%s: %s is defined twice", sample, variant, e.Name)
				}
				defined[e.Name] = true
			}
		}
	}
}

// TestRemovedVariablesAreNeverEmitted: celld refuses to boot with CELLD_OTEL_SINK (removed) or
// any CELLD_VAR_* variable.
func TestRemovedVariablesAreNeverEmitted(t *testing.T) {
	sampleNames, _ := samples(t)
	for _, sample := range sampleNames {
		f := fleet(t, sample, everything)
		for _, e := range workload.PodTemplate(f, testOptions(f)).Spec.Containers[0].Env {
			if e.Name == "CELLD_OTEL_SINK" || strings.HasPrefix(e.Name, "CELLD_VAR_") {
				t.Errorf("%s: %s refuses celld's boot", sample, e.Name)
			}
		}
	}
}
