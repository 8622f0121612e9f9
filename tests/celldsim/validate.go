package celldsim

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Start-up env validation (celld-runtime.md §1, §5.1). celld checks its environment before it
// binds anything and exits 1 with "Error: <message>" on the first rule a value breaks. The rules
// below are the ones the spec states; a name the spec does not constrain is accepted, and so is
// every unknown CELLD_* name (celld ignores them), including the simulator's own CELLD_SIM_*
// knobs. The reserved prefixes of §1.8 (CELLD_REEXEC_, CELLD_STRICT_, …) are the operator's
// spec.env rule, not celld's: celld does not refuse them.

// defaultFeatures is the feature list of the emulated image when CELLD_SIM_FEATURES is unset:
// the -kafka image (built with export-kafka). A simulated fleet cannot name an image variant,
// since the operator pins runtime images by digest, and the -kafka image accepts every sink the
// operator renders; a test emulates the plain image with CELLD_SIM_FEATURES=none (any list
// without export-kafka).
const defaultFeatures = "export-kafka"

// Boolean names: exactly 0 or 1 (§1.1, §5.1).
var flagNames = []string{
	"CELLD_UNSAFE_PUBLIC_ADVERTISE", "CELLD_TRUST_FORWARDED_HEADERS", "CELLD_CLOUD", "CELLD_EXPORT",
	"CELLD_LTX_COMPACTION", "CELLD_LTX_PAGED",
}

// Positive integers (> 0): the names of §5.1, and the §1.3, §1.4 and §1.5 settings whose default
// is a positive count, size or duration and for which no meaning of 0 is documented.
var positiveNames = []string{
	"CELLD_TTL_MS", "CELLD_SHUTDOWN_TOTAL_MS", "CELLD_RELEASES", "CELLD_ACTIVATIONS", "CELLD_TOKIO_THREADS",
	"CELLD_DEPLOY_POLL_S", "CELLD_IDLE_EVICT_S", "CELLD_OPERATION_DEADLINE_MS", "CELLD_PLACEMENT_WEIGHT",
	"CELLD_MAX_CELL_REQUESTS", "CELLD_RECOVERY_RETRY_MS", "CELLD_LOG_PIPELINE", "CELLD_LOG_WINDOW",
	"CELLD_LOG_WINDOW_BYTES", "CELLD_LTX_TRUNCATE_PAGES", "CELLD_LTX_PAGED_MIN_MB", "CELLD_LTX_HYDRATE_MBPS",
	"CELLD_LTX_DURABILITY_TIMEOUT_SECS", "CELLD_LTX_COMPACTION_MIN_MB", "CELLD_LTX_COMPACTIONS",
	"CELLD_LTX_COMPACTION_MIN_TXIDS", "CELLD_ALARM_RESIDENT_MS", "CELLD_WAKER_TICK_MS", "CELLD_V8_HEAP_LIMIT_MB",
	"CELLD_FETCH_TIMEOUT_S", "CELLD_HANDLER_BUDGET_S", "CELLD_MAX_OUTBOUND_WEBSOCKETS", "CELLD_MAX_REQUESTS",
	"CELLD_MAX_STATELESS_ISOLATES", "CELLD_MAX_ASSET_FILE_BYTES", "CELLD_LOG_EVICT_BUDGET_MS",
	"CELLD_LOG_EVICT_SUSTAIN_MS", "CELLD_LOG_EVICT_BACKSTOP_MS", "CELLD_LOG_EVICT_QUARANTINE_MS",
	"CELLD_LOG_FLUSH_MS", "CELLD_FLEET_VIEW_MS",
	"CELLD_OTEL_FLUSH_MS", "CELLD_OTEL_FLUSH_BYTES", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_METRIC_EXPORT_INTERVAL",
	"CELLD_EXPORT_MAX_TX_BYTES", "CELLD_EXPORT_MAX_RECORD_BYTES", "CELLD_EXPORT_QUEUE_BYTES",
	"CELLD_EXPORT_FLUSH_MS", "CELLD_EXPORT_FLUSH_BYTES", "CELLD_EXPORT_RETRY_MS",
}

// Optional integers (0 allowed, usually "disabled"): §5.1 and the §1.3 settings documented so.
var optionalNames = []string{
	"CELLD_MAX_RESIDENT_CELLS", "CELLD_MAX_RSS_MB", "CELLD_READY_FLEET_GATE_MS", "CELLD_REBALANCE_INTERVAL_MS",
	"CELLD_DEPLOY_MAX_AGE_S", "CELLD_LOCAL_CACHE_MAX_BYTES", "CELLD_LOG_HEDGE_MS", "CELLD_RECOVERY_RETRIES",
	"CELLD_ADMISSION_WAIT_MS", "CELLD_ASSET_CACHE_BYTES",
}

// Integers with a documented range.
var rangedNames = map[string][2]uint64{
	"CELLD_MAX_REQUEST_BODY_BYTES": {1, 1 << 30},
	"CELLD_CONTROL_LEASE_SHARDS":   {1, 64},
	"CELLD_PRESENCE_HEARTBEAT_MS":  {50, 30000},
	"CELLD_EXPORT_PARTITIONS":      {1, math.MaxUint32},
}

// Enumerations: name -> accepted values, in the order the message lists them.
var enumNames = map[string][]string{
	"CELLD_DURABILITY":         {"bucket", "fleet"},
	"CELLD_PRESSURE_OWNERSHIP": {"release", "sticky"},
	"CELLD_LOG_TRANSPORT":      {"http", "stream"},
	"OTEL_METRICS_EXPORTER":    {"otlp", "none"},
	"OTEL_TRACES_SAMPLER": {"parentbased_always_on", "always_on", "parentbased_always_off", "always_off",
		"traceidratio", "parentbased_traceidratio"},
}

// removedNames refuse the boot (§1.7): "NAME is removed; <hint>".
var removedNames = map[string]string{
	"CELLD_TEST_OTEL_SWEEP_MS":      "unset it",
	"CELLD_OTEL_SINK":               "CELLD_OTEL selects the sink (1 for the bucket, a URL for a collector)",
	"CELLD_AI_BINDING":              "unset it",
	"CELLD_AI_URL":                  "unset it",
	"CELLD_PACED_HANDOFF":           "unset it",
	"CELLD_LOG_GROUP_COMMIT_MS":     "unset it",
	"CELLD_QUEUE_PRODUCER_GROUP_MS": "unset it",
	"CELLD_LOG_BUNDLE":              "unset it",
	"CELLD_PRESENCE_SHADOW":         "unset it",
	"CELLD_STORAGE_PROBE":           "unset it",
	"CELLD_EVICTIONS":               "unset it",
	"CELLD_LOG_CAPTURE_WORKERS":     "unset it",
	"CELLD_REBALANCE_BATCH_CELLS":   "unset it",
	"CELLD_CLOUD_RESTART_ON_DEPLOY": "unset it",
	"CELLD_OUTPUT_GATE":             "unset it",
	"CELLD_DRAIN_TOKEN_WAIT_MS":     "CELLD_SHUTDOWN_TOTAL_MS sets the whole stop budget",
	"CELLD_SHUTDOWN_DRAIN_MS":       "CELLD_SHUTDOWN_TOTAL_MS sets the whole stop budget",
	"CELLD_MAX_LOADED_WORKERS":      "unset it",
	"CELLD_WORKER_LOADER":           "unset it",
	"CELLD_VARS_FILE":               varsHint,
}

// Every CELLD_VAR_* name is removed too.
const (
	removedPrefix = "CELLD_VAR_"
	varsHint      = "unset it"
)

// perfNames are valid only in a perf build (§1.6).
var perfNames = []string{"CELLD_PERF_BUCKET_FAULTS", "CELLD_PERF_FSYNC_DELAY_US"}

// addressNames are read through celld's CLI env closure: a whitespace-only value is unset.
var addressNames = map[string]bool{
	"CELLD_BUCKET": true, "CELLD_ADDR": true, "CELLD_INTERNAL_ADDR": true, "CELLD_ADVERTISE": true, "S3_ENDPOINT": true,
}

var (
	reNodeName  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	reDays      = regexp.MustCompile(`^\+?([0-9]+)d$`)
	reReconcile = regexp.MustCompile(`^\+?([0-9]+)[smhd]$`)
	reDNSLabel  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
)

// celldEnvView is the environment celld would see: resolved values, and the names whose values
// come from a Secret or ConfigMap the simulator cannot read (present, value unknown).
type celldEnvView struct {
	vals   map[string]string
	opaque map[string]bool
}

// value returns a name's value when the simulator knows it.
func (e celldEnvView) value(name string) (string, bool) {
	v, ok := e.vals[name]
	return v, ok && !e.opaque[name]
}

// set reports whether celld sees the name as supplied; an opaque name counts.
func (e celldEnvView) set(name string) bool {
	if e.opaque[name] {
		return true
	}
	v, ok := e.vals[name]
	if addressNames[name] {
		return ok && strings.TrimSpace(v) != ""
	}
	return ok
}

// validateEnv checks env the way celld's start-up does and returns the first violation, in a
// fixed order: removed names, then each supplied value in name order, then the rules across
// names. env holds the resolved values; opaque names are set from a Secret or ConfigMap, so the
// rules that only need their presence count them and the rules on their value skip them.
// readFile reads the Kafka properties file; nil or an error (the file is not readable here)
// skips its checks.
func validateEnv(env map[string]string, opaque map[string]bool, readFile func(string) ([]byte, error)) error {
	e := celldEnvView{vals: env, opaque: opaque}
	features := featureSet(e)
	names := make([]string, 0, len(env)+len(opaque))
	for n := range env {
		names = append(names, n)
	}
	for n := range opaque {
		if _, dup := env[n]; !dup {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if err := checkRemoved(e, n, features); err != nil {
			return err
		}
	}
	for _, n := range names {
		v, known := e.value(n)
		if !known {
			continue
		}
		if err := checkValue(n, v, features); err != nil {
			return err
		}
	}
	for _, check := range []func(celldEnvView) error{checkListeners, checkBucket, checkTelemetry, checkExport} {
		if err := check(e); err != nil {
			return err
		}
	}
	if e.set("CELLD_EXPORT_KAFKA_PROPERTIES") && readFile != nil && exportOn(e) && sinkIs(e, "kafka") {
		path, known := e.value("CELLD_EXPORT_KAFKA_PROPERTIES")
		if known {
			if data, err := readFile(path); err == nil {
				record, rk := uintOr(e, "CELLD_EXPORT_MAX_RECORD_BYTES", 1048576)
				if err := checkKafkaProperties(string(data), record, rk); err != nil {
					return fmt.Errorf("CELLD_EXPORT_KAFKA_PROPERTIES %s: %w", path, err)
				}
			}
		}
	}
	return nil
}

func featureSet(e celldEnvView) map[string]bool {
	v, _ := e.value(KnobFeatures)
	if strings.TrimSpace(v) == "" {
		v = defaultFeatures
	}
	out := map[string]bool{}
	for _, f := range splitList(v) {
		out[f] = true
	}
	return out
}

// checkRemoved refuses a removed name (§1.7) or a perf-only name in an ordinary build (§1.6).
// Presence is enough, so a name set from a Secret is refused too, except CELLD_WORKER_LOADER:
// celld tolerates it empty, and a Secret's value is unknown.
func checkRemoved(e celldEnvView, n string, features map[string]bool) error {
	switch {
	case n == "CELLD_WORKER_LOADER":
		if v, ok := e.value(n); !ok || v == "" {
			return nil
		}
	case strings.HasPrefix(n, removedPrefix):
		return fmt.Errorf("%s is removed; %s", n, varsHint)
	case slices.Contains(perfNames, n) && !features["perf"]:
		return fmt.Errorf("%s is only valid in a perf build of celld", n)
	}
	if hint, ok := removedNames[n]; ok {
		return fmt.Errorf("%s is removed; %s", n, hint)
	}
	return nil
}

// checkValue applies the rules that read one value alone. Export values are checked even when
// export is off (§1.5).
func checkValue(n, v string, features map[string]bool) error {
	switch {
	case slices.Contains(flagNames, n):
		if v != "0" && v != "1" {
			return fmt.Errorf("%s must be 0 or 1, got %q", n, v)
		}
	case slices.Contains(positiveNames, n):
		if x, err := parseUint(v); err != nil || x == 0 {
			return fmt.Errorf("%s must be a positive integer, got %q", n, v)
		}
	case slices.Contains(optionalNames, n):
		if _, err := parseUint(v); err != nil {
			return fmt.Errorf("%s must be a non-negative integer, got %q", n, v)
		}
	}
	if r, ok := rangedNames[n]; ok {
		if x, err := parseUint(v); err != nil || x < r[0] || x > r[1] {
			return fmt.Errorf("%s must be an integer from %d to %d, got %q", n, r[0], r[1], v)
		}
	}
	if allowed, ok := enumNames[n]; ok && !slices.Contains(allowed, v) {
		return fmt.Errorf("%s must be %s, got %q", n, orList(allowed), v)
	}
	switch n {
	case "CELLD_NODE":
		if !reNodeName.MatchString(v) || v == "." || v == ".." {
			return fmt.Errorf("CELLD_NODE must be 1 to 128 ASCII letters, digits, '.', '-' or '_' and not '.' or '..', got %q", v)
		}
	case "CELLD_ZONE":
		if !reNodeName.MatchString(v) {
			return fmt.Errorf("CELLD_ZONE must be 1 to 128 ASCII letters, digits, '.', '-' or '_', got %q", v)
		}
	case "CELLD_CONTROL":
		if v != "bucket" && (!strings.HasPrefix(v, "dynamodb://") || len(v) == len("dynamodb://")) {
			return fmt.Errorf("CELLD_CONTROL must be bucket or dynamodb://TABLE, got %q", v)
		}
	case "CELLD_OTEL":
		return checkOTEL(v)
	case "CELLD_OTEL_RETENTION", "CELLD_EXPORT_RETENTION":
		if !validDays(v) {
			return fmt.Errorf("%s must be <n>d with n > 0, or none, got %q", n, v)
		}
	case "OTEL_EXPORTER_OTLP_HEADERS":
		if _, err := keyValues(v); err != nil {
			return fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS %w", err)
		}
	case "OTEL_RESOURCE_ATTRIBUTES":
		kv, err := keyValues(v)
		if err != nil {
			return fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES %w", err)
		}
		for _, k := range kv {
			if k == "service.name" || k == "service.version" || k == "service.instance.id" || k == "celld.region" {
				return fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES cannot set %s; celld sets it", k)
			}
		}
	case "CELLD_EXPORT_SINK":
		_, err := exportSinks(v, features)
		return err
	case "CELLD_EXPORT_BUCKET", "CELLD_EXPORT_TOPIC", "CELLD_EXPORT_KAFKA_PROPERTIES":
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("%s must not be empty", n)
		}
	case "CELLD_EXPORT_CLASSES":
		return checkClasses(v)
	case "CELLD_EXPORT_TABLES":
		for _, t := range splitList(v) {
			class, table, ok := strings.Cut(t, ".")
			if !ok || class == "" || table == "" {
				return fmt.Errorf("CELLD_EXPORT_TABLES entries must be Class.table, got %q", t)
			}
		}
	case "CELLD_EXPORT_BROKERS":
		return checkBlobBrokers(v)
	case "CELLD_EXPORT_ZONES":
		_, err := exportZones(v)
		return err
	case "CELLD_EXPORT_KAFKA_BROKERS":
		list := splitList(v)
		if len(list) == 0 {
			return fmt.Errorf("CELLD_EXPORT_KAFKA_BROKERS must list at least one host:port")
		}
		for _, b := range list {
			if err := hostPort(b); err != nil {
				return fmt.Errorf("CELLD_EXPORT_KAFKA_BROKERS entry %q: %w", b, err)
			}
		}
	case "CELLD_EXPORT_RECONCILE":
		m := reReconcile.FindStringSubmatch(v)
		if m == nil || !positiveDigits(m[1]) {
			return fmt.Errorf("CELLD_EXPORT_RECONCILE must be <n>s, <n>m, <n>h or <n>d with n > 0, got %q", v)
		}
	}
	return nil
}

// checkListeners applies the listener rules of §1.2 (celld's CLI: --listen, --internal-listen,
// --advertise).
func checkListeners(e celldEnvView) error {
	internalSet := e.set("CELLD_INTERNAL_ADDR")
	if v, ok := e.value("CELLD_ADDR"); ok && strings.TrimSpace(v) != "" {
		a, err := netip.ParseAddrPort(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("CELLD_ADDR must be an IP:PORT socket address, got %q", v)
		}
		if !a.Addr().Unmap().IsLoopback() && !internalSet {
			return fmt.Errorf("a non-loopback --listen or CELLD_ADDR requires an explicit --internal-listen or CELLD_INTERNAL_ADDR")
		}
	}
	if v, ok := e.value("CELLD_INTERNAL_ADDR"); ok && strings.TrimSpace(v) != "" {
		a, err := netip.ParseAddrPort(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("CELLD_INTERNAL_ADDR must be an IP:PORT socket address, got %q", v)
		}
		if a.Addr().IsUnspecified() && !e.set("CELLD_ADVERTISE") {
			return fmt.Errorf("--advertise is required when --internal-listen uses an unspecified address")
		}
	}
	if !e.set("CELLD_ADVERTISE") {
		return nil
	}
	if !internalSet {
		return fmt.Errorf("--advertise or CELLD_ADVERTISE requires an explicit --internal-listen or CELLD_INTERNAL_ADDR")
	}
	v, ok := e.value("CELLD_ADVERTISE")
	if !ok {
		return nil
	}
	unsafe, _ := e.value("CELLD_UNSAFE_PUBLIC_ADVERTISE")
	return checkAdvertise(strings.TrimSpace(v), unsafe == "1")
}

// checkAdvertise: IP:PORT or HOST:PORT, port not 0, a concrete unicast IP (a public one only
// with CELLD_UNSAFE_PUBLIC_ADVERTISE=1) or a DNS-valid host name (not resolved).
func checkAdvertise(v string, unsafePublic bool) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("CELLD_ADVERTISE must be IP:PORT or HOST:PORT, got %q", v)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("CELLD_ADVERTISE port must be 1 to 65535, got %q", v)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		if ip.IsUnspecified() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || ip.Zone() != "" {
			return fmt.Errorf("CELLD_ADVERTISE must be a concrete unicast address, got %q", v)
		}
		cgnat := netip.MustParsePrefix("100.64.0.0/10")
		if !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || cgnat.Contains(ip)) && !unsafePublic {
			return fmt.Errorf("CELLD_ADVERTISE %s is a public address; set CELLD_UNSAFE_PUBLIC_ADVERTISE=1 to advertise it", host)
		}
		return nil
	}
	if len(host) == 0 || len(host) > 253 {
		return fmt.Errorf("CELLD_ADVERTISE host must be 1 to 253 characters, got %q", host)
	}
	for _, l := range strings.Split(host, ".") {
		if !reDNSLabel.MatchString(l) {
			return fmt.Errorf("CELLD_ADVERTISE host %q has an invalid DNS label %q", host, l)
		}
	}
	return nil
}

// checkBucket: s3:// (or no scheme), gs:// or az://, then a bucket name and an optional prefix;
// S3_ENDPOINT only with an s3 bucket.
func checkBucket(e celldEnvView) error {
	v, ok := e.value("CELLD_BUCKET")
	if !ok || strings.TrimSpace(v) == "" {
		return nil
	}
	v = strings.TrimSpace(v)
	scheme, rest, hasScheme := strings.Cut(v, "://")
	if !hasScheme {
		scheme, rest = "s3", v
	}
	scheme = strings.ToLower(scheme)
	if scheme != "s3" && scheme != "gs" && scheme != "az" {
		return fmt.Errorf("CELLD_BUCKET must be s3://, gs:// or az:// followed by a bucket name, got %q", v)
	}
	if name, _, _ := strings.Cut(rest, "/"); name == "" {
		return fmt.Errorf("CELLD_BUCKET names no bucket: %q", v)
	}
	if scheme != "s3" && e.set("S3_ENDPOINT") {
		return fmt.Errorf("S3_ENDPOINT (--endpoint) applies only to s3 buckets, not %s://", scheme)
	}
	return nil
}

func checkOTEL(v string) error {
	if v == "0" || v == "1" {
		return nil
	}
	bad := fmt.Errorf("CELLD_OTEL must be 0, 1, or an HTTP(S) collector base URL, got %q", v)
	u, err := url.Parse(v)
	if err != nil || u.Opaque != "" || u.Hostname() == "" || u.RawQuery != "" || u.ForceQuery || strings.Contains(v, "#") {
		return bad
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return bad
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return bad
		}
	}
	return nil
}

// checkTelemetry: CELLD_OTEL=1 needs a bucket; a ratio sampler needs its argument in [0,1].
func checkTelemetry(e celldEnvView) error {
	if v, ok := e.value("CELLD_OTEL"); ok && v == "1" && !e.set("CELLD_BUCKET") {
		return fmt.Errorf("CELLD_OTEL=1 writes telemetry to the fleet bucket and needs CELLD_BUCKET")
	}
	sampler, ok := e.value("OTEL_TRACES_SAMPLER")
	if !ok || (sampler != "traceidratio" && sampler != "parentbased_traceidratio") {
		return nil
	}
	if !e.set("OTEL_TRACES_SAMPLER_ARG") {
		return fmt.Errorf("OTEL_TRACES_SAMPLER=%s needs OTEL_TRACES_SAMPLER_ARG, a ratio from 0 to 1", sampler)
	}
	if arg, ok := e.value("OTEL_TRACES_SAMPLER_ARG"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got %q", arg)
		}
	}
	return nil
}

func exportOn(e celldEnvView) bool { v, _ := e.value("CELLD_EXPORT"); return v == "1" }

// sinkIs reports whether the export sink is known to be sink (the default is bucket).
func sinkIs(e celldEnvView, sink string) bool {
	if e.opaque["CELLD_EXPORT_SINK"] {
		return false
	}
	v, ok := e.value("CELLD_EXPORT_SINK")
	if !ok {
		return sink == "bucket"
	}
	return slices.Contains(splitList(v), sink)
}

// checkExport applies the rules across export names; they hold only with CELLD_EXPORT=1.
func checkExport(e celldEnvView) error {
	if !exportOn(e) {
		return nil
	}
	record, recordKnown := uintOr(e, "CELLD_EXPORT_MAX_RECORD_BYTES", 1048576)
	queue, queueKnown := uintOr(e, "CELLD_EXPORT_QUEUE_BYTES", 268435456)
	if recordKnown && queueKnown && record > queue {
		return fmt.Errorf("CELLD_EXPORT_MAX_RECORD_BYTES (%d) must not exceed CELLD_EXPORT_QUEUE_BYTES (%d)", record, queue)
	}
	switch {
	case sinkIs(e, "bucket"):
		if !e.set("CELLD_BUCKET") {
			return fmt.Errorf("CELLD_EXPORT=1 with the bucket sink needs CELLD_BUCKET (the export bucket shares its endpoint and credentials)")
		}
	case sinkIs(e, "kafka"):
		if !e.set("CELLD_EXPORT_KAFKA_BROKERS") {
			return fmt.Errorf("CELLD_EXPORT_SINK=kafka needs CELLD_EXPORT_KAFKA_BROKERS")
		}
		if recordKnown && record+65536 > 1_000_000_000 {
			return fmt.Errorf("CELLD_EXPORT_MAX_RECORD_BYTES (%d) plus 64 KiB exceeds Kafka's 1000000000-byte message limit", record)
		}
	case sinkIs(e, "blob-stream"):
		if !e.set("CELLD_EXPORT_BROKERS") {
			return fmt.Errorf("CELLD_EXPORT_SINK=blob-stream needs CELLD_EXPORT_BROKERS")
		}
		if !e.set("CELLD_EXPORT_PARTITIONS") {
			return fmt.Errorf("CELLD_EXPORT_SINK=blob-stream needs CELLD_EXPORT_PARTITIONS")
		}
		zv, ok := e.value("CELLD_EXPORT_ZONES")
		if !ok {
			return nil
		}
		zones, _ := exportZones(zv)
		if p, ok := uintOr(e, "CELLD_EXPORT_PARTITIONS", 1); ok && p*uint64(len(zones)) > math.MaxUint32 {
			return fmt.Errorf("CELLD_EXPORT_PARTITIONS (%d) times %d zones overflows the partition space", p, len(zones))
		}
		if z, ok := e.value("CELLD_ZONE"); ok && !slices.Contains(zones, z) {
			return fmt.Errorf("CELLD_ZONE %q is not one of CELLD_EXPORT_ZONES", z)
		}
	}
	return nil
}

// exportSinks parses CELLD_EXPORT_SINK: one of bucket, blob-stream, kafka, built into celld.
func exportSinks(v string, features map[string]bool) ([]string, error) {
	var sinks []string
	for _, s := range splitList(v) {
		switch s {
		case "bucket", "blob-stream", "kafka":
		default:
			return nil, fmt.Errorf("CELLD_EXPORT_SINK has an unknown sink %q; expected bucket, blob-stream or kafka", s)
		}
		if !slices.Contains(sinks, s) {
			sinks = append(sinks, s)
		}
	}
	switch {
	case len(sinks) == 0:
		return nil, fmt.Errorf("CELLD_EXPORT_SINK must name a sink")
	case len(sinks) > 1:
		return nil, fmt.Errorf("CELLD_EXPORT_SINK names more than one sink (%s); choose one", strings.Join(sinks, ","))
	case sinks[0] == "kafka" && !features["export-kafka"]:
		return nil, fmt.Errorf("CELLD_EXPORT_SINK=kafka needs a celld built with the export-kafka feature")
	case sinks[0] == "blob-stream" && !features["export-blob-stream"]:
		return nil, fmt.Errorf("CELLD_EXPORT_SINK=blob-stream needs a celld built with the export-blob-stream feature")
	}
	return sinks, nil
}

func checkClasses(v string) error {
	classes := splitList(v)
	if len(classes) == 0 {
		return fmt.Errorf("CELLD_EXPORT_CLASSES must name at least one class")
	}
	for _, c := range classes {
		if c == "__Queue" || c == "__Workflow" || strings.HasPrefix(c, "__Workflow.") || strings.HasSuffix(c, ".cron") {
			return fmt.Errorf("CELLD_EXPORT_CLASSES names %s, which is never exported", c)
		}
	}
	return nil
}

// checkBlobBrokers: NODE_ID=host:port,… with unique IDs, or one k8s://NAMESPACE/SERVICE.
func checkBlobBrokers(v string) error {
	list := splitList(v)
	if len(list) == 1 && strings.HasPrefix(list[0], "k8s://") {
		ns, svc, ok := strings.Cut(strings.TrimPrefix(list[0], "k8s://"), "/")
		if !ok || ns == "" || svc == "" || strings.Contains(svc, "/") {
			return fmt.Errorf("CELLD_EXPORT_BROKERS must be k8s://NAMESPACE/SERVICE, got %q", v)
		}
		return nil
	}
	if len(list) == 0 {
		return fmt.Errorf("CELLD_EXPORT_BROKERS must list NODE_ID=host:port entries or one k8s://NAMESPACE/SERVICE")
	}
	ids := map[string]bool{}
	for _, b := range list {
		id, addr, ok := strings.Cut(b, "=")
		if !ok || strings.TrimSpace(id) == "" {
			return fmt.Errorf("CELLD_EXPORT_BROKERS entries must be NODE_ID=host:port, got %q", b)
		}
		if ids[id] {
			return fmt.Errorf("CELLD_EXPORT_BROKERS repeats node id %s", id)
		}
		ids[id] = true
		if err := hostPort(addr); err != nil {
			return fmt.Errorf("CELLD_EXPORT_BROKERS entry %q: %w", b, err)
		}
	}
	return nil
}

func exportZones(v string) ([]string, error) {
	zones := splitList(v)
	if len(zones) == 0 || len(zones) > 1024 {
		return nil, fmt.Errorf("CELLD_EXPORT_ZONES must list 1 to 1024 zones, got %d", len(zones))
	}
	for i, z := range zones {
		if !reNodeName.MatchString(z) {
			return nil, fmt.Errorf("CELLD_EXPORT_ZONES has an invalid zone %q", z)
		}
		if slices.Contains(zones[:i], z) {
			return nil, fmt.Errorf("CELLD_EXPORT_ZONES repeats zone %s", z)
		}
	}
	return zones, nil
}

// checkKafkaProperties applies the refusals of celld's Kafka producer settings (§1.5) to a
// librdkafka properties file. record is CELLD_EXPORT_MAX_RECORD_BYTES (recordKnown false when it
// comes from a Secret).
func checkKafkaProperties(data string, record uint64, recordKnown bool) error {
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return fmt.Errorf("line %d is not name=value", i+1)
		}
		switch name {
		case "acks":
			if value != "all" && value != "-1" {
				return fmt.Errorf("acks must be all or -1, got %q", value)
			}
		case "message.timeout.ms", "delivery.timeout.ms":
			return fmt.Errorf("%s comes from CELLD_EXPORT_RETRY_MS; remove it", name)
		case "delivery.report.only.error", "allow.auto.create.topics":
			if value != "false" {
				return fmt.Errorf("%s must be false, got %q", name, value)
			}
		case "message.max.bytes":
			n, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				return fmt.Errorf("message.max.bytes must be an integer, got %q", value)
			}
			if !recordKnown {
				continue
			}
			least := min(max(record+65536, 1_000_000), 1_000_000_000)
			if n < least {
				return fmt.Errorf("message.max.bytes %d is below %d (CELLD_EXPORT_MAX_RECORD_BYTES + 64 KiB)", n, least)
			}
		}
	}
	return nil
}

// parseUint parses an unsigned integer the way Rust's u64::from_str does: an optional '+',
// then decimal digits, nothing else.
func parseUint(v string) (uint64, error) {
	return strconv.ParseUint(strings.TrimPrefix(v, "+"), 10, 64)
}

func positiveDigits(s string) bool { n, err := parseUint(s); return err == nil && n > 0 }

func validDays(v string) bool {
	if v == "none" {
		return true
	}
	m := reDays.FindStringSubmatch(v)
	return m != nil && positiveDigits(m[1])
}

// uintOr returns a name's integer value, def when unset; ok is false when the value is unknown
// (from a Secret) or not an integer.
func uintOr(e celldEnvView, name string, def uint64) (uint64, bool) {
	if e.opaque[name] {
		return 0, false
	}
	v, ok := e.value(name)
	if !ok {
		return def, true
	}
	n, err := parseUint(v)
	return n, err == nil
}

// keyValues parses a comma list of name=value entries (percent-encoded) and returns the names.
func keyValues(v string) ([]string, error) {
	var names []string
	for _, kv := range strings.Split(v, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, _, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("must be a comma list of name=value, got %q", kv)
		}
		if d, err := url.PathUnescape(k); err == nil {
			k = d
		}
		names = append(names, k)
	}
	return names, nil
}

func hostPort(v string) error {
	host, port, err := net.SplitHostPort(strings.TrimSpace(v))
	if err != nil || host == "" {
		return fmt.Errorf("must be host:port")
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("port must be 1 to 65535")
	}
	return nil
}

// splitList splits a comma list, trimming entries and dropping empty ones.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func orList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = "`" + v + "`"
	}
	if len(q) == 2 {
		return q[0] + " or " + q[1]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
