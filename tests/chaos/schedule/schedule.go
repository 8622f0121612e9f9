// Package schedule generates the fault campaign's storm: a pure function of a seed and a
// configuration, so `make test-chaos SEED=N` replays exactly the same actions at the same
// offsets against the same targets.
package schedule

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is what an action does.
type Kind string

// Faults: the infrastructure and other writers misbehave.
const (
	FailNode           Kind = "fail-node"
	RecoverNode        Kind = "recover-node"
	LoseVolume         Kind = "lose-volume"
	KillMember         Kind = "kill-member"
	UnhealthyOn        Kind = "unhealthy-on"
	UnhealthyOff       Kind = "unhealthy-off"
	CordonZone         Kind = "cordon-zone"
	UncordonZone       Kind = "uncordon-zone"
	DeleteMemberPod    Kind = "delete-member-pod"
	DeleteClaim        Kind = "delete-claim"
	RogueWorkload      Kind = "rogue-workload-edit"
	RogueNetworkPolicy Kind = "rogue-networkpolicy-edit"
	RoguePDB           Kind = "rogue-pdb-edit"
	// CrashLoopMember makes a member's celld exit at every start (the simulator's
	// CELLD_SIM_CRASH_AFTER_MS=0 on its Pod) and kills it once: it crash-loops on the revision
	// the other members run Ready, so its trouble is its own (its disk, say) and the operator
	// may give it a fresh disk once it has been down for the replacement delay. Drawn only on
	// PersistentFleets, the only ones a replacement can help. It has no closer: the knob is on
	// the Pod only, so the member's next Pod (a replacement's, a rollout's) starts clean, and the
	// campaign clears it on any Pod still carrying it once the storm is over. Not drawn on a
	// fleet within MaxHold of its previous one, the time a replacement takes, so two such
	// members are rarely down together (two down are never replaced).
	CrashLoopMember Kind = "crash-loop-member"
	// RestartAPIServer stops kube-apiserver and starts it again with the same flags: every
	// client's requests fail and its watches end until it is back (about half a minute).
	// Nothing else is drawn inside Config.APIRestartQuiet after it; a closer that falls there
	// runs once the API server answers again.
	RestartAPIServer Kind = "restart-apiserver"
)

// Operator faults: the operator process itself.
const (
	// KillLeader SIGKILLs the replica holding the leader lease.
	KillLeader Kind = "kill-leader"
	// KillLeaderOnDelete arms a SIGKILL of the replica that sends the next Pod, claim or
	// workload DELETE, sent before that request's answer reaches it: between a replacement's
	// Pod delete and its claim delete, or in the middle of a fleet's deletion.
	KillLeaderOnDelete Kind = "kill-leader-on-delete"
	// StopLeader stops the leader gracefully (SIGTERM: it releases the lease).
	StopLeader Kind = "stop-leader"
)

// User changes.
const (
	RestartToken Kind = "restart-token"
	RuntimeImage Kind = "runtime-image"
	ScaleOut     Kind = "scale-out"
	ScaleIn      Kind = "scale-in"
	Pause        Kind = "pause"
	Unpause      Kind = "unpause"
	// FullStop is the documented full stop: pause the fleet, then scale its workload to zero
	// by hand once the pause is in force. The FullStart that always follows unpauses it and
	// sets a new runtime image in the same change; every member must return at the declared
	// count in one step (on its own disk, for a PersistentFleet).
	FullStop  Kind = "full-stop"
	FullStart Kind = "full-start"
	// RoutingOn routes the fleet through a Gateway (an HTTPRoute and a routing NetworkPolicy,
	// no member restarted); the RoutingOff that always follows removes the routing again.
	RoutingOn  Kind = "routing-on"
	RoutingOff Kind = "routing-off"
	// MeshOn places the fleet in the Istio mesh (spec.mesh.istio): the operator rolls every
	// member onto a template the sidecar injector gives a proxy, one at a time, behind a
	// transitional PeerAuthentication. The MeshOff that always follows takes it out again
	// (spec.mesh: null), rolling every member again. Drawn only on fleets with Meshable.
	MeshOn  Kind = "mesh-on"
	MeshOff Kind = "mesh-off"
	// DeleteFleet deletes the fleet; the Recreate that always follows creates it again with
	// the same name under a new bucket (the old reservation stays bound to the old UID).
	DeleteFleet Kind = "delete-fleet"
	Recreate    Kind = "recreate-fleet"
)

// Kinds lists every kind, openers and closers alike.
var Kinds = []Kind{
	FailNode, RecoverNode, LoseVolume, KillMember, UnhealthyOn, UnhealthyOff, CordonZone, UncordonZone,
	DeleteMemberPod, DeleteClaim, CrashLoopMember, RogueWorkload, RogueNetworkPolicy, RoguePDB, RestartAPIServer,
	KillLeader, KillLeaderOnDelete, StopLeader,
	RestartToken, RuntimeImage, ScaleOut, ScaleIn, Pause, Unpause, FullStop, FullStart, RoutingOn, RoutingOff,
	MeshOn, MeshOff, DeleteFleet, Recreate,
}

// closer maps an action that opens a state to the action that always closes it later.
var closer = map[Kind]Kind{
	FailNode: RecoverNode, UnhealthyOn: UnhealthyOff, CordonZone: UncordonZone, Pause: Unpause, FullStop: FullStart,
	RoutingOn: RoutingOff, MeshOn: MeshOff, DeleteFleet: Recreate,
}

// IsCloser reports whether k only ever follows its opener (never drawn on its own).
func IsCloser(k Kind) bool {
	for _, c := range closer {
		if c == k {
			return true
		}
	}
	return false
}

// Opener returns the kind k closes, or "".
func Opener(k Kind) Kind {
	for o, c := range closer {
		if c == k {
			return o
		}
	}
	return ""
}

// Fleet describes one fleet of the campaign, as far as the schedule needs it.
type Fleet struct {
	Name string
	// Persistent fleets have claims: only they get lose-volume and delete-claim.
	Persistent bool
	// MinReplicas and MaxReplicas bound scale-in and scale-out; Replicas is the start.
	Replicas, MinReplicas, MaxReplicas int
	// Meshable fleets may join the mesh: only they get mesh-on. The API admits spec.mesh on
	// every profile and workload; a fleet whose namespaces no sidecar injector serves must not
	// be meshable (it would wait for proxies for ever).
	Meshable bool
}

// Config is everything the storm depends on besides the seed.
type Config struct {
	Duration time.Duration
	// MeanGap is the mean time between two drawn actions (closers come on top).
	MeanGap time.Duration
	Fleets  []Fleet
	Nodes   []string
	Zones   []string
	// Weights of the drawn kinds; a kind missing here is never drawn. Closers are ignored.
	Weights map[Kind]int
	// MinHold and MaxHold bound how long a fail-node, unhealthy, cordon or pause lasts, and
	// how long a deleted fleet stays away. Every closer falls before Duration.
	MinHold, MaxHold time.Duration
	// APIRestartQuiet is how long after a restart-apiserver no other action is drawn: the
	// time the API server takes to come back, so that the storm's next actions meet a
	// serving API server. A restart-apiserver is drawn only if its quiet time ends before
	// Duration - MaxHold.
	APIRestartQuiet time.Duration
}

// DefaultWeights draws faults about twice as often as user changes, operator faults rarely.
var DefaultWeights = map[Kind]int{
	FailNode: 3, LoseVolume: 3, KillMember: 6, UnhealthyOn: 4, CordonZone: 2, DeleteMemberPod: 5, DeleteClaim: 2, CrashLoopMember: 3,
	RogueWorkload: 3, RogueNetworkPolicy: 2, RoguePDB: 2, RestartAPIServer: 1,
	KillLeader: 2, KillLeaderOnDelete: 2, StopLeader: 1,
	RestartToken: 3, RuntimeImage: 2, ScaleOut: 2, ScaleIn: 2, Pause: 2, FullStop: 1, RoutingOn: 2, MeshOn: 2, DeleteFleet: 1,
}

// Action is one step of the storm. Targets are indexes into the Config; Member is an index
// into the fleet's members as they are when the action runs (modulo their number), since
// which Pods exist then is not the schedule's to know.
type Action struct {
	Seq    int           `json:"seq"`
	At     time.Duration `json:"at"`
	Kind   Kind          `json:"kind"`
	Fleet  int           `json:"fleet"` // -1: no fleet
	Member int           `json:"member"`
	Node   int           `json:"node"` // -1: no node
	Zone   int           `json:"zone"` // -1: no zone
	// Value: the new restart token, image digest (of a runtime-image or a full-start) or
	// replica count, or the recreated fleet's bucket suffix.
	Value string `json:"value,omitempty"`
	// Closes is the Seq of the opener this action closes, or -1.
	Closes int `json:"closes"`
}

// Describe renders the action with its targets' names, for the action log.
func (a Action) Describe(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d t+%s %s", a.Seq, a.At.Round(100*time.Millisecond), a.Kind)
	if a.Fleet >= 0 {
		fmt.Fprintf(&b, " fleet=%s", cfg.Fleets[a.Fleet].Name)
		if needsMember(a.Kind) {
			fmt.Fprintf(&b, " member#%d", a.Member)
		}
	}
	if a.Node >= 0 {
		fmt.Fprintf(&b, " node=%s", cfg.Nodes[a.Node])
	}
	if a.Zone >= 0 {
		fmt.Fprintf(&b, " zone=%s", cfg.Zones[a.Zone])
	}
	if a.Value != "" {
		fmt.Fprintf(&b, " value=%s", a.Value)
	}
	if a.Closes >= 0 {
		fmt.Fprintf(&b, " (closes #%d)", a.Closes)
	}
	return b.String()
}

func needsMember(k Kind) bool {
	switch k {
	case LoseVolume, KillMember, UnhealthyOn, UnhealthyOff, DeleteMemberPod, DeleteClaim, CrashLoopMember:
		return true
	}
	return false
}

// fleetState is what the generator knows of one fleet at the time it draws.
type fleetState struct {
	replicas     int
	pausedUntil  time.Duration // 0: not paused
	routedUntil  time.Duration // 0: not routed
	meshedUntil  time.Duration // 0: not meshed
	deletedUntil time.Duration // 0: present
	unhealthy    map[int]time.Duration
	// crashQuietTil: no crash-loop-member on the fleet before this (its previous one's
	// replacement time)
	crashQuietTil time.Duration
}

// generator carries the draw's state; Generate is its only entry point.
type generator struct {
	cfg           Config
	rng           *rand.Rand
	fleets        []fleetState
	nodeFailedTil time.Duration
	zoneCordonTil time.Duration
	apiQuietTil   time.Duration
	out           []Action
}

// Generate returns the storm for seed: the same seed and config give the same actions.
// Constraints that keep the storm meaningful (checked by the package's tests):
//   - at most one node failed and one zone cordoned at a time, each always recovered;
//   - a pause is always followed by its unpause, a fleet deletion by its re-creation, an
//     unhealthy member by its healing, all within [MinHold, MaxHold] and before Duration;
//   - nothing targets a fleet between its deletion and its re-creation, and a paused, stopped,
//     routed or meshed fleet is not deleted (so every closer finds the fleet its opener changed);
//   - mesh-on only on a Meshable fleet that is not meshed already;
//   - scale stays within [MinReplicas, MaxReplicas]; disks are lost or deleted, and members
//     made to crash-loop, only on PersistentFleets, and a fleet gets at most one
//     crash-loop-member within MaxHold;
//   - nothing is drawn within APIRestartQuiet after a restart-apiserver (closers of earlier
//     openers may fall there: they run once the API server is back).
func Generate(seed int64, cfg Config) []Action {
	g := &generator{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(seed), 0x63656c6c64))}
	for _, f := range cfg.Fleets {
		g.fleets = append(g.fleets, fleetState{replicas: f.Replicas, unhealthy: map[int]time.Duration{}})
	}
	kinds := drawable(cfg.Weights)
	total := 0
	for _, k := range kinds {
		total += cfg.Weights[k]
	}
	if total == 0 || cfg.MeanGap <= 0 {
		return nil
	}
	// Drawn actions stop MaxHold before the end so that every closer fits before Duration.
	last := cfg.Duration - cfg.MaxHold
	for t := g.gap(); t < last; t += g.gap() {
		if t < g.apiQuietTil {
			continue // the API server is restarting
		}
		for range 8 { // a kind that has no valid target now is redrawn, a few times
			if g.draw(t, pick(g.rng, kinds, cfg.Weights, total)) {
				break
			}
		}
	}
	slices.SortStableFunc(g.out, func(a, b Action) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Seq, b.Seq))
	})
	// Renumber in time order; closers keep pointing at their openers.
	renum := map[int]int{}
	for i := range g.out {
		renum[g.out[i].Seq] = i
	}
	for i := range g.out {
		g.out[i].Seq = i
		if g.out[i].Closes >= 0 {
			g.out[i].Closes = renum[g.out[i].Closes]
		}
	}
	return g.out
}

// drawable returns the kinds with a weight, closers excluded, in a fixed order.
func drawable(w map[Kind]int) []Kind {
	var out []Kind
	for _, k := range Kinds {
		if w[k] > 0 && !IsCloser(k) {
			out = append(out, k)
		}
	}
	return out
}

func pick(rng *rand.Rand, kinds []Kind, w map[Kind]int, total int) Kind {
	n := rng.IntN(total)
	for _, k := range kinds {
		if n < w[k] {
			return k
		}
		n -= w[k]
	}
	return kinds[len(kinds)-1]
}

// gap is uniform in [MeanGap/2, 3*MeanGap/2].
func (g *generator) gap() time.Duration {
	m := int64(g.cfg.MeanGap)
	return time.Duration(m/2 + g.rng.Int64N(m+1))
}

func (g *generator) hold() time.Duration {
	span := int64(g.cfg.MaxHold - g.cfg.MinHold)
	if span <= 0 {
		return g.cfg.MinHold
	}
	return g.cfg.MinHold + time.Duration(g.rng.Int64N(span+1))
}

// digest is a random sha256 digest of the runtime image, in hex.
func (g *generator) digest() string {
	return fmt.Sprintf("%016x%016x%016x%016x", g.rng.Uint64(), g.rng.Uint64(), g.rng.Uint64(), g.rng.Uint64())
}

func (g *generator) add(a Action) int {
	a.Seq = len(g.out)
	g.out = append(g.out, a)
	return a.Seq
}

// liveFleet picks a fleet that exists at t (and, if persistent, has claims), or -1.
func (g *generator) liveFleet(t time.Duration, persistentOnly, unpausedOnly bool) int {
	return g.fleetWhere(t, func(i int) bool {
		return (!persistentOnly || g.cfg.Fleets[i].Persistent) && (!unpausedOnly || g.fleets[i].pausedUntil <= t)
	})
}

// fleetWhere picks a fleet that exists at t and for which ok holds, or -1.
func (g *generator) fleetWhere(t time.Duration, want func(i int) bool) int {
	var ok []int
	for i, f := range g.fleets {
		if f.deletedUntil > t || !want(i) {
			continue
		}
		ok = append(ok, i)
	}
	if len(ok) == 0 {
		return -1
	}
	return ok[g.rng.IntN(len(ok))]
}

// draw adds the action of kind k at t (and its closer), or reports false if k has no valid
// target at t.
func (g *generator) draw(t time.Duration, k Kind) bool {
	base := Action{At: t, Kind: k, Fleet: -1, Node: -1, Zone: -1, Closes: -1}
	switch k {
	case FailNode:
		if g.nodeFailedTil > t || len(g.cfg.Nodes) == 0 {
			return false
		}
		base.Node = g.rng.IntN(len(g.cfg.Nodes))
		end := t + g.hold()
		g.nodeFailedTil = end
		seq := g.add(base)
		g.add(Action{At: end, Kind: RecoverNode, Fleet: -1, Node: base.Node, Zone: -1, Closes: seq})
	case CordonZone:
		if g.zoneCordonTil > t || len(g.cfg.Zones) == 0 {
			return false
		}
		base.Zone = g.rng.IntN(len(g.cfg.Zones))
		end := t + g.hold()
		g.zoneCordonTil = end
		seq := g.add(base)
		g.add(Action{At: end, Kind: UncordonZone, Fleet: -1, Node: -1, Zone: base.Zone, Closes: seq})
	case LoseVolume, DeleteClaim:
		if base.Fleet = g.liveFleet(t, true, false); base.Fleet < 0 {
			return false
		}
		base.Member = g.rng.IntN(g.fleets[base.Fleet].replicas)
		g.add(base)
	case CrashLoopMember:
		base.Fleet = g.fleetWhere(t, func(i int) bool { return g.cfg.Fleets[i].Persistent && g.fleets[i].crashQuietTil <= t })
		if base.Fleet < 0 {
			return false
		}
		base.Member = g.rng.IntN(g.fleets[base.Fleet].replicas)
		g.fleets[base.Fleet].crashQuietTil = t + g.cfg.MaxHold
		g.add(base)
	case KillMember, DeleteMemberPod:
		if base.Fleet = g.liveFleet(t, false, false); base.Fleet < 0 {
			return false
		}
		base.Member = g.rng.IntN(g.fleets[base.Fleet].replicas)
		g.add(base)
	case UnhealthyOn:
		if base.Fleet = g.liveFleet(t, false, false); base.Fleet < 0 {
			return false
		}
		f := &g.fleets[base.Fleet]
		base.Member = g.rng.IntN(f.replicas)
		if f.unhealthy[base.Member] > t {
			return false
		}
		end := t + g.hold()
		f.unhealthy[base.Member] = end
		seq := g.add(base)
		g.add(Action{At: end, Kind: UnhealthyOff, Fleet: base.Fleet, Member: base.Member, Node: -1, Zone: -1, Closes: seq})
	case RogueWorkload, RogueNetworkPolicy, RoguePDB:
		if base.Fleet = g.liveFleet(t, false, false); base.Fleet < 0 {
			return false
		}
		base.Value = fmt.Sprintf("rogue-%d", g.rng.IntN(1_000_000))
		g.add(base)
	case KillLeader, KillLeaderOnDelete, StopLeader:
		g.add(base)
	case RestartAPIServer:
		if g.cfg.APIRestartQuiet <= 0 || t+g.cfg.APIRestartQuiet > g.cfg.Duration-g.cfg.MaxHold {
			return false
		}
		g.apiQuietTil = t + g.cfg.APIRestartQuiet
		g.add(base)
	case RestartToken:
		if base.Fleet = g.liveFleet(t, false, false); base.Fleet < 0 {
			return false
		}
		base.Value = fmt.Sprintf("chaos-%06d", g.rng.IntN(1_000_000))
		g.add(base)
	case RuntimeImage:
		if base.Fleet = g.liveFleet(t, false, false); base.Fleet < 0 {
			return false
		}
		base.Value = g.digest()
		g.add(base)
	case ScaleOut, ScaleIn:
		return g.scale(base)
	case Pause, FullStop:
		// A full stop is a pause too: neither starts on a paused fleet, and a stopped fleet
		// is not deleted.
		if base.Fleet = g.liveFleet(t, false, true); base.Fleet < 0 {
			return false
		}
		end := t + g.hold()
		g.fleets[base.Fleet].pausedUntil = end
		seq := g.add(base)
		closing := Action{At: end, Kind: closer[k], Fleet: base.Fleet, Node: -1, Zone: -1, Closes: seq}
		if k == FullStop {
			closing.Value = g.digest()
		}
		g.add(closing)
	case RoutingOn:
		if base.Fleet = g.liveFleet(t, false, false); base.Fleet < 0 || g.fleets[base.Fleet].routedUntil > t {
			return false
		}
		end := t + g.hold()
		g.fleets[base.Fleet].routedUntil = end
		seq := g.add(base)
		g.add(Action{At: end, Kind: RoutingOff, Fleet: base.Fleet, Node: -1, Zone: -1, Closes: seq})
	case MeshOn:
		base.Fleet = g.fleetWhere(t, func(i int) bool { return g.cfg.Fleets[i].Meshable && g.fleets[i].meshedUntil <= t })
		if base.Fleet < 0 {
			return false
		}
		end := t + g.hold()
		g.fleets[base.Fleet].meshedUntil = end
		seq := g.add(base)
		g.add(Action{At: end, Kind: MeshOff, Fleet: base.Fleet, Node: -1, Zone: -1, Closes: seq})
	case DeleteFleet:
		// Not while paused (its unpause must find the same fleet), routed, meshed, or while a
		// member is held unhealthy (their closers must find it too).
		if base.Fleet = g.liveFleet(t, false, true); base.Fleet < 0 || g.fleets[base.Fleet].routedUntil > t || g.fleets[base.Fleet].meshedUntil > t {
			return false
		}
		f := &g.fleets[base.Fleet]
		for _, until := range f.unhealthy {
			if until > t {
				return false
			}
		}
		end := t + g.hold()
		f.deletedUntil = end
		seq := g.add(base)
		g.add(Action{At: end, Kind: Recreate, Fleet: base.Fleet, Node: -1, Zone: -1, Closes: seq,
			Value: fmt.Sprintf("r%d", g.rng.IntN(1_000_000))})
		f.replicas = g.cfg.Fleets[base.Fleet].Replicas // re-created as declared at start
	default:
		return false
	}
	return true
}

func (g *generator) scale(base Action) bool {
	if base.Fleet = g.liveFleet(base.At, false, false); base.Fleet < 0 {
		return false
	}
	f, spec := &g.fleets[base.Fleet], g.cfg.Fleets[base.Fleet]
	n := f.replicas
	if base.Kind == ScaleOut {
		if n >= spec.MaxReplicas {
			return false
		}
		n += 1 + g.rng.IntN(spec.MaxReplicas-n)
	} else {
		if n <= spec.MinReplicas {
			return false
		}
		n -= 1 + g.rng.IntN(n-spec.MinReplicas)
	}
	f.replicas = n
	base.Value = fmt.Sprint(n)
	g.add(base)
	return true
}

// ParseWeights reads "kind=N,kind=N" over base: each named kind gets weight N (0 leaves it
// out of the storm); the others keep base's. An unknown kind, a closer or a negative weight is
// an error. An empty text returns a copy of base.
func ParseWeights(text string, base map[Kind]int) (map[Kind]int, error) {
	out := map[Kind]int{}
	for k, w := range base {
		out[k] = w
	}
	if strings.TrimSpace(text) == "" {
		return out, nil
	}
	for _, item := range strings.Split(text, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		k := Kind(strings.TrimSpace(name))
		if !ok || !slices.Contains(Kinds, k) || IsCloser(k) {
			var kinds []string
			for _, k := range Kinds {
				if !IsCloser(k) {
					kinds = append(kinds, string(k))
				}
			}
			return nil, fmt.Errorf("%q: want KIND=WEIGHT with KIND one of %s", item, strings.Join(kinds, ", "))
		}
		w, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil || w < 0 {
			return nil, fmt.Errorf("%q: the weight must be a whole number, 0 or more", item)
		}
		out[k] = w
	}
	return out, nil
}

// FormatWeights renders weights as ParseWeights reads them, kinds in Kinds order.
func FormatWeights(w map[Kind]int) string {
	var parts []string
	for _, k := range Kinds {
		if v, ok := w[k]; ok && !IsCloser(k) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
	}
	return strings.Join(parts, ",")
}
