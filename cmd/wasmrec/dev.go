package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/host/controlplane"
	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/demo"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/plugin/objects"
)

//go:embed dev.yaml
var devConfig []byte

type devOptions struct {
	hostOptions
	binDir        string
	pluginsDir    string
	kubeconfigOut string
	churn         time.Duration
	duration      time.Duration
}

func newDevCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start a local control plane and run the example plugins on it",
		Long: `dev starts etcd and kube-apiserver from bin/ (built by 'make controlplane'), installs the
example App CRD, creates objects for every example plugin and runs them: app (Go) and app-c (C)
keep a ConfigMap and a Service per App, rollout stamps a config hash on a Deployment when its
ConfigMap changes, failing fails on purpose so its retries show the backoff. Every few seconds
dev edits something and the log shows the plugins answering. Ctrl-C stops it; the control plane
and its data go with it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), stdout, stderr) },
	}
	f := cmd.Flags()
	f.StringVar(&o.binDir, "bin-dir", "", "directory holding etcd and kube-apiserver (default $KUBEBUILDER_ASSETS, else the nearest bin/ above the working directory)")
	f.StringVar(&o.pluginsDir, "plugins-dir", "", "directory holding the example plugins (default plugins/ beside etcd and kube-apiserver)")
	f.StringVar(&o.kubeconfigOut, "kubeconfig-out", filepath.Join(os.TempDir(), "wasmrec-dev.kubeconfig"), "where to write a kubeconfig for the local control plane")
	f.DurationVar(&o.churn, "churn-interval", 4*time.Second, "how often to edit something (0 turns it off)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0 runs until interrupted)")
	o.addFlags(cmd)
	return cmd
}

func (o *devOptions) run(ctx context.Context, stdout, stderr io.Writer) (err error) {
	log := o.logger(stderr)
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	binDir, err := controlplane.FindBinDir(o.binDir)
	if err != nil {
		return err
	}
	if o.pluginsDir == "" {
		o.pluginsDir = filepath.Join(binDir, "plugins")
	}
	var hc plugin.HostConfig
	if err := yaml.UnmarshalStrict(devConfig, &hc); err != nil {
		return fmt.Errorf("the built-in dev config: %w", err)
	}
	for i := range hc.Plugins {
		hc.Plugins[i].Module = filepath.Join(o.pluginsDir, hc.Plugins[i].Module)
		if _, err := os.Stat(hc.Plugins[i].Module); err != nil {
			return fmt.Errorf("plugin %q: %w: run `make plugins` to build the example plugins", hc.Plugins[i].Name, err)
		}
	}

	fmt.Fprintln(stdout, "starting etcd and kube-apiserver (the first start takes a few seconds)...")
	cp, err := controlplane.Start(controlplane.Options{BinDir: binDir, Verbose: o.verbose > 1})
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
	pluginCRDs, err := crd.Parse(objects.CRD)
	if err == nil {
		err = crd.Install(ctx, cp.Config, pluginCRDs, 0)
	}
	if err != nil {
		return err
	}
	if err := demo.SeedObjects(ctx, cp.Config); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created Apps %v in %q and %q, Deployment %s/web, ConfigMap %s/flaky\n", demo.AppNames, demo.Namespace, demo.NamespaceC, demo.Namespace, demo.Namespace)
	var extra []manager.Runnable
	if o.churn > 0 {
		extra = append(extra, &demo.Churn{Config: cp.Config, Interval: o.churn, Log: log.WithName("churn")})
	}
	fmt.Fprintf(stdout, "running plugins from %s; Ctrl-C stops\n", o.pluginsDir)
	o.pluginObjects = true // dev runs the Plugin objects made on its control plane
	return runHost(ctx, cp.Config, &hc, &o.hostOptions, log, extra...)
}
