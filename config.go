package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// configMapName is the ConfigMap, in the operator namespace, that holds the operator's
// settings (as CloudNativePG's cnpg-controller-manager-config does). --config-map-name
// changes it; the chart names it after the release.
const configMapName = "celld-operator-config"

// configKeys are the keys the ConfigMap may hold. Each is the flag of the same name; the value
// describes a valid setting for the refusal of a bad one.
var configKeys = map[string]string{
	"network-policy-enforced":  `"true" or "false"`,
	"member-replacement-delay": `a duration of at least 1m, such as "10m"`,
	"storage-provisioners":     `a comma-separated list of CSI provisioner names, such as "ebs.csi.aws.com"`,
	"operator-service-account": `the name of the operator's ServiceAccount`,
}

// legacyEnv are the environment variables release 0.1.0's OLM Deployment turned into flags, so
// an OLM Subscription's spec.config.env could set them. They are still read, as overrides of
// the ConfigMap (a Subscription that sets them keeps working across the upgrade).
var legacyEnv = map[string]string{
	"NETWORK_POLICY_ENFORCED":  "network-policy-enforced",
	"MEMBER_REPLACEMENT_DELAY": "member-replacement-delay",
	"STORAGE_PROVISIONERS":     "storage-provisioners",
}

// configSource is the ConfigMap as read.
type configSource struct {
	Namespace, Name string
	Data            map[string]string
}

func (c *configSource) String() string { return "ConfigMap " + c.Namespace + "/" + c.Name }

// configSettings is how the operator reads its ConfigMap, and where each setting came from.
type configSettings struct {
	// configMap is the ConfigMap's name in the operator namespace; empty reads none.
	configMap string
	// origin maps a flag name to where its value came from: "flag", "env NAME" or the
	// ConfigMap; absent means the default.
	origin map[string]string
}

func (c *configSettings) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.configMap, "config-map-name", configMapName,
		"ConfigMap in --operator-namespace holding settings (keys "+strings.Join(slices.Sorted(maps.Keys(configKeys)), ", ")+
			"); flags given on the command line win over it; read at start; empty reads none")
}

// apply layers the settings not given on the command line: first the legacy environment
// variables, then the ConfigMap (nil: none). Every ConfigMap value is checked, even one a flag
// overrides, and an unknown key is refused: a misspelt key would otherwise be ignored silently.
func (c *configSettings) apply(fs *flag.FlagSet, getenv func(string) string, cm *configSource) error {
	c.origin = map[string]string{}
	fs.Visit(func(f *flag.Flag) { c.origin[f.Name] = "flag" })
	for _, env := range slices.Sorted(maps.Keys(legacyEnv)) {
		name, v := legacyEnv[env], strings.TrimSpace(getenv(env))
		if v == "" || c.origin[name] != "" {
			continue
		}
		err := checkValue(name, v)
		if err == nil {
			err = fs.Set(name, v)
		}
		if err != nil {
			return fmt.Errorf("environment variable %s=%q: %v; set it to %s, or remove it and set %s in the ConfigMap %s", env, v, err, configKeys[name], name, c.configMap)
		}
		c.origin[name] = "env " + env
	}
	if cm != nil {
		for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
			want, known := configKeys[key]
			if !known {
				return fmt.Errorf("%s: unknown key %q; the keys are %s: rename or remove it", cm, key, strings.Join(slices.Sorted(maps.Keys(configKeys)), ", "))
			}
			v := strings.TrimSpace(cm.Data[key])
			// check the value whether or not a flag overrides it
			if err := checkValue(key, v); err != nil {
				return fmt.Errorf("%s key %s=%q: %v; set it to %s, or remove the key to use the default", cm, key, cm.Data[key], err, want)
			}
			if c.origin[key] != "" {
				continue
			}
			if err := fs.Set(key, v); err != nil {
				return fmt.Errorf("%s key %s=%q: %v; set it to %s", cm, key, cm.Data[key], err, want)
			}
			c.origin[key] = cm.String()
		}
	}
	if sa := fs.Lookup("operator-service-account").Value.String(); len(validation.IsDNS1123Subdomain(sa)) > 0 {
		return fmt.Errorf("%s=%q is not a ServiceAccount name; set it to %s", c.where("operator-service-account"), sa, configKeys["operator-service-account"])
	}
	return nil
}

// checkValue parses one value of a key as its flag would, with the parser's own words for a
// bad one (the flag package reports only "parse error"), and applies the operator's limits.
func checkValue(key, v string) error {
	switch key {
	case "network-policy-enforced":
		if _, err := strconv.ParseBool(v); err != nil {
			return errors.Unwrap(err)
		}
	case "member-replacement-delay":
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		if d < minReplacementDelay {
			return fmt.Errorf("%s is below the minimum of %s: a shorter delay replaces members that are only restarting", d, minReplacementDelay)
		}
	case "storage-provisioners":
		if len(splitList(v)) == 0 {
			return errors.New("names no CSI provisioner")
		}
	case "operator-service-account":
		if len(validation.IsDNS1123Subdomain(v)) > 0 {
			return errors.New("not a ServiceAccount name")
		}
	}
	return nil
}

// where names the source of a setting for an error message: the flag, the environment
// variable or the ConfigMap key.
func (c *configSettings) where(name string) string {
	switch o := c.origin[name]; {
	case strings.HasPrefix(o, "env "):
		return "environment variable " + strings.TrimPrefix(o, "env ")
	case strings.HasPrefix(o, "ConfigMap "):
		return o + " key " + name
	default:
		return "--" + name
	}
}

// sources lists, for the start-up log, the settings not at their defaults and where each came
// from.
func (c *configSettings) sources() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.origin)) {
		if _, ok := configKeys[name]; ok {
			out = append(out, name+" from "+c.origin[name])
		}
	}
	return out
}

// readConfigMap reads the operator's ConfigMap from the API server. A missing ConfigMap is no
// error (nil): flags and defaults apply. Any other failure stops the start, because the
// ConfigMap may hold the NetworkPolicy attestation.
func readConfigMap(cfg *rest.Config, namespace, name string) (*configSource, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("the operator may not read its ConfigMap %s/%s: grant get on it (the Role celld-operator-leader-election of config/rbac/leader_election_role.yaml, the chart or the CSV does), or start with --config-map-name= to read none: %w", namespace, name, err)
	case err != nil:
		return nil, fmt.Errorf("read the operator's ConfigMap %s/%s: %w", namespace, name, err)
	}
	if len(cm.BinaryData) > 0 {
		return nil, fmt.Errorf("ConfigMap %s/%s: binaryData key %q: settings are text; move them to data", namespace, name, slices.Sorted(maps.Keys(cm.BinaryData))[0])
	}
	return &configSource{Namespace: namespace, Name: name, Data: cm.Data}, nil
}

// loadConfig reads the ConfigMap named by o and, if it exists, parses the settings again with
// it. Changes to the ConfigMap take effect when the operator restarts.
func loadConfig(cfg *rest.Config, args []string, o *options, log logr.Logger) (*options, error) {
	if o.config.configMap == "" {
		log.Info("no ConfigMap read (--config-map-name is empty)", "settings", o.config.sources())
		return o, nil
	}
	cm, err := readConfigMap(cfg, o.fleet.OperatorNamespace, o.config.configMap)
	if err != nil {
		return nil, err
	}
	if cm == nil {
		log.Info("no operator ConfigMap; flags and defaults apply", "configMap", o.fleet.OperatorNamespace+"/"+o.config.configMap, "settings", o.config.sources())
		return o, nil
	}
	o, err = parseSettings(args, cm)
	if err != nil {
		return nil, err
	}
	log.Info("settings read; a change of the ConfigMap takes effect when the operator restarts", "configMap", cm.Namespace+"/"+cm.Name, "settings", o.config.sources())
	return o, nil
}
