package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// OptionsFromBundle recovers the release options a committed bundle was generated with, so a
// test can regenerate it from config/ and compare: the CSV records version, image (by digest
// when it was pinned), createdAt, replaces and skip range, annotations.yaml the channels, the
// scorecard config its image.
func OptionsFromBundle(bundleDir, configDir string) (Options, error) {
	o := Options{ConfigDir: configDir, ContextBundleDir: "bundle"}
	csvs, err := ReadObjects(filepath.Join(bundleDir, "manifests", PackageName+".clusterserviceversion.yaml"))
	if err != nil {
		return o, err
	}
	if len(csvs) != 1 {
		return o, fmt.Errorf("the bundle CSV file holds %d documents", len(csvs))
	}
	csv := csvs[0]
	o.Version, _, _ = unstructured.NestedString(csv.Object, "spec", "version")
	o.Image = csv.GetAnnotations()["containerImage"]
	o.CreatedAt = csv.GetAnnotations()["createdAt"]
	if r, _, _ := unstructured.NestedString(csv.Object, "spec", "replaces"); r != "" {
		o.Replaces = strings.TrimPrefix(r, PackageName+".v")
	}
	skip := csv.GetAnnotations()["olm.skipRange"]
	if floor, _, ok := strings.Cut(strings.TrimPrefix(skip, ">="), " <"); ok {
		o.MinSkipVersion = floor
	} else {
		return o, fmt.Errorf("olm.skipRange %q is not of the form '>=MIN <VERSION'", skip)
	}

	raw, err := os.ReadFile(filepath.Join(bundleDir, "metadata", "annotations.yaml"))
	if err != nil {
		return o, err
	}
	var ann struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(raw, &ann); err != nil {
		return o, err
	}
	o.Channels = strings.Split(ann.Annotations["operators.operatorframework.io.bundle.channels.v1"], ",")
	o.DefaultChannel = ann.Annotations["operators.operatorframework.io.bundle.channel.default.v1"]

	cfg, err := ReadObjects(filepath.Join(bundleDir, "tests", "scorecard", "config.yaml"))
	if err != nil {
		return o, err
	}
	if len(cfg) == 1 {
		stages, _, _ := unstructured.NestedSlice(cfg[0].Object, "stages")
		if len(stages) > 0 {
			tests, _, _ := unstructured.NestedSlice(stages[0].(map[string]any), "tests")
			if len(tests) > 0 {
				o.ScorecardImage, _ = tests[0].(map[string]any)["image"].(string)
			}
		}
	}
	return o, nil
}
