// Command kubectl-celld is the kubectl plugin of celld-operator: kubectl celld status, restart,
// pause, resume, stop, start, replace-member and report (docs/kubectl-plugin.md). The logic is
// in internal/celldctl.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/celld/celld-operator/internal/celldctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := celldctl.NewRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	args := os.Args[1:]
	// kubectl completes a plugin's arguments by running kubectl_complete-celld (a link to this
	// binary) with the words typed so far: answer as cobra's hidden __complete command.
	if filepath.Base(os.Args[0]) == "kubectl_complete-celld" {
		args = append([]string{"__complete"}, args...)
	}
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
