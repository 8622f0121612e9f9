package celldctl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// ErrNoManualReplacement is what replace-member returns: docs/lifecycle.md documents no manual
// replacement of a member, only the operator's own self-healing rules.
var ErrNoManualReplacement = errors.New("replace-member wrote nothing: docs/lifecycle.md documents no manual member replacement; the operator replaces members itself under the rules of its Self-healing section")

func newReplaceMemberCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replace-member FLEET N",
		Short: "Say whether and when the operator replaces member N (never replaces by hand)",
		Long: `docs/lifecycle.md documents no manual replacement of a member: the operator alone gives a
member a fresh disk, under the rules of the Self-healing section (a lost volume at once; the
one member down past --member-replacement-delay while every other member is Ready; never two
members down, a member waiting on its image or configuration, a member crash-looping on a new
template, or a one-member fleet). Deleting a member's Pod and claim by hand bypasses those
checks and can lose writes only that disk holds.

replace-member therefore writes nothing. It reads the fleet and says which rule applies to
member N: whether the operator will replace it, when, or what to do instead. It exits
non-zero.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("replace-member needs FLEET and the member's ordinal N (got %d arguments)", len(args))
			}
			if n, err := strconv.Atoi(args[1]); err != nil || n < 0 || n >= v1.MaxMembers {
				return fmt.Errorf("the member ordinal must be from 0 to %d, not %q", v1.MaxMembers-1, args[1])
			}
			return nil
		},
		ValidArgsFunction: o.completeFleets,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.setup()
			if err != nil {
				return err
			}
			snap, err := ReadSnapshot(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			n, _ := strconv.Atoi(args[1])
			st := BuildStatus(snap, o.Now())
			for _, l := range ReplacementVerdict(st, snap.Fleet, int32(n)) {
				fmt.Fprintln(o.Streams.Out, l)
			}
			fmt.Fprintln(o.Streams.Out)
			fmt.Fprintln(o.Streams.Out, "See docs/lifecycle.md, Self-healing, and docs/operations.md for the reason the fleet reports.")
			return ErrNoManualReplacement
		},
	}
	return cmd
}

// imageOrConfigWaits are the waiting reasons of a member that is never replaced: it waits on
// its image or configuration, which a fresh disk does not fix.
var imageOrConfigWaits = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}

// ReplacementVerdict says, in the terms of docs/lifecycle.md's Self-healing rules, what happens
// to member n of the fleet: the first lines describe the member, the last what the operator
// does about it and what the user can do.
func ReplacementVerdict(st *Status, f *v1.CelldFleet, n int32) []string {
	name := v1.MemberName(f.Name, n)
	if !f.RunsAsStatefulSet() {
		return []string{
			fmt.Sprintf("CelldFleet %s/%s runs as a Deployment: its members have no ordinal and no disk of their own.", f.Namespace, f.Name),
			"Kubernetes replaces a failed member Pod itself; every acknowledged write is in the bucket.",
		}
	}
	var m *Member
	down := 0
	for i := range st.Members {
		if !st.Members[i].Ready {
			down++
		}
		if st.Members[i].Ordinal == n {
			m = &st.Members[i]
		}
	}
	if m == nil {
		return []string{fmt.Sprintf("CelldFleet %s/%s has no member %s (its workload has %d members).", f.Namespace, f.Name, name, st.Replicas.Applied)}
	}
	out := []string{fmt.Sprintf("Member %s: %s, disk %s%s.", name, m.Phase, m.Disk, claimSuffix(m))}
	reason, message := "", ""
	if st.Ready != nil {
		reason, message = st.Ready.Reason, st.Ready.Message
	}
	switch {
	case st.Paused:
		out = append(out, "The fleet is paused: no member is replaced while paused. Resume it (kubectl celld resume) and the rules below apply.")
	case m.Disk == "lost":
		out = append(out, "Its volume no longer exists (claim Lost): the operator replaces it on a fresh disk by itself (event MemberDiskLost), even while another member is down.")
	case m.Ready && !m.Held:
		out = append(out, "It is Ready: there is nothing to replace. To restart every member on its own disk, use kubectl celld restart.")
	case m.Held:
		out = append(out, "A replacement of it is under way (replacement hold on its Pod): the operator finishes it.")
	case st.Replicas.Applied == 1:
		out = append(out, "A one-member fleet's member is never replaced: its disk holds the only copy.")
	case down >= 2:
		out = append(out, fmt.Sprintf("%d members are down: none is replaced, because replacing either could lose writes only their disks hold. Bring the others back (their nodes, zones, images).", down))
	case waitsOnImageOrConfig(m.Phase):
		out = append(out, "It waits on its image or configuration: it is never replaced, since a fresh disk does not fix that. Correct spec.runtimeImage or the env/Secret it needs.")
	case reason == v1.ReasonMemberCrashLooping && strings.Contains(message, name):
		out = append(out, "It keeps exiting on a template no Ready member runs (MemberCrashLooping): it stays on its disk. Correct the fleet's last change; it is then recreated from the corrected template.")
	default:
		out = append(out, "It is the one member down: the operator replaces it on a fresh disk by itself once it has been down for --member-replacement-delay (10 minutes by default) while every other member has been Ready for 5 minutes (event MemberReplaced).")
	}
	if message != "" {
		out = append(out, fmt.Sprintf("The fleet says (%s): %s", reason, oneLine(message)))
	}
	return out
}

func claimSuffix(m *Member) string {
	if m.Claim == "" {
		return ""
	}
	return " (claim " + m.Claim + ")"
}

func waitsOnImageOrConfig(phase string) bool {
	for _, r := range imageOrConfigWaits {
		if strings.Contains(phase, "("+r+")") {
			return true
		}
	}
	return false
}
