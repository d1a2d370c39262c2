package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := &stillRunning{}
	ctx = context.WithValue(ctx, stillRunningKey{}, running)
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		first := time.Now()
		cancel()
		// The first signal asked for a graceful stop; a second one means now. One that comes
		// within half a second is the same request twice (timeout(1) and shells signal both the
		// process and its group).
		for second := range signals {
			if time.Since(first) < 500*time.Millisecond {
				continue
			}
			fmt.Fprintf(os.Stderr, "wasmrec: second signal (%s): exiting at once; %s\n", second, running.describe())
			os.Exit(128 + int(second.(syscall.Signal)))
		}
	}()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wasmrec:", err)
		os.Exit(1)
	}
}

// stillRunning says what a command is still doing, for the message of a second signal.
type stillRunning struct {
	fn atomic.Pointer[func() string]
}

type stillRunningKey struct{}

// setStillRunning makes describe what a second signal reports, for the command running in ctx.
func setStillRunning(ctx context.Context, describe func() string) {
	if r, ok := ctx.Value(stillRunningKey{}).(*stillRunning); ok {
		r.fn.Store(&describe)
	}
}

func (r *stillRunning) describe() string {
	if f := r.fn.Load(); f != nil {
		return (*f)()
	}
	return "nothing was running"
}

// run is the whole command, testable without a process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:           "wasmrec",
		Short:         "Run Kubernetes controllers whose Reconcile is a WebAssembly module",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       currentBuild().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newNewCommand(stdout), newBuildCommand(stdout, stderr), newTestCommand(stdout, stderr), newExploreCommand(stdout, stderr), newDevCommand(stdout, stderr), newRunCommand(stdout, stderr), newInspectCommand(stdout), newPushCommand(stdout), newPullCommand(stdout), newSignCommand(stdout), newVerifyCommand(stdout), newKeygenCommand(stdout), newRBACCommand(stdout), newRolloutCommand(stdout), newReplayCommand(stdout), newVersionCommand(stdout))
	return root.ExecuteContext(ctx)
}
