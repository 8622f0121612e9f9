package celldsim

import (
	"os"
	"strings"
	"testing"
)

// operatorEnv is the env the operator renders for a PersistentFleet member (controllers/workload
// env.go), resolved the way the kubelet resolves it.
func operatorEnv() map[string]string {
	return map[string]string{
		"POD_IP": "10.1.2.3", "CELLD_NODE": "f-0", "CELLD_ADVERTISE": "f-0.f-peers.apps.svc:8081",
		"CELLD_BUCKET": "s3://acme", "AWS_REGION": "us-east-1", "CELLD_DURABILITY": "fleet",
		"CELLD_ADDR": "0.0.0.0:8080", "CELLD_INTERNAL_ADDR": "0.0.0.0:8081", "CELLD_WATCH": "/work",
		"CELLD_TTL_MS": "10000", "CELLD_SHUTDOWN_TOTAL_MS": "40000", "CELLD_TOKIO_THREADS": "2",
	}
}

// with returns a copy of base with the given name=value pairs set; a pair "NAME" without "="
// deletes NAME.
func with(base map[string]string, pairs ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for _, p := range pairs {
		if k, v, ok := strings.Cut(p, "="); ok {
			out[k] = v
		} else {
			delete(out, k)
		}
	}
	return out
}

func bare(pairs ...string) map[string]string { return with(map[string]string{}, pairs...) }

func set(names ...string) map[string]bool {
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// files is a fake file system for the Kafka properties file; a missing path is unreadable.
type files map[string]string

func (f files) read(path string) ([]byte, error) {
	if s, ok := f[path]; ok {
		return []byte(s), nil
	}
	return nil, os.ErrNotExist
}

func TestValidateEnvAppliesCelldsStartUpRules(t *testing.T) {
	kafka := []string{"CELLD_EXPORT=1", "CELLD_EXPORT_SINK=kafka", "CELLD_EXPORT_KAFKA_BROKERS=b-1:9096,b-2:9096",
		"CELLD_EXPORT_KAFKA_PROPERTIES=/etc/celld/export/client.properties"}
	props := func(s string) files { return files{"/etc/celld/export/client.properties": s} }
	blob := []string{"CELLD_EXPORT=1", "CELLD_EXPORT_SINK=blob-stream", "CELLD_SIM_FEATURES=export-blob-stream",
		"CELLD_EXPORT_BROKERS=1=a:9000,2=b:9000", "CELLD_EXPORT_PARTITIONS=4"}
	cases := []struct {
		name   string
		env    map[string]string
		opaque map[string]bool
		files  files
		want   string // "" accepts; else a substring of the error
	}{
		// what celld ignores or the operator renders
		{"the operator's PersistentFleet env", operatorEnv(), nil, nil, ""},
		{"an empty env (celld's defaults)", bare(), nil, nil, ""},
		{"the simulator's own knobs, even with values celld would refuse", with(operatorEnv(), "CELLD_SIM_RESTART_MS=soon",
			"CELLD_SIM_DRAIN_STALL=yes", "CELLD_SIM_APP_VERSION=", "CELLD_SIM_FEATURES=none"), nil, nil, ""},
		{"unknown CELLD_* names", with(operatorEnv(), "CELLD_LOG=info", "CELLD_FUTURE_KNOB=x y", "CELLD_E2E_MODE="), nil, nil, ""},
		{"the operator's reserved prefixes are not celld's rule", with(operatorEnv(), "CELLD_STRICT_TEST_BINARY=/bin/celld",
			"CELLD_REEXEC_PROBE_SIGNING_KEY=abc"), nil, nil, ""},

		// §1.1 strict booleans
		{"flag 1", bare("CELLD_CLOUD=1", "CELLD_LTX_PAGED=0", "CELLD_TRUST_FORWARDED_HEADERS=1"), nil, nil, ""},
		{"flag true", bare("CELLD_TRUST_FORWARDED_HEADERS=true"), nil, nil, "CELLD_TRUST_FORWARDED_HEADERS must be 0 or 1"},
		{"flag empty", bare("CELLD_LTX_COMPACTION="), nil, nil, "CELLD_LTX_COMPACTION must be 0 or 1"},
		{"flag with spaces", bare("CELLD_EXPORT= 1"), nil, nil, "CELLD_EXPORT must be 0 or 1"},

		// positive and optional integers
		{"positive", bare("CELLD_TTL_MS=1", "CELLD_RELEASES=+64", "CELLD_DEPLOY_POLL_S=5"), nil, nil, ""},
		{"positive zero", bare("CELLD_DEPLOY_POLL_S=0"), nil, nil, "CELLD_DEPLOY_POLL_S must be a positive integer"},
		{"positive negative", bare("CELLD_TOKIO_THREADS=-2"), nil, nil, "CELLD_TOKIO_THREADS must be a positive integer"},
		{"positive not a number", bare("CELLD_SHUTDOWN_TOTAL_MS=40s"), nil, nil, "CELLD_SHUTDOWN_TOTAL_MS must be a positive integer"},
		{"positive overflow", bare("CELLD_IDLE_EVICT_S=18446744073709551616"), nil, nil, "CELLD_IDLE_EVICT_S must be a positive integer"},
		{"optional zero", bare("CELLD_READY_FLEET_GATE_MS=0", "CELLD_MAX_RSS_MB=0", "CELLD_DEPLOY_MAX_AGE_S=0"), nil, nil, ""},
		{"optional negative", bare("CELLD_MAX_RESIDENT_CELLS=-1"), nil, nil, "CELLD_MAX_RESIDENT_CELLS must be a non-negative integer"},
		{"ranged", bare("CELLD_MAX_REQUEST_BODY_BYTES=1073741824", "CELLD_CONTROL_LEASE_SHARDS=64"), nil, nil, ""},
		{"ranged above", bare("CELLD_MAX_REQUEST_BODY_BYTES=1073741825"), nil, nil, "CELLD_MAX_REQUEST_BODY_BYTES must be an integer from 1 to 1073741824"},

		// enums and names
		{"durability", bare("CELLD_DURABILITY=bucket", "CELLD_PRESSURE_OWNERSHIP=sticky", "CELLD_LOG_TRANSPORT=stream"), nil, nil, ""},
		{"durability other", bare("CELLD_DURABILITY=disk"), nil, nil, "CELLD_DURABILITY must be `bucket` or `fleet`"},
		{"pressure ownership other", bare("CELLD_PRESSURE_OWNERSHIP=keep"), nil, nil, "CELLD_PRESSURE_OWNERSHIP must be `release` or `sticky`"},
		{"log transport other", bare("CELLD_LOG_TRANSPORT=grpc"), nil, nil, "CELLD_LOG_TRANSPORT must be `http` or `stream`"},
		{"node uid", bare("CELLD_NODE=3f9a1c2e-7b4d-4e8f-9a0b-1c2d3e4f5a6b"), nil, nil, ""},
		{"node dot dot", bare("CELLD_NODE=.."), nil, nil, "CELLD_NODE must be 1 to 128"},
		{"node slash", bare("CELLD_NODE=a/b"), nil, nil, "CELLD_NODE must be 1 to 128"},
		{"node too long", bare("CELLD_NODE=" + strings.Repeat("n", 129)), nil, nil, "CELLD_NODE must be 1 to 128"},
		{"zone", bare("CELLD_ZONE=us east"), nil, nil, "CELLD_ZONE must be"},

		// §1.7 removed names, §1.6 perf names
		{"removed", bare("CELLD_OUTPUT_GATE=1"), nil, nil, "CELLD_OUTPUT_GATE is removed; "},
		{"removed otel sink", bare("CELLD_OTEL_SINK=otlp"), nil, nil, "CELLD_OTEL_SINK is removed; "},
		{"removed from a Secret", bare(), set("CELLD_SHUTDOWN_DRAIN_MS"), nil, "CELLD_SHUTDOWN_DRAIN_MS is removed; "},
		{"CELLD_VAR_*", bare("CELLD_VAR_API_KEY=x"), nil, nil, "CELLD_VAR_API_KEY is removed; "},
		{"CELLD_VAR_* from a Secret", bare(), set("CELLD_VAR_TOKEN"), nil, "CELLD_VAR_TOKEN is removed; "},
		{"empty worker loader is tolerated", bare("CELLD_WORKER_LOADER="), nil, nil, ""},
		{"worker loader", bare("CELLD_WORKER_LOADER=v8"), nil, nil, "CELLD_WORKER_LOADER is removed; "},
		{"perf name in an ordinary build", bare("CELLD_PERF_FSYNC_DELAY_US=5"), nil, nil, "only valid in a perf build"},
		{"perf name in a perf build", bare("CELLD_PERF_FSYNC_DELAY_US=5", "CELLD_SIM_FEATURES=perf"), nil, nil, ""},

		// §1.4 telemetry
		{"otel collector", with(operatorEnv(), "CELLD_OTEL=https://otel.example:4318/base"), nil, nil, ""},
		{"otel 0", bare("CELLD_OTEL=0"), nil, nil, ""},
		{"otel bool word", bare("CELLD_OTEL=true"), nil, nil, "CELLD_OTEL must be 0, 1, or an HTTP(S) collector base URL"},
		{"otel grpc scheme", bare("CELLD_OTEL=grpc://otel:4317"), nil, nil, "CELLD_OTEL must be 0, 1"},
		{"otel query", bare("CELLD_OTEL=http://otel:4318/?x=1"), nil, nil, "CELLD_OTEL must be 0, 1"},
		{"otel fragment", bare("CELLD_OTEL=http://otel:4318/#f"), nil, nil, "CELLD_OTEL must be 0, 1"},
		{"otel no host", bare("CELLD_OTEL=http:///v1"), nil, nil, "CELLD_OTEL must be 0, 1"},
		{"otel 1 with a bucket", bare("CELLD_OTEL=1", "CELLD_BUCKET=s3://b"), nil, nil, ""},
		{"otel 1 with a bucket from a Secret", bare("CELLD_OTEL=1"), set("CELLD_BUCKET"), nil, ""},
		{"otel 1 without a bucket", bare("CELLD_OTEL=1"), nil, nil, "CELLD_OTEL=1 writes telemetry to the fleet bucket and needs CELLD_BUCKET"},
		{"otel 1 with a blank bucket", bare("CELLD_OTEL=1", "CELLD_BUCKET=  "), nil, nil, "needs CELLD_BUCKET"},
		{"otel retention", bare("CELLD_OTEL_RETENTION=7d"), nil, nil, ""},
		{"otel retention none", bare("CELLD_OTEL_RETENTION=none"), nil, nil, ""},
		{"otel retention zero", bare("CELLD_OTEL_RETENTION=0d"), nil, nil, "CELLD_OTEL_RETENTION must be <n>d"},
		{"otel retention hours", bare("CELLD_OTEL_RETENTION=12h"), nil, nil, "CELLD_OTEL_RETENTION must be <n>d"},
		{"ratio sampler", bare("OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.1"), nil, nil, ""},
		{"sampler unknown", bare("OTEL_TRACES_SAMPLER=jaeger_remote"), nil, nil, "OTEL_TRACES_SAMPLER must be"},
		{"ratio sampler without arg", bare("OTEL_TRACES_SAMPLER=traceidratio"), nil, nil, "needs OTEL_TRACES_SAMPLER_ARG"},
		{"ratio sampler arg above 1", bare("OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=1.5"), nil, nil, "OTEL_TRACES_SAMPLER_ARG must be a ratio"},
		{"ratio sampler arg from a Secret", bare("OTEL_TRACES_SAMPLER=traceidratio"), set("OTEL_TRACES_SAMPLER_ARG"), nil, ""},
		{"arg without a ratio sampler is ignored", bare("OTEL_TRACES_SAMPLER=always_on", "OTEL_TRACES_SAMPLER_ARG=x"), nil, nil, ""},
		{"metrics exporter", bare("OTEL_METRICS_EXPORTER=none"), nil, nil, ""},
		{"metrics exporter other", bare("OTEL_METRICS_EXPORTER=prometheus"), nil, nil, "OTEL_METRICS_EXPORTER must be `otlp` or `none`"},
		{"otel flush", bare("CELLD_OTEL_FLUSH_MS=0"), nil, nil, "CELLD_OTEL_FLUSH_MS must be a positive integer"},
		{"resource attributes", bare("OTEL_RESOURCE_ATTRIBUTES=k8s.pod.name=f-0,celld.fleet.name=f"), nil, nil, ""},
		{"resource attributes override service.name", bare("OTEL_RESOURCE_ATTRIBUTES=service%2Ename=x"), nil, nil, "cannot set service.name"},
		{"resource attributes without =", bare("OTEL_RESOURCE_ATTRIBUTES=a=b,c"), nil, nil, "OTEL_RESOURCE_ATTRIBUTES must be a comma list"},
		{"headers from a Secret are not read", bare(), set("OTEL_EXPORTER_OTLP_HEADERS"), nil, ""},
		{"headers without =", bare("OTEL_EXPORTER_OTLP_HEADERS=Bearer x"), nil, nil, "OTEL_EXPORTER_OTLP_HEADERS must be a comma list"},

		// §1.5 export
		{"export to the bucket", with(operatorEnv(), "CELLD_EXPORT=1", "CELLD_EXPORT_SINK=bucket", "CELLD_EXPORT_CLASSES=Customers,Orders",
			"CELLD_EXPORT_TABLES=Customers.sessions", "CELLD_EXPORT_BUCKET=acme-changes", "CELLD_EXPORT_RETENTION=30d"), nil, nil, ""},
		{"export bucket sink without a bucket", bare("CELLD_EXPORT=1"), nil, nil, "needs CELLD_BUCKET"},
		{"more than one sink", bare("CELLD_EXPORT_SINK=bucket,kafka"), nil, nil, "CELLD_EXPORT_SINK names more than one sink (bucket,kafka)"},
		{"more than one sink while export is off", bare("CELLD_EXPORT=0", "CELLD_EXPORT_SINK=bucket, blob-stream"), nil, nil, "more than one sink"},
		{"unknown sink", bare("CELLD_EXPORT_SINK=s3"), nil, nil, "unknown sink \"s3\""},
		{"empty sink list", bare("CELLD_EXPORT_SINK=,"), nil, nil, "CELLD_EXPORT_SINK must name a sink"},
		{"kafka on the -kafka image (the default)", with(operatorEnv(), kafka...), nil, nil, ""},
		{"kafka with export-kafka listed", with(operatorEnv(), append(kafka, "CELLD_SIM_FEATURES=export-blob-stream, export-kafka")...), nil, nil, ""},
		{"kafka on a plain image", with(operatorEnv(), append(kafka, "CELLD_SIM_FEATURES=none")...), nil, nil,
			"CELLD_EXPORT_SINK=kafka needs a celld built with the export-kafka feature"},
		{"blob-stream without its feature", bare("CELLD_EXPORT_SINK=blob-stream"), nil, nil, "needs a celld built with the export-blob-stream feature"},
		{"kafka without brokers", with(operatorEnv(), "CELLD_EXPORT=1", "CELLD_EXPORT_SINK=kafka"), nil, nil, "CELLD_EXPORT_SINK=kafka needs CELLD_EXPORT_KAFKA_BROKERS"},
		{"kafka with brokers from a Secret", with(operatorEnv(), "CELLD_EXPORT=1", "CELLD_EXPORT_SINK=kafka"), set("CELLD_EXPORT_KAFKA_BROKERS"), nil, ""},
		{"kafka brokers without a port", bare("CELLD_EXPORT_KAFKA_BROKERS=b-1"), nil, nil, "CELLD_EXPORT_KAFKA_BROKERS entry \"b-1\""},
		{"kafka brokers port 0", bare("CELLD_EXPORT_KAFKA_BROKERS=b-1:0"), nil, nil, "port must be 1 to 65535"},
		{"record above queue", with(operatorEnv(), "CELLD_EXPORT=1", "CELLD_EXPORT_MAX_RECORD_BYTES=2048", "CELLD_EXPORT_QUEUE_BYTES=1024"), nil, nil,
			"CELLD_EXPORT_MAX_RECORD_BYTES (2048) must not exceed CELLD_EXPORT_QUEUE_BYTES (1024)"},
		{"record above the default queue", with(operatorEnv(), "CELLD_EXPORT=1", "CELLD_EXPORT_MAX_RECORD_BYTES=268435457"), nil, nil, "must not exceed CELLD_EXPORT_QUEUE_BYTES (268435456)"},
		{"record above queue while export is off", bare("CELLD_EXPORT_MAX_RECORD_BYTES=2048", "CELLD_EXPORT_QUEUE_BYTES=1024"), nil, nil, ""},
		{"record equal to queue", with(operatorEnv(), "CELLD_EXPORT=1", "CELLD_EXPORT_MAX_RECORD_BYTES=1024", "CELLD_EXPORT_QUEUE_BYTES=1024"), nil, nil, ""},
		{"record too large for kafka", with(operatorEnv(), append(kafka, "CELLD_EXPORT_MAX_RECORD_BYTES=999990000", "CELLD_EXPORT_QUEUE_BYTES=1000000000")...), nil, nil,
			"exceeds Kafka's 1000000000-byte message limit"},
		{"export value checked while export is off", bare("CELLD_EXPORT_FLUSH_MS=0"), nil, nil, "CELLD_EXPORT_FLUSH_MS must be a positive integer"},
		{"export classes never exported", bare("CELLD_EXPORT_CLASSES=Orders,__Workflow.billing"), nil, nil, "names __Workflow.billing, which is never exported"},
		{"export classes cron", bare("CELLD_EXPORT_CLASSES=app.cron"), nil, nil, "never exported"},
		{"export classes empty", bare("CELLD_EXPORT_CLASSES=, ,"), nil, nil, "CELLD_EXPORT_CLASSES must name at least one class"},
		{"export tables without a dot", bare("CELLD_EXPORT_TABLES=Orders"), nil, nil, "CELLD_EXPORT_TABLES entries must be Class.table"},
		{"export tables empty table", bare("CELLD_EXPORT_TABLES=Orders."), nil, nil, "CELLD_EXPORT_TABLES entries must be Class.table"},
		{"export bucket empty", bare("CELLD_EXPORT_BUCKET="), nil, nil, "CELLD_EXPORT_BUCKET must not be empty"},
		{"export topic empty", bare("CELLD_EXPORT_TOPIC="), nil, nil, "CELLD_EXPORT_TOPIC must not be empty"},
		{"export retention", bare("CELLD_EXPORT_RETENTION=forever"), nil, nil, "CELLD_EXPORT_RETENTION must be <n>d"},
		{"export reconcile", bare("CELLD_EXPORT_RECONCILE=90m"), nil, nil, ""},
		{"export reconcile unit", bare("CELLD_EXPORT_RECONCILE=1w"), nil, nil, "CELLD_EXPORT_RECONCILE must be"},
		{"blob-stream", with(operatorEnv(), blob...), nil, nil, ""},
		{"blob-stream k8s brokers", with(operatorEnv(), append(blob, "CELLD_EXPORT_BROKERS=k8s://kafka/brokers")...), nil, nil, ""},
		{"blob-stream duplicate broker id", bare("CELLD_EXPORT_BROKERS=1=a:9000,1=b:9000"), nil, nil, "repeats node id 1"},
		{"blob-stream without partitions", with(operatorEnv(), append(blob, "CELLD_EXPORT_PARTITIONS")...), nil, nil, "needs CELLD_EXPORT_PARTITIONS"},
		{"blob-stream writer zone not listed", with(operatorEnv(), append(blob, "CELLD_EXPORT_ZONES=a,b", "CELLD_ZONE=c")...), nil, nil, "CELLD_ZONE \"c\" is not one of CELLD_EXPORT_ZONES"},
		{"blob-stream partitions overflow", with(operatorEnv(), append(blob, "CELLD_EXPORT_ZONES=a,b", "CELLD_EXPORT_PARTITIONS=4294967295")...), nil, nil, "overflows"},
		{"export zones repeated", bare("CELLD_EXPORT_ZONES=a,a"), nil, nil, "CELLD_EXPORT_ZONES repeats zone a"},

		// Kafka properties (read only when readable here)
		{"kafka properties accepted", with(operatorEnv(), kafka...), nil,
			props("# SASL\nsecurity.protocol=SASL_SSL\n! note\nsasl.mechanism=SCRAM-SHA-512\nacks=all\nmessage.max.bytes=1114112\nallow.auto.create.topics=false\n"), ""},
		{"kafka properties not readable here are skipped", with(operatorEnv(), kafka...), nil, files{}, ""},
		{"kafka properties acks", with(operatorEnv(), kafka...), nil, props("acks=1\n"), "acks must be all or -1"},
		{"kafka properties message timeout", with(operatorEnv(), kafka...), nil, props("message.timeout.ms=5000\n"), "message.timeout.ms comes from CELLD_EXPORT_RETRY_MS"},
		{"kafka properties delivery timeout", with(operatorEnv(), kafka...), nil, props("delivery.timeout.ms=5000\n"), "delivery.timeout.ms comes from CELLD_EXPORT_RETRY_MS"},
		{"kafka properties auto create", with(operatorEnv(), kafka...), nil, props("allow.auto.create.topics=true\n"), "allow.auto.create.topics must be false"},
		{"kafka properties report only error", with(operatorEnv(), kafka...), nil, props("delivery.report.only.error=true\n"), "delivery.report.only.error must be false"},
		{"kafka properties message max bytes too small", with(operatorEnv(), kafka...), nil, props("message.max.bytes=1000000\n"), "message.max.bytes 1000000 is below 1114112"},
		{"kafka properties line without =", with(operatorEnv(), kafka...), nil, props("acks=all\nbroken\n"), "line 2 is not name=value"},
		{"kafka properties checked only with the kafka sink on", with(operatorEnv(), append(kafka, "CELLD_EXPORT=0")...), nil, props("acks=1\n"), ""},

		// §1.2 listeners and the bucket
		{"loopback listener alone", bare("CELLD_ADDR=127.0.0.1:8080"), nil, nil, ""},
		{"non-loopback listener without internal", bare("CELLD_ADDR=0.0.0.0:8080"), nil, nil, "a non-loopback --listen or CELLD_ADDR requires an explicit --internal-listen"},
		{"non-loopback listener with a blank internal", bare("CELLD_ADDR=10.0.0.1:8080", "CELLD_INTERNAL_ADDR= "), nil, nil, "requires an explicit --internal-listen"},
		{"listener not a socket address", bare("CELLD_ADDR=localhost:8080"), nil, nil, "CELLD_ADDR must be an IP:PORT socket address"},
		{"blank listener is unset", bare("CELLD_ADDR=  "), nil, nil, ""},
		{"unspecified internal without advertise", bare("CELLD_INTERNAL_ADDR=0.0.0.0:8081"), nil, nil, "--advertise is required when --internal-listen uses an unspecified address"},
		{"unspecified internal with advertise from a Secret", bare("CELLD_INTERNAL_ADDR=[::]:8081"), set("CELLD_ADVERTISE"), nil, ""},
		{"loopback internal without advertise", bare("CELLD_INTERNAL_ADDR=127.0.0.1:0"), nil, nil, ""},
		{"advertise without internal", bare("CELLD_ADVERTISE=10.0.0.1:8081"), nil, nil, "requires an explicit --internal-listen"},
		{"advertise loopback (the local cluster's pod IPs)", with(operatorEnv(), "CELLD_ADVERTISE=127.100.1.9:8081"), nil, nil, ""},
		{"advertise link-local", with(operatorEnv(), "CELLD_ADVERTISE=169.254.0.7:8081"), nil, nil, ""},
		{"advertise CGNAT", with(operatorEnv(), "CELLD_ADVERTISE=100.64.3.4:8081"), nil, nil, ""},
		{"advertise ULA", with(operatorEnv(), "CELLD_ADVERTISE=[fd00::5]:8081"), nil, nil, ""},
		{"advertise public IP", with(operatorEnv(), "CELLD_ADVERTISE=8.8.8.8:8081"), nil, nil, "CELLD_ADVERTISE 8.8.8.8 is a public address"},
		{"advertise public IP allowed", with(operatorEnv(), "CELLD_ADVERTISE=8.8.8.8:8081", "CELLD_UNSAFE_PUBLIC_ADVERTISE=1"), nil, nil, ""},
		{"advertise unspecified", with(operatorEnv(), "CELLD_ADVERTISE=0.0.0.0:8081"), nil, nil, "must be a concrete unicast address"},
		{"advertise broadcast", with(operatorEnv(), "CELLD_ADVERTISE=255.255.255.255:8081", "CELLD_UNSAFE_PUBLIC_ADVERTISE=1"), nil, nil, "concrete unicast"},
		{"advertise port 0", with(operatorEnv(), "CELLD_ADVERTISE=10.0.0.1:0"), nil, nil, "CELLD_ADVERTISE port must be 1 to 65535"},
		{"advertise without a port", with(operatorEnv(), "CELLD_ADVERTISE=f-0.f-peers.apps.svc"), nil, nil, "CELLD_ADVERTISE must be IP:PORT or HOST:PORT"},
		{"advertise bad label", with(operatorEnv(), "CELLD_ADVERTISE=f_0.peers.svc:8081"), nil, nil, "invalid DNS label \"f_0\""},
		{"advertise label too long", with(operatorEnv(), "CELLD_ADVERTISE="+strings.Repeat("a", 64)+".svc:8081"), nil, nil, "invalid DNS label"},
		{"advertise unresolved $(VAR)", with(operatorEnv(), "CELLD_ADVERTISE=$(POD_IP):8081"), nil, nil, "invalid DNS label"},
		{"bucket schemes", bare("CELLD_BUCKET=GS://b/prefix"), nil, nil, ""},
		{"bucket without scheme", bare("CELLD_BUCKET=b"), nil, nil, ""},
		{"bucket unknown scheme", bare("CELLD_BUCKET=r2://b"), nil, nil, "CELLD_BUCKET must be s3://, gs:// or az://"},
		{"bucket without a name", bare("CELLD_BUCKET=s3:///prefix"), nil, nil, "CELLD_BUCKET names no bucket"},
		{"endpoint with a gs bucket", bare("CELLD_BUCKET=gs://b", "S3_ENDPOINT=http://minio:9000"), nil, nil, "S3_ENDPOINT (--endpoint) applies only to s3 buckets"},

		// opaque values are not read
		{"durability from a Secret", bare(), set("CELLD_DURABILITY", "CELLD_OTEL", "CELLD_EXPORT_SINK"), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var read func(string) ([]byte, error)
			if c.files != nil {
				read = c.files.read
			}
			err := validateEnv(c.env, c.opaque, read)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("celld accepts this env, the simulator refused it: %v", err)
			case c.want != "" && err == nil:
				t.Errorf("celld refuses this env (%s), the simulator accepted it", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// The first violation in name order is reported, so a message is stable.
func TestValidateEnvReportsTheFirstViolationInAFixedOrder(t *testing.T) {
	env := bare("CELLD_TTL_MS=0", "CELLD_DURABILITY=disk", "CELLD_VAR_X=1")
	for range 20 {
		if err := validateEnv(env, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "CELLD_VAR_X is removed") {
			t.Fatalf("removed names come first, got %v", err)
		}
	}
	delete(env, "CELLD_VAR_X")
	for range 20 {
		if err := validateEnv(env, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "CELLD_DURABILITY") {
			t.Fatalf("then values in name order, got %v", err)
		}
	}
}
