package celldctl

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest (krew.googlecontainertools.github.com/
// v1alpha2) the checks read.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifest checks config/krew/celld.yaml: a krew Plugin named celld (kubectl celld),
// one platform per linux and darwin on amd64 and arm64, each the project's release archive of
// its version and platform, installing the kubectl-celld binary, and a placeholder sha256 that
// names the archive the release process hashes.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "krew", "celld.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("config/krew/celld.yaml: %v", err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "celld" {
		t.Fatalf("not a krew Plugin named celld: %s %s %s", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(p.Spec.Version) || p.Spec.ShortDescription == "" || p.Spec.Homepage != "https://github.com/celld/celld-operator" {
		t.Errorf("spec: version %q, homepage %q, shortDescription %q", p.Spec.Version, p.Spec.Homepage, p.Spec.ShortDescription)
	}
	var got []string
	for _, pl := range p.Spec.Platforms {
		osName, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		got = append(got, osName+"/"+arch)
		archive := "kubectl-celld_" + p.Spec.Version + "_" + osName + "_" + arch + ".tar.gz"
		if want := "https://github.com/celld/celld-operator/releases/download/" + p.Spec.Version + "/" + archive; pl.URI != want {
			t.Errorf("%s/%s: uri %s, want %s", osName, arch, pl.URI, want)
		}
		if pl.SHA256 != "SHA256_OF_"+archive {
			t.Errorf("%s/%s: sha256 %q is neither the placeholder naming its archive", osName, arch, pl.SHA256)
		}
		if pl.Bin != "kubectl-celld" || len(pl.Files) != 1 || pl.Files[0].From != "kubectl-celld" {
			t.Errorf("%s/%s: bin %q files %+v", osName, arch, pl.Bin, pl.Files)
		}
	}
	sort.Strings(got)
	if strings.Join(got, " ") != "darwin/amd64 darwin/arm64 linux/amd64 linux/arm64" {
		t.Errorf("platforms %v", got)
	}
}
