package main

import (
	"strings"
	"testing"
	"time"
)

func cm(data map[string]string) *configSource {
	return &configSource{Namespace: "celld-system", Name: configMapName, Data: data}
}

func noEnv(string) string { return "" }

// TestConfigMapSettings: the ConfigMap sets what no flag sets, a flag wins over it, the legacy
// environment variables sit between them, and a bad value is refused naming the key and the fix.
func TestConfigMapSettings(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		env   map[string]string
		data  map[string]string
		check func(*options) bool
		want  []string // substrings of the refusal; empty: accepted
	}{
		{name: "no ConfigMap keeps the defaults", check: func(o *options) bool {
			return !o.fleet.NetworkPolicyEnforced && o.fleet.MemberReplacementDelay == 10*time.Minute && o.fleet.StorageProvisioners[0] == "ebs.csi.aws.com"
		}},
		{name: "empty ConfigMap keeps the defaults", data: map[string]string{}, check: func(o *options) bool { return !o.fleet.NetworkPolicyEnforced }},
		{name: "every key", data: map[string]string{"network-policy-enforced": "true", "member-replacement-delay": " 15m ",
			"storage-provisioners": "ebs.csi.aws.com, pd.csi.storage.gke.io", "operator-service-account": "celld-op"},
			check: func(o *options) bool {
				return o.fleet.NetworkPolicyEnforced && o.fleet.MemberReplacementDelay == 15*time.Minute &&
					strings.Join(o.fleet.StorageProvisioners, ",") == "ebs.csi.aws.com,pd.csi.storage.gke.io" && o.fleet.OperatorServiceAccount == "celld-op" &&
					o.config.origin["network-policy-enforced"] == "ConfigMap celld-system/celld-operator-config"
			}},
		{name: "a flag wins over the ConfigMap", args: []string{"--network-policy-enforced=false", "--member-replacement-delay=20m"},
			data: map[string]string{"network-policy-enforced": "true", "member-replacement-delay": "15m"},
			check: func(o *options) bool {
				return !o.fleet.NetworkPolicyEnforced && o.fleet.MemberReplacementDelay == 20*time.Minute && o.config.origin["network-policy-enforced"] == "flag"
			}},
		{name: "a Subscription's env wins over the ConfigMap", env: map[string]string{"NETWORK_POLICY_ENFORCED": "true"},
			data: map[string]string{"network-policy-enforced": "false"},
			check: func(o *options) bool {
				return o.fleet.NetworkPolicyEnforced && o.config.origin["network-policy-enforced"] == "env NETWORK_POLICY_ENFORCED"
			}},
		{name: "a flag wins over the env", args: []string{"--storage-provisioners=a.csi"}, env: map[string]string{"STORAGE_PROVISIONERS": "b.csi"},
			check: func(o *options) bool { return strings.Join(o.fleet.StorageProvisioners, ",") == "a.csi" }},
		{name: "bad boolean", data: map[string]string{"network-policy-enforced": "yes"},
			want: []string{"ConfigMap celld-system/celld-operator-config key network-policy-enforced=\"yes\"", `"true" or "false"`}},
		{name: "bad duration", data: map[string]string{"member-replacement-delay": "ten minutes"},
			want: []string{"key member-replacement-delay=\"ten minutes\"", "invalid duration", "at least 1m"}},
		{name: "duration without unit", data: map[string]string{"member-replacement-delay": "600"},
			want: []string{"key member-replacement-delay", "missing unit"}},
		{name: "below the minimum", data: map[string]string{"member-replacement-delay": "30s"},
			want: []string{"key member-replacement-delay=\"30s\"", "below the minimum of 1m0s", "at least 1m"}},
		{name: "a bad value is refused even when a flag overrides it", args: []string{"--member-replacement-delay=5m"},
			data: map[string]string{"member-replacement-delay": "30s"}, want: []string{"key member-replacement-delay", "below the minimum"}},
		{name: "no provisioner", data: map[string]string{"storage-provisioners": " , "},
			want: []string{"key storage-provisioners", "names no CSI provisioner"}},
		{name: "bad ServiceAccount", data: map[string]string{"operator-service-account": "Celld_Operator"},
			want: []string{"key operator-service-account", "not a ServiceAccount name"}},
		{name: "unknown key", data: map[string]string{"network-policy-enforce": "true"},
			want: []string{`unknown key "network-policy-enforce"`, "member-replacement-delay, network-policy-enforced, operator-service-account, storage-provisioners", "rename or remove it"}},
		{name: "flags are not ConfigMap keys", data: map[string]string{"leader-elect": "false"}, want: []string{`unknown key "leader-elect"`}},
		{name: "bad env value names the variable", env: map[string]string{"MEMBER_REPLACEMENT_DELAY": "soon"},
			want: []string{"environment variable MEMBER_REPLACEMENT_DELAY=\"soon\"", "invalid duration"}},
		{name: "env below the minimum names the variable", env: map[string]string{"MEMBER_REPLACEMENT_DELAY": "10s"},
			want: []string{`environment variable MEMBER_REPLACEMENT_DELAY="10s"`, "below the minimum of 1m0s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			getenv := func(k string) string { return c.env[k] }
			var src *configSource
			if c.data != nil {
				src = cm(c.data)
			}
			o, err := parseWith(c.args, getenv, src)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !c.check(o) {
					t.Fatalf("settings not as expected: %+v (origins %v)", o.fleet, o.config.origin)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want a refusal mentioning %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestConfigMapNameFlag(t *testing.T) {
	o, err := parseWith(nil, noEnv, nil)
	if err != nil || o.config.configMap != "celld-operator-config" {
		t.Fatalf("default ConfigMap name: %q, %v", o.config.configMap, err)
	}
	o, err = parseWith([]string{"--config-map-name="}, noEnv, nil)
	if err != nil || o.config.configMap != "" {
		t.Fatalf("--config-map-name= must read none: %q, %v", o.config.configMap, err)
	}
}
