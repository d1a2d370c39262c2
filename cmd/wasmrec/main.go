package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wasmrec:", err)
		os.Exit(1)
	}
}

// run is the whole command, testable without a process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:           "wasmrec",
		Short:         "Run Kubernetes controllers whose Reconcile is a WebAssembly module",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newDevCommand(stdout, stderr), newRunCommand(stdout, stderr), newInspectCommand(stdout), newPushCommand(stdout), newPullCommand(stdout), newVersionCommand(stdout))
	return root.ExecuteContext(ctx)
}
