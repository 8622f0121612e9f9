// Package celldctl is the kubectl-celld plugin: a fleet's status on one screen and the day-2
// operations docs/lifecycle.md describes, written exactly as the docs tell users to write them.
//
// The status model is a pure function of what was read (BuildStatus of a Snapshot), rendered
// by Render; the write commands print what will happen and ask before writing; report writes
// a support bundle with every Secret value and secret reference redacted.
package celldctl

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Options are what every command shares: the kubeconfig flags, the streams and the clock.
type Options struct {
	Flags   *genericclioptions.ConfigFlags
	Streams genericiooptions.IOStreams
	// Now is the clock; tests fix it.
	Now func() time.Time
	// NewClients builds the API clients from Flags; tests substitute fakes.
	NewClients func() (Clients, error)

	normalize bool
}

// NewRootCommand is the kubectl-celld command with kubeconfig flags of its own.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return NewRootCommandWithFlags(streams, genericclioptions.NewConfigFlags(true))
}

// NewRootCommandWithFlags builds the command on flags the caller made, for example with a
// WrapConfigFn that records every request (the e2e proof that status only reads).
func NewRootCommandWithFlags(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	o := &Options{Flags: flags, Streams: streams, Now: time.Now}
	o.NewClients = o.restClients
	return NewRootCommandWithOptions(o)
}

// NewRootCommandWithOptions builds the command on o.
func NewRootCommandWithOptions(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-celld",
		Short: "Show a CelldFleet at a glance and run its day-2 operations",
		Long: `kubectl celld shows a CelldFleet on one screen and runs the day-2 operations
docs/lifecycle.md describes: a rolling restart, pause and resume, a full stop and start,
and a support bundle. Every write command prints what will happen and asks before writing.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl celld"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(o.Streams.In)
	root.SetOut(o.Streams.Out)
	root.SetErr(o.Streams.ErrOut)
	o.Flags.AddFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc("namespace", o.completeNamespaces)

	root.AddCommand(
		newStatusCommand(o),
		newRestartCommand(o),
		newPauseCommand(o, true),
		newPauseCommand(o, false),
		newStopCommand(o),
		newStartCommand(o),
		newReplaceMemberCommand(o),
		newReportCommand(o),
	)
	return root
}

func (o *Options) restClients() (Clients, error) {
	cfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return Clients{}, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Kube: kube, Dynamic: dyn}, nil
}

// namespace is --namespace, or the kubeconfig context's namespace.
func (o *Options) namespace() (string, error) {
	ns, _, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// setup returns the clients and namespace of a command.
func (o *Options) setup() (Clients, string, error) {
	ns, err := o.namespace()
	if err != nil {
		return Clients{}, "", err
	}
	c, err := o.NewClients()
	return c, ns, err
}

// completeFleets completes a FLEET argument with the CelldFleets of the namespace.
func (o *Options) completeFleets(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, ns, err := o.setup()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	list, err := c.Dynamic.Resource(fleetsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, f := range list.Items {
		if strings.HasPrefix(f.GetName(), toComplete) {
			out = append(out, f.GetName())
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

func (o *Options) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	c, err := o.NewClients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	list, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, n := range list.Items {
		if strings.HasPrefix(n.Name, toComplete) {
			out = append(out, n.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// fleetArg is the Args rule of commands that take one FLEET.
func fleetArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s needs exactly one FLEET argument, the CelldFleet's name (got %d)", cmd.Name(), len(args))
	}
	return nil
}
