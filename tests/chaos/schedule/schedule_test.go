package schedule

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testConfig() Config {
	return Config{
		Duration: 4 * time.Minute,
		MeanGap:  4 * time.Second,
		Fleets: []Fleet{
			{Name: "pf", Persistent: true, Replicas: 3, MinReplicas: 2, MaxReplicas: 5, Meshable: true},
			{Name: "dep", Replicas: 3, MinReplicas: 2, MaxReplicas: 4, Meshable: true},
			{Name: "ord", Replicas: 3, MinReplicas: 2, MaxReplicas: 4, Meshable: true},
		},
		Nodes:   []string{"n-a-0", "n-a-1", "n-b-0", "n-b-1", "n-c-0", "n-c-1"},
		Zones:   []string{"a", "b", "c"},
		Weights: DefaultWeights,
		MinHold: 5 * time.Second,
		MaxHold: 45 * time.Second,
		// as the campaign sets it
		APIRestartQuiet: 40 * time.Second,
	}
}

func TestTheSameSeedGivesTheSameSchedule(t *testing.T) {
	cfg := testConfig()
	for seed := range int64(20) {
		a, b := Generate(seed, cfg), Generate(seed, cfg)
		if len(a) == 0 {
			t.Fatalf("seed %d: an empty schedule", seed)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: two schedules of one seed differ", seed)
		}
	}
}

func TestDifferentSeedsGiveDifferentSchedules(t *testing.T) {
	cfg := testConfig()
	seen := map[string]int64{}
	for seed := range int64(200) {
		key := fmt.Sprint(Generate(seed, cfg))
		if other, ok := seen[key]; ok {
			t.Fatalf("seeds %d and %d gave the same schedule", other, seed)
		}
		seen[key] = seed
	}
}

func TestEveryScheduleKeepsTheStormMeaningful(t *testing.T) {
	cfg := testConfig()
	for seed := range int64(500) {
		if err := checkConstraints(cfg, Generate(seed, cfg)); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// checkConstraints restates Generate's contract independently of its bookkeeping.
func checkConstraints(cfg Config, actions []Action) error {
	failed, cordoned := -1, -1
	paused := map[int]bool{}
	routed := map[int]bool{}
	meshed := map[int]bool{}
	deleted := map[int]bool{}
	unhealthy := map[[2]int]bool{}
	replicas := map[int]int{}
	lastCrash := map[int]time.Duration{}
	for i, f := range cfg.Fleets {
		replicas[i] = f.Replicas
	}
	closed := map[int]bool{}
	var prev, apiQuietTil time.Duration
	for i, a := range actions {
		if a.Seq != i {
			return fmt.Errorf("action %d has seq %d", i, a.Seq)
		}
		if a.At < prev || a.At < 0 || a.At > cfg.Duration {
			return fmt.Errorf("%s: out of order or outside [0, %s]", a.Describe(cfg), cfg.Duration)
		}
		prev = a.At
		if a.At < apiQuietTil && a.Closes < 0 {
			return fmt.Errorf("%s is drawn while the API server restarts (until t+%s)", a.Describe(cfg), apiQuietTil)
		}
		if a.Fleet >= 0 && deleted[a.Fleet] && a.Kind != Recreate {
			return fmt.Errorf("%s targets a deleted fleet", a.Describe(cfg))
		}
		if (a.Kind == LoseVolume || a.Kind == DeleteClaim || a.Kind == CrashLoopMember) && !cfg.Fleets[a.Fleet].Persistent {
			return fmt.Errorf("%s: a disk fault on a fleet without disks", a.Describe(cfg))
		}
		if a.Kind == CrashLoopMember {
			if at, ok := lastCrash[a.Fleet]; ok && a.At-at < cfg.MaxHold {
				return fmt.Errorf("%s: %s after the fleet's previous crash-loop-member, within MaxHold %s", a.Describe(cfg), a.At-at, cfg.MaxHold)
			}
			lastCrash[a.Fleet] = a.At
		}
		if a.Closes >= 0 {
			opener := actions[a.Closes]
			if Opener(a.Kind) != opener.Kind || opener.Fleet != a.Fleet || opener.Node != a.Node || opener.Zone != a.Zone {
				return fmt.Errorf("%s does not close %s", a.Describe(cfg), opener.Describe(cfg))
			}
			if hold := a.At - opener.At; hold < cfg.MinHold || hold > cfg.MaxHold {
				return fmt.Errorf("%s: held %s, outside [%s, %s]", a.Describe(cfg), hold, cfg.MinHold, cfg.MaxHold)
			}
			closed[a.Closes] = true
		} else if IsCloser(a.Kind) {
			return fmt.Errorf("%s closes nothing", a.Describe(cfg))
		}
		switch a.Kind {
		case FailNode:
			if failed >= 0 {
				return fmt.Errorf("%s while node %d is failed", a.Describe(cfg), failed)
			}
			failed = a.Node
		case RecoverNode:
			failed = -1
		case RestartAPIServer:
			if a.Fleet >= 0 || a.Node >= 0 || a.Zone >= 0 {
				return fmt.Errorf("%s: an API server restart has no target", a.Describe(cfg))
			}
			apiQuietTil = a.At + cfg.APIRestartQuiet
		case CordonZone:
			if cordoned >= 0 {
				return fmt.Errorf("%s while zone %d is cordoned", a.Describe(cfg), cordoned)
			}
			cordoned = a.Zone
		case UncordonZone:
			cordoned = -1
		case Pause, FullStop:
			if paused[a.Fleet] {
				return fmt.Errorf("%s: already paused or stopped", a.Describe(cfg))
			}
			paused[a.Fleet] = true
		case Unpause:
			paused[a.Fleet] = false
		case FullStart:
			paused[a.Fleet] = false
			if len(a.Value) != 64 {
				return fmt.Errorf("%s: a full start sets a new image digest, got %q", a.Describe(cfg), a.Value)
			}
		case UnhealthyOn:
			unhealthy[[2]int{a.Fleet, a.Member}] = true
		case UnhealthyOff:
			delete(unhealthy, [2]int{a.Fleet, a.Member})
		case RoutingOn:
			if routed[a.Fleet] {
				return fmt.Errorf("%s: already routed", a.Describe(cfg))
			}
			routed[a.Fleet] = true
		case RoutingOff:
			routed[a.Fleet] = false
		case MeshOn:
			if !cfg.Fleets[a.Fleet].Meshable {
				return fmt.Errorf("%s: the fleet may not join the mesh", a.Describe(cfg))
			}
			if meshed[a.Fleet] {
				return fmt.Errorf("%s: already meshed", a.Describe(cfg))
			}
			meshed[a.Fleet] = true
		case MeshOff:
			meshed[a.Fleet] = false
		case DeleteFleet:
			if paused[a.Fleet] || routed[a.Fleet] || meshed[a.Fleet] {
				return fmt.Errorf("%s: a paused, routed or meshed fleet is deleted, its closer would find another", a.Describe(cfg))
			}
			for k := range unhealthy {
				if k[0] == a.Fleet {
					return fmt.Errorf("%s while member %d is unhealthy", a.Describe(cfg), k[1])
				}
			}
			deleted[a.Fleet] = true
		case Recreate:
			deleted[a.Fleet] = false
			replicas[a.Fleet] = cfg.Fleets[a.Fleet].Replicas
		case ScaleIn, ScaleOut:
			n, err := strconv.Atoi(a.Value)
			if err != nil {
				return fmt.Errorf("%s: %v", a.Describe(cfg), err)
			}
			f := cfg.Fleets[a.Fleet]
			if n < f.MinReplicas || n > f.MaxReplicas || (a.Kind == ScaleOut) != (n > replicas[a.Fleet]) || n == replicas[a.Fleet] {
				return fmt.Errorf("%s from %d: outside [%d, %d] or the wrong way", a.Describe(cfg), replicas[a.Fleet], f.MinReplicas, f.MaxReplicas)
			}
			replicas[a.Fleet] = n
		}
	}
	for _, a := range actions {
		if _, opens := closer[a.Kind]; opens && !closed[a.Seq] {
			return fmt.Errorf("%s is never closed", a.Describe(cfg))
		}
	}
	if failed >= 0 || cordoned >= 0 || len(unhealthy) > 0 {
		return fmt.Errorf("the storm ends with a fault open")
	}
	for f := range cfg.Fleets {
		if paused[f] || deleted[f] || routed[f] || meshed[f] {
			return fmt.Errorf("the storm ends with fleet %d paused, deleted, routed or meshed", f)
		}
	}
	return nil
}

func TestTheMixCoversEveryKindOverFiftySeeds(t *testing.T) {
	cfg := testConfig()
	seen := map[Kind]int{}
	for seed := range int64(50) {
		for _, a := range Generate(seed, cfg) {
			seen[a.Kind]++
		}
	}
	for _, k := range Kinds {
		if seen[k] == 0 {
			t.Errorf("no schedule of 50 seeds has a %s", k)
		}
	}
}

func TestMeshTogglesGoOnlyToMeshableFleetsAndAlternate(t *testing.T) {
	cfg := testConfig()
	cfg.Fleets[1].Meshable = false
	cfg.Weights = map[Kind]int{MeshOn: 5, DeleteFleet: 1, KillMember: 1}
	toggles := map[int]int{}
	for seed := range int64(100) {
		actions := Generate(seed, cfg)
		if err := checkConstraints(cfg, actions); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, a := range actions {
			if a.Kind == MeshOn {
				toggles[a.Fleet]++
			}
		}
	}
	if toggles[1] != 0 {
		t.Fatalf("%d mesh-on drawn on fleet dep, which is not meshable", toggles[1])
	}
	if toggles[0] == 0 || toggles[2] == 0 {
		t.Fatalf("mesh-on drawn %d times on pf and %d on ord in 100 seeds with half the mix", toggles[0], toggles[2])
	}
	cfg.Fleets[0].Meshable, cfg.Fleets[2].Meshable = false, false
	for seed := range int64(20) {
		for _, a := range Generate(seed, cfg) {
			if a.Kind == MeshOn || a.Kind == MeshOff {
				t.Fatalf("seed %d drew %s with no meshable fleet", seed, a.Describe(cfg))
			}
		}
	}
}

func TestCrashLoopsGoOnlyToPersistentFleetsAMaxHoldApart(t *testing.T) {
	cfg := testConfig()
	cfg.Weights = map[Kind]int{CrashLoopMember: 5, KillMember: 1}
	drawn := 0
	for seed := range int64(50) {
		actions := Generate(seed, cfg)
		if err := checkConstraints(cfg, actions); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, a := range actions {
			if a.Kind != CrashLoopMember {
				continue
			}
			drawn++
			if a.Fleet != 0 || a.Closes >= 0 || a.Member < 0 || a.Member >= cfg.Fleets[0].MaxReplicas {
				t.Fatalf("seed %d: %s: want an opener on a member of pf, the only PersistentFleet", seed, a.Describe(cfg))
			}
			if got, want := a.Describe(cfg), fmt.Sprintf("crash-loop-member fleet=pf member#%d", a.Member); !strings.Contains(got, want) {
				t.Fatalf("Describe = %q, want it to name the member (%q)", got, want)
			}
		}
	}
	if drawn == 0 {
		t.Fatalf("%d crash-loop-member in 50 seeds with most of the mix", drawn)
	}
	cfg.Fleets[0].Persistent = false
	for seed := range int64(20) {
		for _, a := range Generate(seed, cfg) {
			if a.Kind == CrashLoopMember {
				t.Fatalf("seed %d drew %s with no PersistentFleet", seed, a.Describe(cfg))
			}
		}
	}
}

func TestAStandardRunDrawsAboutDurationOverMeanGapActions(t *testing.T) {
	cfg := testConfig()
	drawn := 0
	for _, a := range Generate(1, cfg) {
		if a.Closes < 0 {
			drawn++
		}
	}
	// (Duration - MaxHold) / MeanGap draws, a few redrawn kinds aside.
	want := int((cfg.Duration - cfg.MaxHold) / cfg.MeanGap)
	if drawn < want*3/4 || drawn > want*5/4 {
		t.Fatalf("%d actions drawn, want about %d", drawn, want)
	}
}

func TestKindsWithoutWeightAreNeverDrawn(t *testing.T) {
	cfg := testConfig()
	cfg.Weights = map[Kind]int{KillMember: 1, Pause: 1}
	for seed := range int64(20) {
		for _, a := range Generate(seed, cfg) {
			if a.Kind != KillMember && a.Kind != Pause && a.Kind != Unpause {
				t.Fatalf("seed %d drew %s with weights for kill-member and pause only", seed, a.Kind)
			}
		}
	}
}

func TestDescribeNamesTheTargets(t *testing.T) {
	cfg := testConfig()
	a := Action{Seq: 4, At: 12300 * time.Millisecond, Kind: FailNode, Fleet: -1, Node: 2, Zone: -1, Closes: -1}
	if got, want := a.Describe(cfg), "#4 t+12.3s fail-node node=n-b-0"; got != want {
		t.Fatalf("Describe = %q, want %q", got, want)
	}
	a = Action{Seq: 9, At: time.Minute, Kind: UnhealthyOff, Fleet: 0, Member: 1, Node: -1, Zone: -1, Closes: 3}
	if got, want := a.Describe(cfg), "#9 t+1m0s unhealthy-off fleet=pf member#1 (closes #3)"; got != want {
		t.Fatalf("Describe = %q, want %q", got, want)
	}
}

func TestParseWeightsOverridesNamedKindsAndRefusesClosersAndUnknownKinds(t *testing.T) {
	got, err := ParseWeights(" restart-apiserver=20, kill-member=0", DefaultWeights)
	if err != nil {
		t.Fatal(err)
	}
	if got[RestartAPIServer] != 20 || got[KillMember] != 0 || got[FailNode] != DefaultWeights[FailNode] {
		t.Fatalf("named kinds take the given weight, the others keep the default: %v", got)
	}
	if DefaultWeights[RestartAPIServer] == 20 {
		t.Fatal("ParseWeights changed its base")
	}
	back, err := ParseWeights(FormatWeights(got), nil)
	if err != nil || !reflect.DeepEqual(back, got) {
		t.Fatalf("FormatWeights does not round-trip: %v, %v", back, err)
	}
	for _, bad := range []string{"unpause=3", "no-such-kind=1", "kill-member", "kill-member=-1", "kill-member=x"} {
		if _, err := ParseWeights(bad, DefaultWeights); err == nil {
			t.Errorf("ParseWeights(%q) accepted it", bad)
		}
	}
}

func TestAnAPIServerRestartIsDrawnOnlyWithAQuietTime(t *testing.T) {
	cfg := testConfig()
	cfg.Weights = map[Kind]int{RestartAPIServer: 1, KillMember: 1}
	restarts := 0
	for seed := range int64(20) {
		for _, a := range Generate(seed, cfg) {
			if a.Kind == RestartAPIServer {
				restarts++
			}
		}
	}
	if restarts == 0 {
		t.Fatal("no restart-apiserver drawn in 20 seeds with its weight half the mix")
	}
	cfg.APIRestartQuiet = 0
	for seed := range int64(20) {
		for _, a := range Generate(seed, cfg) {
			if a.Kind == RestartAPIServer {
				t.Fatalf("seed %d drew %s without a quiet time: nothing would wait for the API server", seed, a.Describe(cfg))
			}
		}
	}
}
