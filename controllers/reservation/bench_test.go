package reservation

import (
	"testing"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Run with: go test -run='^$' -bench=. -benchmem ./controllers/reservation

var sinkOK bool

// BenchmarkMatches is the per-reconcile check: the fleet's own hash, and the path through the
// reserved-tuning record after its tuning changed (decode, substitute, hash again).
func BenchmarkMatches(b *testing.B) {
	f := fixture()
	res := Desired(f)
	for name, g := range map[string]*v1.CelldFleet{"current": f, "recorded": retuned(f)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkOK, _ = Matches(res, g)
			}
		})
	}
}
