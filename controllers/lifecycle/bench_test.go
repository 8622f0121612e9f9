package lifecycle

import (
	"fmt"
	"testing"
)

// Run with: go test -run='^$' -bench=. -benchmem ./controllers/lifecycle

var sink Decision

// BenchmarkHeal decides at 3 and 100 members, in the steady state (every member Ready: the
// whole chain runs and finds nothing), with one member waiting for its replacement (the
// message is built), and with one member replaced.
func BenchmarkHeal(b *testing.B) {
	for _, n := range []int32{3, 100} {
		for _, c := range []struct {
			name string
			f    Facts
		}{
			{"steady", fleet(n)},
			{"waiting", fleet(n, downFor(n-1, 4*m))},
			{"replace", fleet(n, downFor(n-1, h))},
			{"two-down", fleet(n, downFor(0, h), downFor(n-1, h))},
		} {
			b.Run(fmt.Sprintf("%s/members=%d", c.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					sink = Heal(c.f)
				}
			})
		}
	}
}

var sinkN int32

// BenchmarkGrowth plans a growth run: from 3 members to 6 over kept claims, and from 97 to 100,
// where every current member's Pod is checked for a scheduler decision.
func BenchmarkGrowth(b *testing.B) {
	for _, n := range []int32{3, 97} {
		f := fleet(n, keptClaims(n, n+3))
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkN, _, _ = Growth(f, n+3)
			}
		})
	}
}
