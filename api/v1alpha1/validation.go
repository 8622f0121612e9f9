package v1alpha1

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The patterns of the CRD schema, compiled once.
var (
	reDNSLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	reDNSSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	reImage        = regexp.MustCompile(`^(localhost|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+)(:[0-9]{1,5})?(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)+@sha256:[a-f0-9]{64}$`)
	reBucket       = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*[a-z0-9]$`)
	reRegion       = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	reZone         = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$`)
	reEnvName      = regexp.MustCompile(`^CELLD_[A-Z][A-Z0-9_]*$`)
	reSecretKey    = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	// reURL is the CRD's collectorURL pattern without its port ranges (checked after parsing).
	reURL         = regexp.MustCompile(`^https?://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(:[0-9]+)?(/([A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})*)?$`)
	reRatio       = regexp.MustCompile(`^(0(\.[0-9]+)?|1(\.0+)?)$`)
	reExportClass = regexp.MustCompile(`^[^,\s]+$`)
	reExportTable = regexp.MustCompile(`^[^.,\s]+\.[^.,\s]+$`)
	reBroker      = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?:[0-9]{1,5}$`)
	reTopic       = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)
	reHostname    = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	reDigitsDots  = regexp.MustCompile(`^[0-9.]+$`)
)

// operatorOwnedEnv are the CELLD_ variables the operator renders itself.
var operatorOwnedEnv = map[string]bool{
	"CELLD_NODE": true, "CELLD_ADVERTISE": true, "CELLD_BUCKET": true, "CELLD_DURABILITY": true,
	"CELLD_ADDR": true, "CELLD_INTERNAL_ADDR": true, "CELLD_WATCH": true, "CELLD_TTL_MS": true,
	"CELLD_SHUTDOWN_TOTAL_MS": true, "CELLD_TOKIO_THREADS": true, "CELLD_MAX_RESIDENT_CELLS": true,
	"CELLD_IDLE_EVICT_S": true,
}

// removedEnvNames are variables celld removed; it refuses to start while one is set, as it
// does for every CELLD_VAR_* name (celld-runtime.md §1.7). CELLD_WORKER_LOADER is tolerated
// when empty.
var removedEnvNames = map[string]bool{
	"CELLD_AI_BINDING":              true,
	"CELLD_AI_URL":                  true,
	"CELLD_PACED_HANDOFF":           true,
	"CELLD_LOG_GROUP_COMMIT_MS":     true,
	"CELLD_QUEUE_PRODUCER_GROUP_MS": true,
	"CELLD_LOG_BUNDLE":              true,
	"CELLD_PRESENCE_SHADOW":         true,
	"CELLD_STORAGE_PROBE":           true,
	"CELLD_EVICTIONS":               true,
	"CELLD_LOG_CAPTURE_WORKERS":     true,
	"CELLD_REBALANCE_BATCH_CELLS":   true,
	"CELLD_CLOUD_RESTART_ON_DEPLOY": true,
	"CELLD_OUTPUT_GATE":             true,
	"CELLD_DRAIN_TOKEN_WAIT_MS":     true,
	"CELLD_SHUTDOWN_DRAIN_MS":       true,
	"CELLD_MAX_LOADED_WORKERS":      true,
	"CELLD_WORKER_LOADER":           true,
	"CELLD_VARS_FILE":               true,
}

// DefaultExportQueueBytes is celld's CELLD_EXPORT_QUEUE_BYTES when queueBytes is omitted.
const DefaultExportQueueBytes = 268435456

// MaxKafkaRecordBytes is the largest maxRecordBytes the Kafka sink takes: celld sizes the
// producer's message.max.bytes at record + 64 KiB, and Kafka caps it at 1e9.
const MaxKafkaRecordBytes = 1_000_000_000 - 65536

// reservedEnvPrefixes belong to celld's own machinery or to dedicated spec fields.
var reservedEnvPrefixes = []string{"CELLD_REEXEC_", "CELLD_STRICT_", "CELLD_OTEL", "CELLD_EXPORT", "CELLD_UNSAFE_", "CELLD_TEST_"}

// Validate checks a defaulted fleet against every admission rule of the CRD, schema and CEL
// alike, and returns the same messages. The reconciler calls it before rendering anything, so
// an object that bypassed admission fails closed with InvalidConfiguration.
func (f *CelldFleet) Validate() field.ErrorList {
	var errs field.ErrorList
	if n := f.Name; len(n) > 40 || !reDNSLabel.MatchString(n) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), n, MsgFleetName))
	}
	return append(errs, f.Spec.validate(field.NewPath("spec"))...)
}

// ValidateUpdate checks the transition rules: the fields fixed at creation and previews.
func (f *CelldFleet) ValidateUpdate(old *CelldFleet) field.ErrorList {
	errs := f.Validate()
	s, o, p := &f.Spec, &old.Spec, field.NewPath("spec")
	for _, c := range []struct {
		same bool
		path *field.Path
		msg  string
	}{
		{s.Profile == o.Profile, p.Child("profile"), MsgProfileImmutable},
		{s.BucketWorkload == o.BucketWorkload, p.Child("bucketWorkload"), MsgBucketWorkloadImmutable},
		{s.ServiceAccountName == o.ServiceAccountName, p.Child("serviceAccountName"), MsgServiceAccountImmutable},
		{equality.Semantic.DeepEqual(s.Storage, o.Storage), p.Child("storage"), MsgStorageImmutable},
		{equality.Semantic.DeepEqual(s.Placement, o.Placement), p.Child("placement"), MsgPlacementImmutable},
		{o.Previews == nil || equality.Semantic.DeepEqual(s.Previews, o.Previews), p.Child("previews"), MsgPreviewsAddOnce},
	} {
		if !c.same {
			errs = append(errs, field.Forbidden(c.path, c.msg))
		}
	}
	return errs
}

func (s *CelldFleetSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	add := func(path *field.Path, value any, msg string) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	switch s.Profile {
	case ProfileBucket, ProfilePersistentFleet:
	default:
		errs = append(errs, field.NotSupported(p.Child("profile"), s.Profile, []Profile{ProfileBucket, ProfilePersistentFleet}))
	}
	switch s.BucketWorkload {
	case "", BucketWorkloadDeployment, BucketWorkloadOrdered:
	default:
		errs = append(errs, field.NotSupported(p.Child("bucketWorkload"), s.BucketWorkload, []BucketWorkload{BucketWorkloadDeployment, BucketWorkloadOrdered}))
	}
	replicas := int32(DefaultReplicas)
	if s.Replicas != nil {
		replicas = *s.Replicas
	}
	if replicas < 1 || replicas > 100 {
		add(p.Child("replicas"), replicas, "spec.replicas must be between 1 and 100")
	}
	if len(s.RuntimeImage) > 512 || !reImage.MatchString(s.RuntimeImage) {
		add(p.Child("runtimeImage"), s.RuntimeImage, "spec.runtimeImage must be a registry-qualified image pinned by digest, REGISTRY[:PORT]/PATH@sha256:<64 hex>")
	}
	if n := s.ServiceAccountName; n == "" || len(n) > 253 || !reDNSSubdomain.MatchString(n) {
		add(p.Child("serviceAccountName"), n, "spec.serviceAccountName must be a DNS subdomain of 1 to 253 characters")
	}
	if s.Maintenance != nil && len(s.Maintenance.RestartToken) > 128 {
		add(p.Child("maintenance", "restartToken"), s.Maintenance.RestartToken, "spec.maintenance.restartToken must be at most 128 characters")
	}
	errs = append(errs, s.Storage.validate(p.Child("storage"))...)
	errs = append(errs, s.Placement.validate(p.Child("placement"))...)

	// Cross-field rules of the spec, in the order of the CRD.
	if replicas < s.Placement.AZCount {
		add(p.Child("replicas"), replicas, MsgReplicasBelowAZCount)
	}
	for _, z := range s.Placement.Zones {
		if len(z) != len(s.Storage.Region)+1 || !strings.HasPrefix(z, s.Storage.Region) {
			add(p.Child("placement", "zones"), z, MsgZonesOutsideRegion)
			break
		}
	}
	if s.Profile != ProfileBucket && s.BucketWorkload == BucketWorkloadOrdered {
		add(p.Child("bucketWorkload"), s.BucketWorkload, MsgOrderedRequiresBucket)
	}
	sc := s.Storage.StorageClassName
	if s.Profile == ProfilePersistentFleet && (sc == nil || *sc == "") {
		errs = append(errs, field.Required(p.Child("storage", "storageClassName"), MsgStorageClassRequired))
	}
	if s.Profile == ProfileBucket && sc != nil {
		errs = append(errs, field.Forbidden(p.Child("storage", "storageClassName"), MsgStorageClassForbidden))
	}
	st := &s.Storage
	if s.Profile != ProfileBucket && (st.Prefix != "" || st.PreviewFleetRef != nil || st.Endpoint != nil || st.Scratch != nil) {
		errs = append(errs, field.Forbidden(p.Child("storage"), MsgPreviewStorageRequiresBucket))
	}
	if s.Capacity != nil {
		if s.Capacity.MinReplicas < s.Placement.AZCount {
			add(p.Child("capacity", "minReplicas"), s.Capacity.MinReplicas, MsgCapacityMinBelowAZCount)
		}
		errs = append(errs, s.Capacity.validate(p.Child("capacity"))...)
	}
	if e := s.Export; e != nil && e.Bucket != nil && e.Bucket.Name != "" && e.Bucket.Name == s.Storage.Bucket {
		add(p.Child("export", "bucket", "name"), e.Bucket.Name, MsgExportBucketIsFleetBucket)
	}
	if s.Previews != nil && s.Previews.Storage.Bucket == s.Storage.Bucket {
		add(p.Child("previews", "storage", "bucket"), s.Previews.Storage.Bucket, MsgPreviewBucketIsFleetBucket)
	}

	if s.Execution != nil {
		errs = append(errs, s.Execution.validate(p.Child("execution"))...)
	}
	if s.Lifecycle != nil {
		errs = append(errs, s.Lifecycle.validate(p.Child("lifecycle"))...)
	}
	errs = append(errs, validateEnv(s.Env, p.Child("env"))...)
	if s.Telemetry != nil {
		errs = append(errs, s.Telemetry.validate(p.Child("telemetry"))...)
	}
	if s.Export != nil {
		errs = append(errs, s.Export.validate(p.Child("export"))...)
	}
	if s.Routing != nil {
		errs = append(errs, s.Routing.validate(p.Child("routing"))...)
	}
	if s.Mesh != nil && s.Mesh.Istio != nil {
		errs = append(errs, s.Mesh.Istio.validate(p.Child("mesh", "istio"))...)
	}
	if s.Previews != nil {
		errs = append(errs, s.Previews.validate(p.Child("previews"))...)
	}
	return errs
}

func (s *StorageSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if b := s.Bucket; len(b) < 3 || len(b) > 63 || !reBucket.MatchString(b) {
		errs = append(errs, field.Invalid(p.Child("bucket"), b, "spec.storage.bucket must be 3 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit"))
	}
	if r := s.Region; len(r) > 32 || !reRegion.MatchString(r) {
		errs = append(errs, field.Invalid(p.Child("region"), r, "spec.storage.region must be an AWS region name such as us-east-1"))
	}
	if s.StorageClassName != nil && len(*s.StorageClassName) > 253 {
		errs = append(errs, field.TooLong(p.Child("storageClassName"), *s.StorageClassName, 253))
	} else if s.StorageClassName != nil && !reDNSSubdomain.MatchString(*s.StorageClassName) {
		// a name no StorageClass can have: every read of it fails, which would retry forever
		errs = append(errs, field.Invalid(p.Child("storageClassName"), *s.StorageClassName, "spec.storage.storageClassName must be a StorageClass name (a lower-case DNS subdomain)"))
	}
	if s.SizeGiB != 0 && (s.SizeGiB < 1 || s.SizeGiB > 16384) {
		errs = append(errs, field.Invalid(p.Child("sizeGiB"), s.SizeGiB, "spec.storage.sizeGiB must be between 1 and 16384"))
	}
	if s.Prefix != "" && (len(s.Prefix) > 128 || !reBucket.MatchString(s.Prefix)) {
		errs = append(errs, field.Invalid(p.Child("prefix"), s.Prefix, "spec.storage.prefix must be lower-case letters, digits and '-'"))
	}
	if (s.Prefix != "") != (s.PreviewFleetRef != nil) {
		errs = append(errs, field.Invalid(p, s.Prefix, MsgPrefixWithoutRef))
	}
	if s.Endpoint != nil {
		if s.PreviewFleetRef == nil {
			errs = append(errs, field.Invalid(p.Child("endpoint"), s.Endpoint.URL, MsgEndpointWithoutRef))
		}
		errs = append(errs, s.Endpoint.validate(p.Child("endpoint"))...)
	}
	if s.Seed != nil && s.PreviewFleetRef == nil {
		errs = append(errs, field.Invalid(p.Child("seed"), s.Seed.Source, MsgSeedWithoutRef))
	}
	return errs
}

func (e *StorageEndpoint) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(e.URL) > 2048 || !reURL.MatchString(e.URL) {
		errs = append(errs, field.Invalid(p.Child("url"), e.URL, "endpoint url must be http(s)://HOST[/PATH] with no credentials, query or fragment"))
	}
	if e.Egress != nil {
		errs = append(errs, e.Egress.validate(p.Child("egress"))...)
	}
	return errs
}

func (s *PlacementSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := len(s.Zones); n < 1 || n > 6 {
		errs = append(errs, field.Invalid(p.Child("zones"), n, "spec.placement.zones must list 1 to 6 zones"))
	}
	seen := make(map[string]bool, len(s.Zones))
	for i, z := range s.Zones {
		if len(z) > 33 || !reZone.MatchString(z) {
			errs = append(errs, field.Invalid(p.Child("zones").Index(i), z, "spec.placement.zones entries must be availability zone names such as us-east-1a"))
		}
		if seen[z] {
			errs = append(errs, field.Duplicate(p.Child("zones").Index(i), z))
		}
		seen[z] = true
	}
	if s.AZCount < 1 || s.AZCount > 6 {
		errs = append(errs, field.Invalid(p.Child("azCount"), s.AZCount, "spec.placement.azCount must be between 1 and 6"))
	}
	if int(s.AZCount) != len(s.Zones) {
		errs = append(errs, field.Invalid(p.Child("azCount"), s.AZCount, MsgAZCountMismatch))
	}
	switch s.Mode {
	case "", PlacementStrict, PlacementRelaxed:
	default:
		errs = append(errs, field.NotSupported(p.Child("mode"), s.Mode, []PlacementMode{PlacementStrict, PlacementRelaxed}))
	}
	return errs
}

func (e *ExecutionSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if below(e.CPULimit, e.CPURequest) {
		errs = append(errs, field.Invalid(p.Child("cpuLimit"), e.CPULimit.String(), MsgCPULimitBelowRequest))
	}
	if below(e.MemoryLimit, e.MemoryRequest) {
		errs = append(errs, field.Invalid(p.Child("memoryLimit"), e.MemoryLimit.String(), MsgMemoryLimitBelowRequest))
	}
	if v := e.MaxResidentCells; v != nil && (*v < 1 || *v > 1000000) {
		errs = append(errs, field.Invalid(p.Child("maxResidentCells"), *v, "spec.execution.maxResidentCells must be between 1 and 1000000"))
	}
	if v := e.IdleEvictSeconds; v != nil && (*v < 1 || *v > 86400) {
		errs = append(errs, field.Invalid(p.Child("idleEvictSeconds"), *v, "spec.execution.idleEvictSeconds must be between 1 and 86400"))
	}
	return errs
}

// below reports whether a limit is set, a request is set, and the limit is smaller.
func below(limit, request *resource.Quantity) bool {
	return limit != nil && request != nil && limit.Cmp(*request) < 0
}

func (l *LifecycleSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if l.ShutdownSeconds < 1 || l.ShutdownSeconds > 3600 {
		errs = append(errs, field.Invalid(p.Child("shutdownSeconds"), l.ShutdownSeconds, "spec.lifecycle.shutdownSeconds must be between 1 and 3600"))
	}
	if l.TerminationGraceSeconds < 6 || l.TerminationGraceSeconds > 3605 {
		errs = append(errs, field.Invalid(p.Child("terminationGraceSeconds"), l.TerminationGraceSeconds, "spec.lifecycle.terminationGraceSeconds must be between 6 and 3605"))
	}
	if l.TerminationGraceSeconds < l.ShutdownSeconds+5 {
		errs = append(errs, field.Invalid(p.Child("terminationGraceSeconds"), l.TerminationGraceSeconds, MsgGraceTooShort))
	}
	return errs
}

// MaxEnvValuesTotal bounds the characters of spec.env's literal values together: the
// reserved-tuning record (controllers/reservation) holds them, escaped as JSON, on the
// storage reservation, where it may take at most 64 KiB; at 4096 characters even a value
// JSON escapes six bytes a character fits beside every other tuning field at its limit.
const MaxEnvValuesTotal = 4096

func validateEnv(env []EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(env) > 32 {
		errs = append(errs, field.TooMany(p, len(env), 32))
	}
	seen := make(map[string]bool, len(env))
	total := 0
	for i := range env {
		e, ip := &env[i], p.Index(i)
		if e.Value != nil {
			total += utf8.RuneCountInString(*e.Value) // CEL's size() counts code points
		}
		if len(e.Name) > 128 || !reEnvName.MatchString(e.Name) {
			errs = append(errs, field.Invalid(ip.Child("name"), e.Name, "spec.env name must match ^CELLD_[A-Z][A-Z0-9_]*$ and be at most 128 characters"))
		}
		if seen[e.Name] {
			errs = append(errs, field.Duplicate(ip.Child("name"), e.Name))
		}
		seen[e.Name] = true
		if (e.Value != nil) == (e.SecretKeyRef != nil) {
			errs = append(errs, field.Invalid(ip, e.Name, MsgEnvValueSource))
		}
		if operatorOwnedEnv[e.Name] {
			errs = append(errs, field.Forbidden(ip.Child("name"), MsgEnvOperatorOwned))
		}
		if (removedEnvNames[e.Name] || strings.HasPrefix(e.Name, "CELLD_VAR_")) &&
			(e.Name != "CELLD_WORKER_LOADER" || e.Value == nil || *e.Value != "") {
			errs = append(errs, field.Forbidden(ip.Child("name"), MsgEnvRemoved))
		}
		for _, prefix := range reservedEnvPrefixes {
			if strings.HasPrefix(e.Name, prefix) {
				errs = append(errs, field.Forbidden(ip.Child("name"), MsgEnvReservedPrefix))
				break
			}
		}
		if e.Value != nil && utf8.RuneCountInString(*e.Value) > 4096 { // maxLength counts characters
			errs = append(errs, field.TooLong(ip.Child("value"), "", 4096))
		}
		if e.SecretKeyRef != nil {
			errs = append(errs, e.SecretKeyRef.validate(ip.Child("secretKeyRef"))...)
		}
	}
	if total > MaxEnvValuesTotal {
		errs = append(errs, field.Invalid(p, total, MsgEnvValuesTotal))
	}
	return errs
}

func (r *SecretKeyRef) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.Name == "" || len(r.Name) > 253 || !reDNSSubdomain.MatchString(r.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), r.Name, "secretKeyRef name must be a Secret name (DNS subdomain)"))
	}
	if r.Key == "" || len(r.Key) > 253 || !reSecretKey.MatchString(r.Key) {
		errs = append(errs, field.Invalid(p.Child("key"), r.Key, "secretKeyRef key must be letters, digits, '-', '_' and '.'"))
	}
	return errs
}

func (t *TelemetrySpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	u, err := url.Parse(t.CollectorURL)
	if len(t.CollectorURL) > 512 || !reURL.MatchString(t.CollectorURL) || err != nil {
		return append(errs, field.Invalid(p.Child("collectorURL"), t.CollectorURL, "spec.telemetry.collectorURL must be http(s)://HOST[:PORT][/PATH] with no credentials, query or fragment"))
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
			errs = append(errs, field.Invalid(p.Child("collectorURL"), t.CollectorURL, "spec.telemetry.collectorURL port must be between 1 and 65535"))
		}
	}
	ratio := t.Sampler == "traceidratio" || t.Sampler == "parentbased_traceidratio"
	if ratio != (t.SamplerArg != "") {
		errs = append(errs, field.Invalid(p.Child("samplerArg"), t.SamplerArg, MsgSamplerArg))
	}
	if t.SamplerArg != "" && !reRatio.MatchString(t.SamplerArg) {
		errs = append(errs, field.Invalid(p.Child("samplerArg"), t.SamplerArg, "spec.telemetry.samplerArg must be a decimal between 0 and 1"))
	}
	switch t.Sampler {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off", "traceidratio", "parentbased_traceidratio":
	default:
		errs = append(errs, field.NotSupported(p.Child("sampler"), t.Sampler, []string{"always_on", "always_off", "parentbased_always_on", "parentbased_always_off", "traceidratio", "parentbased_traceidratio"}))
	}
	if t.FlushMilliseconds != nil && *t.FlushMilliseconds < 1 {
		errs = append(errs, field.Invalid(p.Child("flushMilliseconds"), *t.FlushMilliseconds, "spec.telemetry.flushMilliseconds must be at least 1"))
	}
	if t.FlushBytes != nil && *t.FlushBytes < 1 {
		errs = append(errs, field.Invalid(p.Child("flushBytes"), *t.FlushBytes, "spec.telemetry.flushBytes must be at least 1"))
	}
	errs = append(errs, t.Egress.validate(p.Child("egress"))...)
	if c := t.Egress.CIDR; c != "" {
		if !strings.HasSuffix(c, "/32") && !strings.HasSuffix(c, "/128") {
			errs = append(errs, field.Invalid(p.Child("egress", "cidr"), c, MsgTelemetryCIDRSingle))
		}
		host, pfx := u.Hostname(), netip.Prefix{}
		if hostIP, err := netip.ParseAddr(host); err == nil {
			pfx, err = netip.ParsePrefix(c)
			if err == nil && pfx.Addr() != hostIP {
				errs = append(errs, field.Invalid(p.Child("egress", "cidr"), c, MsgTelemetryCIDRHost))
			}
		}
	}
	if t.HeadersSecretKeyRef != nil {
		errs = append(errs, t.HeadersSecretKeyRef.validate(p.Child("headersSecretKeyRef"))...)
	}
	return errs
}

func (e *EgressTarget) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (e.CIDR != "") == (len(e.PodLabels) > 0) {
		errs = append(errs, field.Invalid(p, e.CIDR, MsgEgressExactlyOne))
	}
	if e.Namespace != "" && len(e.PodLabels) == 0 {
		errs = append(errs, field.Invalid(p.Child("namespace"), e.Namespace, MsgEgressNamespace))
	}
	if e.Namespace != "" && !reDNSLabel.MatchString(e.Namespace) {
		errs = append(errs, field.Invalid(p.Child("namespace"), e.Namespace, "egress namespace must be a namespace name"))
	}
	if e.CIDR != "" {
		if _, _, err := net.ParseCIDR(e.CIDR); err != nil || len(e.CIDR) > 64 {
			errs = append(errs, field.Invalid(p.Child("cidr"), e.CIDR, MsgEgressCIDR))
		}
	}
	if len(e.PodLabels) > 16 {
		errs = append(errs, field.TooMany(p.Child("podLabels"), len(e.PodLabels), 16))
	}
	return append(errs, validateLabels(p.Child("podLabels"), e.PodLabels)...)
}

func (e *ExportSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	sink := e.Sink
	if sink == "" {
		sink = ExportSinkBucket
	}
	switch sink {
	case ExportSinkKafka:
		if e.Kafka == nil || e.Bucket != nil {
			errs = append(errs, field.Invalid(p.Child("sink"), sink, MsgExportKafka))
		}
	case ExportSinkBucket:
		if e.Kafka != nil {
			errs = append(errs, field.Invalid(p.Child("sink"), sink, MsgExportBucketSink))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("sink"), sink, []ExportSink{ExportSinkBucket, ExportSinkKafka}))
	}
	if e.MaxRecordBytes != nil {
		queue := int64(DefaultExportQueueBytes)
		if e.QueueBytes != nil {
			queue = *e.QueueBytes
		}
		if *e.MaxRecordBytes > queue {
			errs = append(errs, field.Invalid(p.Child("maxRecordBytes"), *e.MaxRecordBytes, MsgExportRecordBytes))
		}
		if sink == ExportSinkKafka && *e.MaxRecordBytes > MaxKafkaRecordBytes {
			errs = append(errs, field.Invalid(p.Child("maxRecordBytes"), *e.MaxRecordBytes, MsgExportKafkaRecordBytes))
		}
	}
	for _, v := range []struct {
		name string
		val  *int64
	}{{"maxTransactionBytes", e.MaxTransactionBytes}, {"maxRecordBytes", e.MaxRecordBytes}, {"queueBytes", e.QueueBytes}} {
		if v.val != nil && *v.val < 1 {
			errs = append(errs, field.Invalid(p.Child(v.name), *v.val, fmt.Sprintf("spec.export.%s must be at least 1", v.name)))
		}
	}
	errs = append(errs, validateSet(p.Child("classes"), e.Classes, 64, 128, reExportClass, "spec.export.classes entries must not contain commas or whitespace")...)
	for _, c := range e.Classes {
		if c == "__Queue" || c == "__Workflow" || strings.HasPrefix(c, "__Workflow.") || strings.HasSuffix(c, ".cron") {
			errs = append(errs, field.Invalid(p.Child("classes"), c, MsgExportClasses))
			break
		}
	}
	errs = append(errs, validateSet(p.Child("excludeTables"), e.ExcludeTables, 128, 256, reExportTable, "spec.export.excludeTables entries must be Class.table")...)
	if b := e.Bucket; b != nil {
		if b.Name != "" && (len(b.Name) < 3 || len(b.Name) > 63 || !reBucket.MatchString(b.Name)) {
			errs = append(errs, field.Invalid(p.Child("bucket", "name"), b.Name, "spec.export.bucket.name must be a bucket name"))
		}
		if b.RetentionDays != nil && (*b.RetentionDays < 1 || *b.RetentionDays > 36500) {
			errs = append(errs, field.Invalid(p.Child("bucket", "retentionDays"), *b.RetentionDays, "spec.export.bucket.retentionDays must be between 1 and 36500"))
		}
	}
	if k := e.Kafka; k != nil {
		errs = append(errs, k.validate(p.Child("kafka"))...)
	}
	return errs
}

func (k *ExportKafka) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := len(k.Brokers); n < 1 {
		errs = append(errs, field.Required(p.Child("brokers"), "spec.export.kafka.brokers needs at least one host:port"))
	}
	errs = append(errs, validateSet(p.Child("brokers"), k.Brokers, 16, 261, reBroker, "spec.export.kafka.brokers entries must be host:port")...)
	for _, b := range k.Brokers {
		port, err := strconv.Atoi(b[strings.LastIndexByte(b, ':')+1:])
		if err == nil && (port < 1 || port > 65535) {
			errs = append(errs, field.Invalid(p.Child("brokers"), b, MsgKafkaBrokerPort))
			break
		}
	}
	if !reTopic.MatchString(k.Topic) {
		errs = append(errs, field.Invalid(p.Child("topic"), k.Topic, "spec.export.kafka.topic must be 1 to 249 letters, digits, '.', '_' or '-'"))
	}
	if k.PropertiesSecretKeyRef != nil {
		errs = append(errs, k.PropertiesSecretKeyRef.validate(p.Child("propertiesSecretKeyRef"))...)
	}
	return append(errs, k.Egress.validate(p.Child("egress"))...)
}

// validateSet checks a listType=set of strings: size, uniqueness, length and pattern.
func validateSet(p *field.Path, items []string, maxItems, maxLen int, re *regexp.Regexp, msg string) field.ErrorList {
	var errs field.ErrorList
	if len(items) > maxItems {
		errs = append(errs, field.TooMany(p, len(items), maxItems))
	}
	seen := make(map[string]bool, len(items))
	for i, v := range items {
		if len(v) > maxLen || !re.MatchString(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
		if seen[v] {
			errs = append(errs, field.Duplicate(p.Index(i), v))
		}
		seen[v] = true
	}
	return errs
}

func (r *RoutingSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (r.Gateway != nil) == (r.Ingress != nil) {
		errs = append(errs, field.Invalid(p, "", MsgRoutingMode))
	}
	if len(r.Hostnames) < 1 {
		errs = append(errs, field.Required(p.Child("hostnames"), "spec.routing.hostnames needs at least one hostname"))
	}
	errs = append(errs, validateSet(p.Child("hostnames"), r.Hostnames, 16, 253, reHostname, "spec.routing.hostnames entries must be DNS names, optionally starting with *.")...)
	for _, h := range r.Hostnames {
		if reDigitsDots.MatchString(h) {
			errs = append(errs, field.Invalid(p.Child("hostnames"), h, MsgRoutingHostnameIP))
			break
		}
	}
	errs = append(errs, r.Source.validate(p.Child("source"))...)
	if r.Gateway != nil && r.Gateway.Name == "" {
		errs = append(errs, field.Required(p.Child("gateway", "name"), "spec.routing.gateway.name names the parent Gateway"))
	}
	if r.Ingress != nil {
		errs = append(errs, r.Ingress.validate(p.Child("ingress"))...)
	}
	return errs
}

func (s *RoutingSource) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !reDNSLabel.MatchString(s.Namespace) || len(s.Namespace) > 63 {
		errs = append(errs, field.Invalid(p.Child("namespace"), s.Namespace, "spec.routing.source.namespace must be a namespace name"))
	}
	if n := len(s.PodLabels); n < 1 || n > 16 {
		errs = append(errs, field.Invalid(p.Child("podLabels"), n, "spec.routing.source.podLabels must have 1 to 16 labels"))
	}
	return append(errs, validateLabels(p.Child("podLabels"), s.PodLabels)...)
}

// lowerASCII lower-cases the letters A to Z and keeps every other rune.
func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// validateLabels checks what a label selector built from labels needs: every key a qualified
// name and every value a label value, as the API server checks them on the NetworkPolicy the
// selector goes to. The CRD says the same (a CEL rule for the keys, LabelValue's schema for
// the values), so an admitted fleet never renders a policy the API server refuses.
func validateLabels(p *field.Path, labels map[string]LabelValue) field.ErrorList {
	var errs field.ErrorList
	for k, v := range labels {
		if len(validation.IsQualifiedName(k)) > 0 {
			errs = append(errs, field.Invalid(p.Key(k), k, MsgLabelKey))
		}
		for _, msg := range validation.IsValidLabelValue(string(v)) {
			errs = append(errs, field.Invalid(p.Key(k), v, msg))
		}
	}
	return errs
}

func (i *IngressRouting) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if i.ClassName == "" {
		errs = append(errs, field.Required(p.Child("className"), "spec.routing.ingress.className names the IngressClass"))
	}
	if len(i.Annotations) > 16 {
		errs = append(errs, field.TooMany(p.Child("annotations"), len(i.Annotations), 16))
	}
	for k, v := range i.Annotations {
		if strings.HasPrefix(k, "celld.eric.dev/") || k == "kubernetes.io/ingress.class" {
			errs = append(errs, field.Invalid(p.Child("annotations").Key(k), k, MsgIngressAnnotationReserved))
		}
		// The API server checks annotation keys lower-cased (apimachinery's ValidateAnnotations);
		// the CRD's rule lower-cases ASCII only (CEL's lowerAscii), so this does too: a Kelvin
		// sign does not become a k here, and both sides refuse it.
		if len(validation.IsQualifiedName(lowerASCII(k))) > 0 {
			errs = append(errs, field.Invalid(p.Child("annotations").Key(k), k, MsgIngressAnnotationKey))
		}
		if len(v) > 4096 {
			errs = append(errs, field.Invalid(p.Child("annotations").Key(k), len(v), MsgIngressAnnotationSize))
		}
	}
	return errs
}

func (m *IstioMeshSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := m.ControlPlaneNamespace; n != "" && !reDNSLabel.MatchString(n) {
		errs = append(errs, field.Invalid(p.Child("controlPlaneNamespace"), n, "spec.mesh.istio.controlPlaneNamespace must be a namespace name"))
	}
	switch m.ApplicationAccess {
	case "", ApplicationAccessAllowAll, ApplicationAccessPolicies:
	default:
		errs = append(errs, field.NotSupported(p.Child("applicationAccess"), m.ApplicationAccess, []ApplicationAccess{ApplicationAccessAllowAll, ApplicationAccessPolicies}))
	}
	return errs
}

func (c *CapacityPolicy) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, r := range []struct {
		name     string
		v, lo, h int32
	}{
		{"minReplicas", c.MinReplicas, 1, 100}, {"maxReplicas", c.MaxReplicas, 1, 100},
		{"scaleOutStep", c.ScaleOutStep, 1, 10}, {"sampleIntervalSeconds", c.SampleIntervalSeconds, 5, 300},
		{"maxAgeSeconds", c.MaxAgeSeconds, 10, 600}, {"minWindowSeconds", c.MinWindowSeconds, 1, 60},
		{"maxWindowSeconds", c.MaxWindowSeconds, 5, 300}, {"minSamples", c.MinSamples, 2, 100},
		{"scaleOutStabilizationSeconds", c.ScaleOutStabilizationSeconds, 10, 3600},
		{"scaleInStabilizationSeconds", c.ScaleInStabilizationSeconds, 60, 86400},
		{"scaleOutCooldownSeconds", c.ScaleOutCooldownSeconds, 30, 86400},
		{"scaleInCooldownSeconds", c.ScaleInCooldownSeconds, 60, 86400},
		{"provisioningTimeoutSeconds", c.ProvisioningTimeoutSeconds, 60, 86400},
		{"redistributionObservationSeconds", c.RedistributionObservationSeconds, 30, 3600},
		{"cpuHighMillicores", c.CPUHighMillicores, 1, 1000000}, {"cpuLowMillicores", c.CPULowMillicores, 0, 1000000},
		{"memoryHighMiB", c.MemoryHighMiB, 1, 1048576}, {"memoryLowMiB", c.MemoryLowMiB, 0, 1048576},
	} {
		if r.v < r.lo || r.v > r.h {
			errs = append(errs, field.Invalid(p.Child(r.name), r.v, fmt.Sprintf("spec.capacity.%s must be between %d and %d", r.name, r.lo, r.h)))
		}
	}
	switch c.Mode {
	case "", CapacityShadow, CapacityScaleOut, CapacityAutomatic, CapacityExternal:
	default:
		errs = append(errs, field.NotSupported(p.Child("mode"), c.Mode, []CapacityMode{CapacityShadow, CapacityScaleOut, CapacityAutomatic, CapacityExternal}))
	}
	// the field each rule's CEL fieldPath names, so both report the same path
	for _, r := range []struct {
		ok    bool
		field string
		v     int32
		msg   string
	}{
		{c.MinReplicas <= c.MaxReplicas, "minReplicas", c.MinReplicas, MsgCapacityMinMax},
		{c.CPULowMillicores < c.CPUHighMillicores, "cpuLowMillicores", c.CPULowMillicores, MsgCapacityCPU},
		{c.MemoryLowMiB < c.MemoryHighMiB, "memoryLowMiB", c.MemoryLowMiB, MsgCapacityMemory},
		{c.MinWindowSeconds <= c.MaxWindowSeconds, "minWindowSeconds", c.MinWindowSeconds, MsgCapacityWindow},
		{c.SampleIntervalSeconds <= c.MaxAgeSeconds, "sampleIntervalSeconds", c.SampleIntervalSeconds, MsgCapacitySampling},
	} {
		if !r.ok {
			errs = append(errs, field.Invalid(p.Child(r.field), r.v, r.msg))
		}
	}
	return errs
}

func (v *FleetPreviewsSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.RuntimeImage != "" && !reImage.MatchString(v.RuntimeImage) {
		errs = append(errs, field.Invalid(p.Child("runtimeImage"), v.RuntimeImage, "spec.previews.runtimeImage must be a registry-qualified image pinned by digest"))
	}
	if b := v.Storage.Bucket; len(b) < 3 || len(b) > 63 || !reBucket.MatchString(b) {
		errs = append(errs, field.Invalid(p.Child("storage", "bucket"), b, "spec.previews.storage.bucket must be a bucket name"))
	}
	if v.Zone != "" && !reZone.MatchString(v.Zone) {
		errs = append(errs, field.Invalid(p.Child("zone"), v.Zone, "spec.previews.zone must be an availability zone name"))
	}
	if r := v.Routing; r != nil {
		if r.Gateway != nil && r.Ingress != nil {
			errs = append(errs, field.Invalid(p.Child("routing"), "", MsgPreviewRoutingMode))
		}
		errs = append(errs, r.Source.validate(p.Child("routing", "source"))...)
	}
	return errs
}
