package handedit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/celld/celld-operator/controllers/drift"
)

// Seed returns the run's random source and the number of edits per object: seed 1 and
// defaultEdits unless CELLD_DRIFT_SEED or CELLD_DRIFT_EDITS say otherwise. It logs both, so a
// failure can be replayed.
func Seed(t testing.TB, defaultEdits int) (*rand.Rand, int) {
	t.Helper()
	seed := uint64(1)
	if s, err := strconv.ParseUint(os.Getenv("CELLD_DRIFT_SEED"), 10, 64); err == nil {
		seed = s
	}
	n := defaultEdits
	if e, err := strconv.Atoi(os.Getenv("CELLD_DRIFT_EDITS")); err == nil && e > 0 {
		n = e
	}
	t.Logf("seed %d (CELLD_DRIFT_SEED=%d replays this run), %d edits per object", seed, seed, n)
	return rand.New(rand.NewPCG(seed, seed+1)), n
}

// Property is the drift property of one object: after any hand edit, one pass of the operator
// brings back the rendering in every field the operator sets and leaves metadata it does not set
// alone, and the pass after that sends no request.
type Property struct {
	// Name names the object in failure messages.
	Name string
	// Read returns the live object.
	Read func() *unstructured.Unstructured
	// Pass runs the operator once and returns the writes and dry-runs it sent.
	Pass func() (writes, dryRuns int64)
	// Additions and OwnLabels feed Random.
	Additions []Addition
	OwnLabels []string
	// Skip, when set, leaves out edits the property does not cover.
	Skip func(Edit) bool
}

// Tally counts what a run did.
type Tally struct {
	Applied        map[string]int // edits applied and repaired, by operation
	Refused, NoOps int            // refused by the API server; normalised away by it
}

func (t Tally) String() string {
	return fmt.Sprintf("%v edits applied and repaired; %d refused by the API server, %d normalised away", t.Applied, t.Refused, t.NoOps)
}

// Check applies n random edits, one at a time, each through Update or a foreign server-side
// apply, and fails t on the first edit that is not repaired as the property says.
func (p Property) Check(t testing.TB, c client.Client, rng *rand.Rand, n int, tally *Tally) {
	t.Helper()
	if tally.Applied == nil {
		tally.Applied = map[string]int{}
	}
	content := func(u *unstructured.Unstructured) map[string]any {
		m, err := drift.Content(u)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for i := range n {
		before := p.Read()
		rendering := content(before)
		op := Ops[rng.IntN(len(Ops))]
		edited := before.DeepCopy()
		edit, ok := Random(rng, edited, op, p.Additions, p.OwnLabels)
		if !ok || (p.Skip != nil && p.Skip(edit)) {
			continue
		}
		viaApply := rng.IntN(2) == 0
		if err := Write(context.Background(), c, edited, viaApply); err != nil {
			tally.Refused++ // the API server refused it: not an edit
			continue
		}
		after := p.Read()
		if drift.Diff(rendering, content(after)) == nil {
			tally.NoOps++
			continue
		}
		tally.Applied[op]++
		what := fmt.Sprintf("%s edit %d (%s via %s: %s)", p.Name, i, op, Via(viaApply), edit.What)
		writes, _ := p.Pass()
		restored := content(p.Read())
		if edit.Foreign {
			if writes != 0 {
				t.Fatalf("%s: an edit of metadata the operator does not set caused %d writes", what, writes)
			}
			if d := drift.Diff(content(after), restored); d != nil {
				t.Fatalf("%s: the operator changed someone else's metadata: %q", what, d)
			}
		} else if d := drift.Diff(rendering, restored); d != nil {
			t.Fatalf("%s: not restored to the rendering; still differs at %q", what, d)
		}
		if w, d := p.Pass(); w != 0 || d != 0 {
			t.Fatalf("%s: the pass after the repair sent %d writes and %d dry-runs; a restored object must cost nothing", what, w, d)
		}
	}
}
