package celldctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"golang.org/x/term"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func newStatusCommand(o *Options) *cobra.Command {
	var output string
	var watchFlag, normalize bool
	cmd := &cobra.Command{
		Use:   "status FLEET",
		Short: "Show a fleet on one screen (reads only)",
		Long: `Show a CelldFleet on one screen: its profile and layout, member counts, the Ready
condition, how long it has been Blocked, the rollout in progress, a table of members (Pod,
phase, node, zone, revision, claim, disk, application version, last self-healing action),
the reservation, routing and mesh, the capacity decision and its history, the fleet's
previews and the last warning events.

status sends only get, list and watch requests. With the view role it shows what it may
read and says what it could not read, and why.`,
		Example: `  kubectl celld status persistent -n celld-demo
  kubectl celld status persistent -n celld-demo --watch
  kubectl celld status persistent -n celld-demo -o yaml`,
		Args:              fleetArg,
		ValidArgsFunction: o.completeFleets,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", "yaml", "json":
			default:
				return fmt.Errorf("--output must be yaml or json, not %q", output)
			}
			c, ns, err := o.setup()
			if err != nil {
				return err
			}
			if normalize {
				o.normalize = true
			}
			if !watchFlag {
				return o.printStatus(cmd.Context(), c, ns, args[0], output, false)
			}
			return o.watchStatus(cmd.Context(), c, ns, args[0], output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Print the status model as yaml or json instead of the screen")
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", false, "Redraw the screen whenever the fleet or one of its Pods changes")
	// Every time printed as one fixed instant: screens taken at different moments compare (the
	// e2e golden file). Hidden: it is for comparing output, not for reading a fleet.
	cmd.Flags().BoolVar(&normalize, "normalize-times", false, "Print every time as one fixed instant, so that screens compare")
	_ = cmd.Flags().MarkHidden("normalize-times")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *Options) printStatus(ctx context.Context, c Clients, ns, name, output string, redraw bool) error {
	snap, err := ReadSnapshot(ctx, c, ns, name)
	if err != nil {
		return err
	}
	return o.writeSnapshot(snap, output, redraw)
}

func (o *Options) writeSnapshot(snap *Snapshot, output string, redraw bool) error {
	st := BuildStatus(snap, o.Now())
	if o.normalize {
		st.Normalize()
	}
	return o.writeStatus(o.Streams.Out, st, output, redraw)
}

func (o *Options) writeStatus(w io.Writer, st *Status, output string, redraw bool) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(st)
		if err != nil {
			return err
		}
		if redraw {
			fmt.Fprintln(w, "---")
		}
		_, err = w.Write(b)
		return err
	}
	if redraw {
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			fmt.Fprint(w, "\033[H\033[2J") // clear the terminal, as watch(1) does
		} else {
			fmt.Fprintf(w, "\n--- %s\n", o.Now().UTC().Format(time.RFC3339))
		}
	}
	return Render(w, st)
}

// watchStatus redraws the screen whenever the fleet or one of its Pods changes, at most twice
// a second, until ctx ends (Ctrl-C). It uses watches only: no polling, no writes.
func (o *Options) watchStatus(ctx context.Context, c Clients, ns, name, output string) error {
	snap, err := ReadSnapshot(ctx, c, ns, name)
	if err != nil {
		return err
	}
	if err := o.writeSnapshot(snap, output, false); err != nil {
		return err
	}
	// The first watch starts at the fleet the screen shows, so no change after it is missed.
	rv, uid := snap.Fleet.ResourceVersion, snap.Fleet.UID
	for first := true; ; first = false {
		if !first { // the API server closed a watch: redraw what changed meanwhile, watch again
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second): // never spin on a watch that keeps closing
			}
			f, err := getFleet(ctx, c, ns, name)
			if err == nil {
				rv, uid = f.ResourceVersion, f.UID
				err = o.printStatus(ctx, c, ns, name, output, true)
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		fw, err := c.Dynamic.Resource(fleetsGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
		if err != nil {
			return fmt.Errorf("watch CelldFleet %s/%s: %s", ns, name, explain(err))
		}
		pw, err := c.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID + "=" + string(uid)})
		if err != nil {
			fw.Stop()
			return fmt.Errorf("watch the Pods of %s/%s: %s", ns, name, explain(err))
		}
		err = o.redrawOnChange(ctx, c, ns, name, output, fw, pw)
		fw.Stop()
		pw.Stop()
		if err != nil || ctx.Err() != nil {
			return err
		}
	}
}

func (o *Options) redrawOnChange(ctx context.Context, c Clients, ns, name, output string, ws ...watch.Interface) error {
	changed := make(chan struct{}, 1)
	closed := make(chan struct{}, len(ws))
	for _, w := range ws {
		go func() {
			for range w.ResultChan() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
			closed <- struct{}{}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-closed:
			return nil
		case <-changed:
			select { // let a burst of changes settle into one redraw
			case <-ctx.Done():
				return nil
			case <-time.After(500 * time.Millisecond):
			}
			if err := o.printStatus(ctx, c, ns, name, output, true); err != nil {
				if ctx.Err() != nil { // interrupted while reading: not an error
					return nil
				}
				return err
			}
		}
	}
}
