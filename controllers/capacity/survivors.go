package capacity

import (
	"fmt"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// survivors checks the evidence a contraction of an Automatic or External fleet needs, and
// returns what is missing, or "" when the evidence holds. The evidence is a complete current
// membership (the collection listed every member and found exactly the applied count) in which
// every member is Ready with fresh samples inside the window bounds, and in which the members
// that stay can take the removed member's load: spread evenly over them, it leaves each one
// below the high thresholds, not pressured by celld's account, and within its requests.
//
// victim is the member the step removes (a StatefulSet's highest ordinal). Without one
// Kubernetes chooses (a Deployment), so the check must hold whichever member goes.
func survivors(p *v1.CapacityPolicy, now time.Time, obs *Observation, applied int32, victim string) string {
	switch {
	case obs == nil || obs.At.IsZero():
		return "no capacity samples were collected (survivor metrics unavailable); check that metrics-server serves metrics.k8s.io and that the operator reaches each member's /state on port 8081"
	case !obs.Complete:
		return "the last collection could not list every member, or the members changed while it ran"
	case int32(len(obs.Samples)) != applied:
		return fmt.Sprintf("the last collection found %d members while the workload applies %d; waiting for a collection of the current members",
			len(obs.Samples), applied)
	case applied < 2:
		return "a fleet of one member has no survivor to take its load"
	}
	for i := range obs.Samples {
		if gap := coverage(p, now, &obs.Samples[i]); gap != "" {
			return gap
		}
	}
	n := int64(len(obs.Samples) - 1)
	if victim != "" {
		at := -1
		for i := range obs.Samples {
			if obs.Samples[i].Name == victim {
				at = i
			}
		}
		if at < 0 {
			return fmt.Sprintf("member %s, which the contraction removes, has no sample", victim)
		}
		for i := range obs.Samples {
			if i != at {
				if why := absorb(p, &obs.Samples[i], &obs.Samples[at], n); why != "" {
					return why
				}
			}
		}
		return ""
	}
	// Any member may go: every member is a survivor of some removal, and the worst survivor
	// of removing v is the one with the least room other than v itself.
	for i := range obs.Samples {
		if s := &obs.Samples[i]; s.Pressured || s.Backlog {
			return fmt.Sprintf("survivor %s is itself under pressure (celld reports it%s), and Kubernetes may keep it", s.Name, pressure(s))
		}
	}
	cpu, mem := tightest(obs.Samples, cpuRoom(p)), tightest(obs.Samples, memRoom(p))
	for i := range obs.Samples {
		for _, worst := range []int{cpu.other(i), mem.other(i)} {
			if why := absorb(p, &obs.Samples[worst], &obs.Samples[i], n); why != "" {
				return why + " if Kubernetes removes " + obs.Samples[i].Name
			}
		}
	}
	return ""
}

// share is a survivor's part of the removed member's load, rounded up.
func share(x, n int64) int64 { return (x + n - 1) / n }

// absorb says why survivor s cannot take its share of victim's load, or "".
func absorb(p *v1.CapacityPolicy, s, victim *Sample, n int64) string {
	if s.Pressured || s.Backlog {
		return fmt.Sprintf("survivor %s is itself under pressure (celld reports it%s)", s.Name, pressure(s))
	}
	c, m := share(victim.CPUMillicores, n), share(victim.MemoryMiB, n)
	if room := cpuRoom(p)(s); c > room {
		return fmt.Sprintf("survivor %s would carry %dm CPU (%dm now plus %dm of %s's %dm), %s",
			s.Name, s.CPUMillicores+c, s.CPUMillicores, c, victim.Name, victim.CPUMillicores, limitText(int64(p.CPUHighMillicores), s.CPURequestMillicores, "cpuHighMillicores", "m"))
	}
	if room := memRoom(p)(s); m > room {
		return fmt.Sprintf("survivor %s would carry %dMi memory (%dMi now plus %dMi of %s's %dMi), %s",
			s.Name, s.MemoryMiB+m, s.MemoryMiB, m, victim.Name, victim.MemoryMiB, limitText(int64(p.MemoryHighMiB), s.MemoryRequestMiB, "memoryHighMiB", "Mi"))
	}
	return ""
}

func limitText(high, request int64, field, unit string) string {
	if request > 0 && request < high {
		return fmt.Sprintf("above its request of %d%s", request, unit)
	}
	return fmt.Sprintf("not below %s %d", field, high)
}

// cpuRoom and memRoom are how much more a survivor can carry: up to just below the high
// threshold (at the threshold it would count as pressure, and the policy would add the member
// back), and no further than its request, which is all the scheduler reserved for it.
func cpuRoom(p *v1.CapacityPolicy) func(*Sample) int64 {
	return func(s *Sample) int64 {
		return room(int64(p.CPUHighMillicores), s.CPURequestMillicores, s.CPUMillicores)
	}
}

func memRoom(p *v1.CapacityPolicy) func(*Sample) int64 {
	return func(s *Sample) int64 { return room(int64(p.MemoryHighMiB), s.MemoryRequestMiB, s.MemoryMiB) }
}

func room(high, request, used int64) int64 {
	limit := high - 1
	if request > 0 {
		limit = min(limit, request)
	}
	return limit - used
}

// least holds the two members with the least room.
type least struct{ first, second int }

// other is the member with the least room other than i.
func (l least) other(i int) int {
	if l.first == i {
		return l.second
	}
	return l.first
}

func tightest(samples []Sample, room func(*Sample) int64) least {
	l := least{-1, -1}
	for i := range samples {
		r := room(&samples[i])
		switch {
		case l.first < 0 || r < room(&samples[l.first]):
			l.second, l.first = l.first, i
		case l.second < 0 || r < room(&samples[l.second]):
			l.second = i
		}
	}
	return l
}
