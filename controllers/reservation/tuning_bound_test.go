package reservation

import (
	"fmt"
	"strings"
	"testing"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Seed 000: tuning fields change through the reserved-tuning record. A record over
// MaxTuningRecord is never written, so such a fleet's tuning could never change; admission
// bounds what goes into the record instead (spec.env's literal values total at most
// v1.MaxEnvValuesTotal characters). The largest tuning admission accepts, every field at its
// limit and every literal character one JSON escapes into six bytes, must still be recorded.
func TestTheLargestAdmittedTuningIsRecorded(t *testing.T) {
	f := fixture()
	name := func(i int) string { // 128 characters, distinct, none reserved
		return fmt.Sprintf("CELLD_Z%03d_%s", i, strings.Repeat("X", 128-len("CELLD_Z000_")))
	}
	secret := v1.SecretKeyRef{Name: strings.Repeat("s", 253), Key: strings.Repeat("k", 253)}
	var env []v1.EnvVar
	left := v1.MaxEnvValuesTotal
	for i := range 32 {
		e := v1.EnvVar{Name: name(i)}
		if n := min(left, 4096); n > 0 {
			e.Value = new(strings.Repeat("\x01", n)) // \u0001 in JSON: six bytes
			left -= n
		} else {
			e.SecretKeyRef = &secret
		}
		env = append(env, e)
	}
	f.Spec.Env = env
	labels := map[string]v1.LabelValue{}
	for i := range 16 {
		labels[fmt.Sprintf("%s%02d.example/%s", strings.Repeat("p", 240), i, strings.Repeat("n", 63))] = v1.LabelValue(strings.Repeat("v", 63))
	}
	path := "/" + strings.Repeat("&", 512-len("https://otel.example:4318/"))
	f.Spec.Telemetry = &v1.TelemetrySpec{CollectorURL: "https://otel.example:4318" + path, Sampler: "parentbased_traceidratio", SamplerArg: "0." + strings.Repeat("1", 30),
		Egress: v1.EgressTarget{PodLabels: labels, Namespace: strings.Repeat("n", 63)}}
	if errs := f.Validate(); len(errs) != 0 {
		t.Fatalf("the largest tuning must be admitted to prove anything, got %v", errs)
	}

	record, err := TuningRecord(f)
	if err != nil {
		t.Fatalf("an admitted fleet's tuning must always fit its record: %v", err)
	}
	t.Logf("the largest admitted record is %d bytes of %d", len(record), MaxTuningRecord)

	// One character more is refused at admission, with the reason.
	f.Spec.Env[0].Value = new(*f.Spec.Env[0].Value + "x")
	errs := f.Validate()
	if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), v1.MsgEnvValuesTotal) {
		t.Fatalf("a tuning over the bound must be refused with %q, got %v", v1.MsgEnvValuesTotal, errs)
	}
}
