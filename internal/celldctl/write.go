package celldctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Dry-run modes of the write commands, as kubectl names them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// writeFlags are the flags every write command has.
type writeFlags struct {
	yes     bool
	dryRun  string
	timeout time.Duration
}

func (w *writeFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&w.yes, "yes", "y", false, "Do not ask for confirmation")
	cmd.Flags().StringVar(&w.dryRun, "dry-run", dryRunNone,
		`"client" prints the patches without sending them, "server" sends them as a server-side dry run (nothing is persisted)`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = dryRunClient
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{dryRunNone, dryRunClient, dryRunServer}, cobra.ShellCompDirectiveNoFileComp))
}

func (w *writeFlags) validate() error {
	switch w.dryRun {
	case dryRunNone, dryRunClient, dryRunServer:
		return nil
	}
	return fmt.Errorf(`--dry-run must be "none", "client" or "server", not %q`, w.dryRun)
}

// plan is what a write command will do: the explanation printed first, then each step with the
// kubectl command it is equivalent to.
type plan struct {
	what  []string
	steps []step
	// after is printed once every step succeeded.
	after []string
}

// step is one write (or a wait between writes).
type step struct {
	// kubectl is the equivalent kubectl command, printed before the write.
	kubectl string
	// run performs the step; dryRun is true for a server-side dry run.
	run func(ctx context.Context, dryRun bool) error
	// wait marks a step that only waits: skipped in dry runs.
	wait bool
}

var errAborted = errors.New("aborted: nothing was written")

// runWrite is the body of a write command: check the write flags, read the fleet's snapshot,
// make the command's plan and execute it. A plan without steps has nothing to write (its
// explanation was already printed).
func (o *Options) runWrite(w *writeFlags, planFor func(Clients, *Snapshot) (plan, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := w.validate(); err != nil {
			return err
		}
		c, ns, err := o.setup()
		if err != nil {
			return err
		}
		snap, err := ReadSnapshot(cmd.Context(), c, ns, args[0])
		if err != nil {
			return err
		}
		p, err := planFor(c, snap)
		if err != nil || p.steps == nil {
			return err
		}
		return o.execute(cmd.Context(), w, p)
	}
}

// execute prints p, asks for confirmation unless --yes or a dry run, and runs the steps.
func (o *Options) execute(ctx context.Context, w *writeFlags, p plan) error {
	out := o.Streams.Out
	for _, l := range p.what {
		fmt.Fprintln(out, l)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Writes (the equivalent kubectl commands):")
	for _, s := range p.steps {
		if s.wait {
			fmt.Fprintf(out, "  # %s\n", s.kubectl)
		} else {
			fmt.Fprintf(out, "  %s\n", s.kubectl)
		}
	}
	if w.dryRun == dryRunClient {
		fmt.Fprintln(out, "\nDry run (client): nothing was sent.")
		return nil
	}
	if w.dryRun == dryRunNone && !w.yes {
		fmt.Fprint(out, "\nProceed? [y/N] ")
		line, _ := bufio.NewReader(o.Streams.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(out)
			return errAborted
		}
	}
	fmt.Fprintln(out)
	for _, s := range p.steps {
		if s.wait && w.dryRun == dryRunServer {
			continue
		}
		if err := s.run(ctx, w.dryRun == dryRunServer); err != nil {
			return err
		}
	}
	if w.dryRun == dryRunServer {
		fmt.Fprintln(out, "Dry run (server): the API server accepted every write; nothing was persisted.")
		return nil
	}
	for _, l := range p.after {
		fmt.Fprintln(out, l)
	}
	return nil
}

// fleetPatch is a merge patch of the fleet, as docs/lifecycle.md writes them.
func fleetPatch(spec map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"spec": spec})
	return b
}

func (o *Options) patchFleetStep(c Clients, f *v1.CelldFleet, patch []byte, done string, out *int64) step {
	return step{
		kubectl: fmt.Sprintf("kubectl -n %s patch celldfleet %s --type merge -p '%s'", f.Namespace, f.Name, patch),
		run: func(ctx context.Context, dryRun bool) error {
			opts := metav1.PatchOptions{FieldManager: FieldManager}
			if dryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			u, err := c.Dynamic.Resource(fleetsGVR).Namespace(f.Namespace).Patch(ctx, f.Name, types.MergePatchType, patch, opts)
			if err != nil {
				return fmt.Errorf("patch CelldFleet %s/%s: %s", f.Namespace, f.Name, explain(err))
			}
			if out != nil {
				*out = u.GetGeneration()
			}
			if !dryRun {
				fmt.Fprintf(o.Streams.Out, "celldfleet %s/%s patched: %s\n", f.Namespace, f.Name, done)
			}
			return nil
		},
	}
}

// FieldManager is the field manager of every write of the plugin.
const FieldManager = "kubectl-celld"

func newRestartCommand(o *Options) *cobra.Command {
	w := &writeFlags{}
	var token string
	cmd := &cobra.Command{
		Use:   "restart FLEET",
		Short: "Rolling restart: set a new spec.maintenance.restartToken",
		Long: `Request a same-version rolling restart by setting a new spec.maintenance.restartToken
(docs/lifecycle.md, Changes). Kubernetes replaces one member at a time, highest ordinal first
for a StatefulSet, waiting for each to be Ready; every member keeps its disk. The operator
deletes no Pod and no claim to roll.`,
		Example: `  kubectl celld restart persistent -n celld-demo
  kubectl celld restart persistent -n celld-demo --restart-token after-cert-rotation --yes
  kubectl celld restart persistent -n celld-demo --dry-run`,
		Args:              fleetArg,
		ValidArgsFunction: o.completeFleets,
		RunE:              o.runWrite(w, func(c Clients, snap *Snapshot) (plan, error) { return o.restartPlan(c, snap, token) }),
	}
	cmd.Flags().StringVar(&token, "restart-token", "", "The new restart token (default: the current Unix time in seconds, like date +%s)")
	w.add(cmd)
	return cmd
}

func (o *Options) restartPlan(c Clients, snap *Snapshot, token string) (plan, error) {
	f := snap.Fleet
	if token == "" {
		token = strconv.FormatInt(o.Now().Unix(), 10)
	}
	if len(token) > 128 {
		return plan{}, fmt.Errorf("--restart-token is %d characters; spec.maintenance.restartToken takes at most 128", len(token))
	}
	current := ""
	if f.Spec.Maintenance != nil {
		current = f.Spec.Maintenance.RestartToken
	}
	if token == current {
		return plan{}, fmt.Errorf("spec.maintenance.restartToken is already %q: a restart needs a token the fleet has not seen", token)
	}
	st := BuildStatus(snap, o.Now())
	order := "highest ordinal first"
	if !f.RunsAsStatefulSet() {
		order = "Kubernetes picks the order"
	}
	what := []string{
		fmt.Sprintf("Rolling restart of CelldFleet %s/%s (restartToken %q -> %q).", f.Namespace, f.Name, current, token),
		fmt.Sprintf("Kubernetes replaces the %d members one at a time (%s), each waiting for the one before to be Ready;", st.Replicas.Applied, order),
		"every member keeps its disk, and the operator deletes no Pod and no claim.",
	}
	switch {
	case st.Paused:
		what = append(what, "The fleet is paused: the operator writes no workload change, so the restart starts when the fleet is resumed.")
	case st.Blocked != nil:
		what = append(what, fmt.Sprintf("The fleet is Blocked (%s): nothing it runs changes until the blocker clears, then the restart rolls.", st.Blocked.Reason))
	case st.Rollout != nil:
		what = append(what, "A rollout is already in progress: Kubernetes rolls the members onto the newest template.")
	}
	patch := fleetPatch(map[string]any{"maintenance": map[string]any{"restartToken": token}})
	return plan{
		what:  what,
		steps: []step{o.patchFleetStep(c, f, patch, "restart requested", nil)},
		after: []string{fmt.Sprintf("Follow it with: kubectl celld status %s -n %s --watch", f.Name, f.Namespace)},
	}, nil
}

func newPauseCommand(o *Options, pause bool) *cobra.Command {
	w := &writeFlags{}
	use, short, long := "pause FLEET", "Pause the fleet: set spec.maintenance.paused", `Pause a fleet by setting spec.maintenance.paused to true (docs/lifecycle.md, Changes): the
operator writes no workload change and replaces no member; a rollout Kubernetes already
started continues; routing changes still apply. The fleet reports MaintenancePaused, and is
Blocked with that reason (the CelldFleetBlocked alert leaves paused fleets out).`
	if !pause {
		use, short, long = "resume FLEET", "Resume a paused fleet: clear spec.maintenance.paused", `Resume a paused fleet by setting spec.maintenance.paused to false: the operator applies the
fleet's spec again, and a template change made while paused rolls one member at a time. A
stopped fleet (its StatefulSet scaled to 0 while paused) returns every member on its own disk
at the declared count in one step; kubectl celld start does the same and can set a new image
in the same change.`
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long,
		Args:              fleetArg,
		ValidArgsFunction: o.completeFleets,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := w.validate(); err != nil {
				return err
			}
			c, ns, err := o.setup()
			if err != nil {
				return err
			}
			snap, err := ReadSnapshot(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			st := BuildStatus(snap, o.Now())
			f := snap.Fleet
			if st.Paused == pause {
				fmt.Fprintf(o.Streams.Out, "CelldFleet %s/%s is already %s: nothing to do.\n", ns, f.Name, map[bool]string{true: "paused", false: "not paused"}[pause])
				return nil
			}
			var p plan
			patch := fleetPatch(map[string]any{"maintenance": map[string]any{"paused": pause}})
			if pause {
				p.what = []string{
					fmt.Sprintf("Pause CelldFleet %s/%s.", ns, f.Name),
					"The operator stops writing the workload and replacing members; a rollout Kubernetes already started",
					"continues; routing changes still apply. The fleet reports MaintenancePaused until resumed.",
				}
				p.steps = []step{o.patchFleetStep(c, f, patch, "paused", nil)}
				p.after = []string{fmt.Sprintf("Resume with: kubectl celld resume %s -n %s", f.Name, ns)}
			} else {
				p.what = []string{fmt.Sprintf("Resume CelldFleet %s/%s.", ns, f.Name)}
				if st.Stopped {
					p.what = append(p.what, fmt.Sprintf("The fleet is stopped: every member returns on its own disk at the declared count (%d) in one step.", st.Replicas.Declared))
				} else {
					p.what = append(p.what, "The operator applies the fleet's spec again; a template change made while paused rolls one member at a time.")
				}
				p.steps = []step{o.patchFleetStep(c, f, patch, "resumed", nil)}
			}
			return o.execute(cmd.Context(), w, p)
		},
	}
	w.add(cmd)
	return cmd
}

func newStopCommand(o *Options) *cobra.Command {
	w := &writeFlags{}
	cmd := &cobra.Command{
		Use:   "stop FLEET",
		Short: "Full stop: pause the fleet, then scale its StatefulSet to 0",
		Long: `Stop every member of a StatefulSet fleet, as docs/lifecycle.md's "Full stop" describes: pause
the fleet, wait until the operator reports MaintenancePaused (so it no longer writes the
workload), then scale the StatefulSet to 0. Every claim is kept. kubectl celld start then sets
an optional new image and unpauses in one change, and every member returns on its own disk at
the declared count in one step.

A Bucket fleet of the Deployment layout has no documented full stop; stop refuses it.`,
		Args:              fleetArg,
		ValidArgsFunction: o.completeFleets,
		RunE:              o.runWrite(w, func(c Clients, snap *Snapshot) (plan, error) { return o.stopPlan(c, snap, w.timeout) }),
	}
	w.add(cmd)
	cmd.Flags().DurationVar(&w.timeout, "timeout", 2*time.Minute, "How long to wait for the operator to report the pause before scaling")
	return cmd
}

func (o *Options) stopPlan(c Clients, snap *Snapshot, timeout time.Duration) (plan, error) {
	f := snap.Fleet
	if !f.RunsAsStatefulSet() {
		return plan{}, fmt.Errorf("CelldFleet %s/%s runs as a Deployment (Bucket profile, Deployment layout): docs/lifecycle.md documents a full stop only for StatefulSet fleets, so kubectl celld stop does not stop it; pause it with kubectl celld pause", f.Namespace, f.Name)
	}
	if snap.StatefulSet == nil {
		return plan{}, fmt.Errorf("CelldFleet %s/%s has no StatefulSet to scale (not created yet, or unreadable)", f.Namespace, f.Name)
	}
	st := BuildStatus(snap, o.Now())
	if st.Stopped {
		fmt.Fprintf(o.Streams.Out, "CelldFleet %s/%s is already stopped (paused, StatefulSet at 0): nothing to do.\n", f.Namespace, f.Name)
		return plan{}, nil
	}
	grace := int32(v1.DefaultTerminationGraceSeconds)
	if f.Spec.Lifecycle != nil && f.Spec.Lifecycle.TerminationGraceSeconds != 0 {
		grace = f.Spec.Lifecycle.TerminationGraceSeconds
	}
	disks := "Bucket fleet: every acknowledged write is in the bucket."
	if f.Spec.Profile == v1.ProfilePersistentFleet && st.Replicas.Applied > 0 {
		disks = fmt.Sprintf("Every claim (%s .. %s) is kept.", v1.ClaimName(f.Name, 0), v1.ClaimName(f.Name, st.Replicas.Applied-1))
	}
	p := plan{what: []string{
		fmt.Sprintf("Full stop of CelldFleet %s/%s (docs/lifecycle.md, Full stop):", f.Namespace, f.Name),
		"  1. pause the fleet: the operator stops writing the workload and replacing members;",
		"  2. wait until the operator reports MaintenancePaused for that change;",
		fmt.Sprintf("  3. scale StatefulSet %s from %d to 0: every member stops (SIGTERM, up to %ds each).", f.Name, st.Replicas.Applied, grace),
		disks,
		"The fleet serves nothing until it is started again (CelldFleetUnavailable fires after 5 minutes).",
	}}
	var generation int64
	if !st.Paused {
		patch := fleetPatch(map[string]any{"maintenance": map[string]any{"paused": true}})
		p.steps = append(p.steps, o.patchFleetStep(c, f, patch, "paused", &generation))
	} else {
		generation = f.Generation
	}
	p.steps = append(p.steps,
		step{
			wait:    true,
			kubectl: fmt.Sprintf("wait until CelldFleet %s reports MaintenancePaused=True for its latest generation", f.Name),
			run: func(ctx context.Context, _ bool) error {
				return waitPaused(ctx, c, f.Namespace, f.Name, generation, timeout)
			},
		},
		step{
			kubectl: fmt.Sprintf("kubectl -n %s scale statefulset %s --replicas=0", f.Namespace, f.Name),
			run: func(ctx context.Context, dryRun bool) error {
				opts := metav1.PatchOptions{FieldManager: FieldManager}
				if dryRun {
					opts.DryRun = []string{metav1.DryRunAll}
				}
				_, err := c.Kube.AppsV1().StatefulSets(f.Namespace).Patch(ctx, f.Name, types.MergePatchType,
					[]byte(`{"spec":{"replicas":0}}`), opts, "scale")
				if err != nil {
					return fmt.Errorf("scale StatefulSet %s/%s to 0: %s", f.Namespace, f.Name, explain(err))
				}
				if !dryRun {
					fmt.Fprintf(o.Streams.Out, "statefulset %s/%s scaled to 0\n", f.Namespace, f.Name)
				}
				return nil
			},
		})
	p.after = []string{fmt.Sprintf("Start again with: kubectl celld start %s -n %s [--image IMAGE]", f.Name, f.Namespace)}
	return p, nil
}

// waitPaused waits until the fleet's status describes generation (or later) with
// MaintenancePaused=True: from then on the operator writes no workload change, so scaling the
// StatefulSet by hand is not undone.
func waitPaused(ctx context.Context, c Clients, ns, name string, generation int64, timeout time.Duration) error {
	last := "no status yet"
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		f, err := getFleet(ctx, c, ns, name)
		if err != nil {
			return false, err
		}
		if f.Spec.Maintenance == nil || !f.Spec.Maintenance.Paused {
			return false, fmt.Errorf("CelldFleet %s/%s was unpaused while waiting: not scaling its StatefulSet", ns, name)
		}
		cnd := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionMaintenancePaused)
		if cnd != nil {
			last = fmt.Sprintf("MaintenancePaused=%s for generation %d", cnd.Status, f.Status.ObservedGeneration)
		}
		return f.Status.ObservedGeneration >= generation && cnd != nil && cnd.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		return fmt.Errorf("the operator did not report the pause of %s/%s within %s (%s); the StatefulSet was not scaled: %w", ns, name, timeout, last, err)
	}
	return nil
}

func newStartCommand(o *Options) *cobra.Command {
	w := &writeFlags{}
	var image string
	cmd := &cobra.Command{
		Use:   "start FLEET",
		Short: "Start a stopped fleet: unpause, with an optional new image, in one change",
		Long: `Start a fleet stopped with kubectl celld stop (docs/lifecycle.md, Full stop): set the new image
(--image, optional) and unpause in one change. Every member returns on its own disk at the
declared count in one step.`,
		Args:              fleetArg,
		ValidArgsFunction: o.completeFleets,
		RunE:              o.runWrite(w, func(c Clients, snap *Snapshot) (plan, error) { return o.startPlan(c, snap, image) }),
	}
	cmd.Flags().StringVar(&image, "image", "", "A new spec.runtimeImage (REGISTRY/PATH@sha256:DIGEST) set in the same change")
	w.add(cmd)
	return cmd
}

func (o *Options) startPlan(c Clients, snap *Snapshot, image string) (plan, error) {
	f := snap.Fleet
	st := BuildStatus(snap, o.Now())
	if !st.Paused {
		return plan{}, fmt.Errorf("CelldFleet %s/%s is neither stopped nor paused: nothing to start", f.Namespace, f.Name)
	}
	spec := map[string]any{"maintenance": map[string]any{"paused": false}}
	what := []string{fmt.Sprintf("Start CelldFleet %s/%s: unpause it%s in one change.", f.Namespace, f.Name, map[bool]string{true: " and set the new image", false: ""}[image != ""])}
	if image != "" {
		if image == f.Spec.RuntimeImage {
			return plan{}, fmt.Errorf("--image is already the fleet's spec.runtimeImage")
		}
		spec["runtimeImage"] = image
		what = append(what, fmt.Sprintf("Image: %s -> %s.", f.Spec.RuntimeImage, image))
	}
	if st.Stopped {
		what = append(what, fmt.Sprintf("Every member returns on its own disk at the declared count (%d) in one step.", st.Replicas.Declared))
	} else {
		what = append(what, "The fleet is paused but not stopped: the operator applies its spec again, and a template change rolls one member at a time.")
	}
	return plan{
		what:  what,
		steps: []step{o.patchFleetStep(c, f, fleetPatch(spec), "started", nil)},
		after: []string{fmt.Sprintf("Follow it with: kubectl celld status %s -n %s --watch", f.Name, f.Namespace)},
	}, nil
}
