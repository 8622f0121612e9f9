package workload_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/workload"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current builders")

// Fixed identity of every rendered sample, so the goldens are byte-stable.
const (
	testNamespace = "apps"
	testUID       = types.UID("3f9a1c2e-7b4d-4e8f-9a0b-1c2d3e4f5a6b")
)

func testOptions(f *v1.CelldFleet) workload.Options {
	return workload.Options{
		OperatorNamespace:      "celld-system",
		OperatorServiceAccount: "celld-operator",
		ReservationName:        reservationName(f.Spec.Storage.Bucket),
	}
}

// reservationName mirrors the reference naming (s3- and 56 hex characters of the bucket's
// SHA-256) so the goldens show a realistic claim annotation; the workload package only copies
// whatever name it is given.
func reservationName(bucket string) string {
	sum := sha256.Sum256([]byte(bucket))
	return "s3-" + hex.EncodeToString(sum[:])[:56]
}

// loadSample reads the CelldFleet document of a sample, gives it the fixed identity, defaults
// and validates it, as the reconciler does before rendering. It returns nil for a file without
// a CelldFleet (kustomization.yaml).
func loadSample(t testing.TB, path string) *v1.CelldFleet {
	t.Helper()
	f, err := corpus.ReadSample(path)
	if err != nil {
		t.Fatal(err)
	}
	if f == nil {
		return nil
	}
	f.Namespace, f.UID = testNamespace, testUID
	f.Default()
	if errs := f.Validate(); len(errs) > 0 {
		t.Fatalf("%s: the sample must be valid: %v", path, errs)
	}
	return f
}

// samples are the sample fleets by file name (without .yaml), in file order.
func samples(t testing.TB) (names []string, fleets map[string]*v1.CelldFleet) {
	t.Helper()
	paths, err := filepath.Glob("../../config/samples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fleets = map[string]*v1.CelldFleet{}
	for _, path := range paths {
		if f := loadSample(t, path); f != nil {
			name := strings.TrimSuffix(filepath.Base(path), ".yaml")
			names = append(names, name)
			fleets[name] = f
		}
	}
	if len(names) == 0 {
		t.Fatal("no CelldFleet samples under config/samples")
	}
	return names, fleets
}

// render is what the reconciler creates for a fleet at its declared replicas.
func render(f *v1.CelldFleet, o workload.Options) any {
	if f.Spec.Profile == v1.ProfileBucket && f.Spec.BucketWorkload != v1.BucketWorkloadOrdered {
		return workload.Deployment(f, o, f.DesiredReplicas())
	}
	return workload.StatefulSet(f, o, f.DesiredReplicas())
}

// TestSamplesRenderTheirGoldenWorkloads renders every sample's workload and compares it byte for
// byte with testdata/<sample>.golden.yaml. Review a golden diff as you would the code: it is
// exactly what reaches the cluster.
func TestSamplesRenderTheirGoldenWorkloads(t *testing.T) {
	names, fleets := samples(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			f := fleets[name]
			got, err := yaml.Marshal(render(f, testOptions(f)))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./controllers/workload -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("rendering of %s differs from %s; review the change and run with -update:\n%s",
					name, golden, lineDiff(string(want), string(got)))
			}
		})
	}
}

// TestRenderingIsDeterministic renders each sample twice from separate copies: map order,
// shared slices or anything else unstable would make the bytes or the hash differ.
func TestRenderingIsDeterministic(t *testing.T) {
	names, fleets := samples(t)
	for _, name := range names {
		f := fleets[name]
		a, _ := yaml.Marshal(render(f.DeepCopy(), testOptions(f)))
		for range 5 {
			b, _ := yaml.Marshal(render(f.DeepCopy(), testOptions(f)))
			if !bytes.Equal(a, b) {
				t.Fatalf("%s renders differently on a second call", name)
			}
		}
	}
}

// lineDiff lists the first differing lines, enough to see what moved without a diff library.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			shown++
		}
	}
	return b.String()
}
