package bundle

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// TestCommittedBundleIsUpToDate regenerates the bundle from config/ with the release options
// recorded in the committed bundle, into a temporary directory, and requires it to be byte
// for byte the committed one.
func TestCommittedBundleIsUpToDate(t *testing.T) {
	o, err := gen.OptionsFromBundle(repo(t, "bundle"), repo(t, "config"))
	if err != nil {
		t.Fatalf("read the release options from the committed bundle: %v", err)
	}
	b, err := gen.Render(o)
	if err != nil {
		t.Fatalf("generate the bundle from config/: %v", err)
	}
	tmp := t.TempDir()
	if err := b.Write(filepath.Join(tmp, "bundle"), filepath.Join(tmp, "bundle.Dockerfile")); err != nil {
		t.Fatal(err)
	}
	fresh, committed := tree(t, filepath.Join(tmp, "bundle")), tree(t, repo(t, "bundle"))
	fresh["../bundle.Dockerfile"] = read(t, filepath.Join(tmp, "bundle.Dockerfile"))
	committed["../bundle.Dockerfile"] = read(t, repo(t, "bundle.Dockerfile"))
	for _, p := range keys(fresh, committed) {
		switch f, c := fresh[p], committed[p]; {
		case c == nil:
			t.Errorf("bundle/%s is missing from the committed bundle; run `make bundle` and commit it", p)
		case f == nil:
			t.Errorf("bundle/%s is committed but no longer generated from config/; run `make bundle` and commit it", p)
		case !bytes.Equal(f, c):
			t.Errorf("bundle/%s is stale (config/ changed since it was generated); run `make bundle` and commit it", p)
		}
	}
}

// TestGeneratorRefusesAnUnplacedKind guards the strictness the staleness test relies on: an
// object config/manifests renders but the generator does not know must stop generation.
func TestGeneratorRefusesAnUnplacedKind(t *testing.T) {
	cfg := t.TempDir()
	if err := os.CopyFS(cfg, os.DirFS(repo(t, "config"))); err != nil {
		t.Fatal(err)
	}
	job := "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: stray\n"
	if err := os.WriteFile(filepath.Join(cfg, "default", "job.yaml"), []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(filepath.Join(cfg, "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "default", "kustomization.yaml"), append(k, []byte("- job.yaml\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	o := gen.Options{ConfigDir: cfg, Version: "0.1.0", Channels: []string{"stable"}, Image: "images.example.invalid/x:1", CreatedAt: "2026-12-01T00:00:00Z"}
	_, err = gen.Render(o)
	if err == nil || !strings.Contains(err.Error(), "Job") {
		t.Fatalf("a Job in config/default was not refused by name: %v", err)
	}
}

func tree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = read(t, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func keys(maps ...map[string][]byte) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
