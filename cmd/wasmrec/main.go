package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := &stillRunning{}
	ctx = context.WithValue(ctx, stillRunningKey{}, running)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cancel()
		// The first signal asked for a graceful stop; the second one means now.
		second := <-signals
		fmt.Fprintf(os.Stderr, "wasmrec: second signal (%s): exiting at once; still running: %s\n", second, running.describe())
		os.Exit(128 + int(second.(syscall.Signal)))
	}()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wasmrec:", err)
		os.Exit(1)
	}
}

// stillRunning names what a command is still running, for the message of a second signal.
type stillRunning struct {
	names atomic.Pointer[func() []string]
}

type stillRunningKey struct{}

// setStillRunning makes names what a second signal reports, for the command running in ctx.
func setStillRunning(ctx context.Context, names func() []string) {
	if r, ok := ctx.Value(stillRunningKey{}).(*stillRunning); ok {
		r.names.Store(&names)
	}
}

func (r *stillRunning) describe() string {
	f := r.names.Load()
	if f == nil {
		return "nothing it can name"
	}
	names := (*f)()
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
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
