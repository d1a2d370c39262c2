package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/wasmrec/wasmrec/host/controlplane"
	"github.com/wasmrec/wasmrec/host/demo"
	"github.com/wasmrec/wasmrec/host/manager"
)

type devOptions struct {
	binDir        string
	kubeconfigOut string
	churn         time.Duration
	duration      time.Duration
	verbose       int
}

func newDevCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start a local control plane and run the example controllers on it",
		Long: `dev starts etcd and kube-apiserver from bin/ (built by 'make controlplane'), installs the
example App CRD, creates a few Apps in the "demo" namespace and runs their controller. Every few
seconds it edits an App or deletes an App's ConfigMap, and the log shows the controller putting
things right. Interrupt it (Ctrl-C) to stop; the control plane and its data go with it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), stdout, stderr) },
	}
	f := cmd.Flags()
	f.StringVar(&o.binDir, "bin-dir", "", "directory holding etcd and kube-apiserver (default $KUBEBUILDER_ASSETS, else the nearest bin/ above the working directory)")
	f.StringVar(&o.kubeconfigOut, "kubeconfig-out", filepath.Join(os.TempDir(), "wasmrec-dev.kubeconfig"), "where to write a kubeconfig for the local control plane")
	f.DurationVar(&o.churn, "churn-interval", 4*time.Second, "how often to edit an App or delete a ConfigMap (0 turns it off)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0 runs until interrupted)")
	f.IntVarP(&o.verbose, "verbose", "v", 0, "log verbosity (1 adds informer and queue detail)")
	return cmd
}

func (o *devOptions) run(ctx context.Context, stdout, stderr io.Writer) (err error) {
	log := logr.FromSlogHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.Level(-o.verbose)}))
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}

	fmt.Fprintln(stdout, "starting etcd and kube-apiserver (the first start takes a few seconds)...")
	cp, err := controlplane.Start(controlplane.Options{BinDir: o.binDir, Verbose: o.verbose > 1})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	if err := os.WriteFile(o.kubeconfigOut, cp.Kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	fmt.Fprintf(stdout, "control plane up at %s; kubeconfig written to %s\n", cp.Config.Host, o.kubeconfigOut)

	if err := demo.InstallCRD(ctx, cp.Config); err != nil {
		return err
	}
	if err := demo.SeedObjects(ctx, cp.Config); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "installed apps.demo.wasmrec.dev and created Apps %v in namespace %q\n", demo.AppNames, demo.Namespace)

	mgr, err := manager.New(cp.Config, manager.Options{Logger: log.WithName("manager")})
	if err != nil {
		return err
	}
	if err := demo.Setup(mgr, log.WithName("app")); err != nil {
		return err
	}
	if o.churn > 0 {
		if err := mgr.Add(&demo.Churn{Config: cp.Config, Interval: o.churn, Log: log.WithName("churn")}); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, "running the App controller; Ctrl-C stops")
	return mgr.Start(ctx)
}
