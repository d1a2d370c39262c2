package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/host/controlplane"
	"github.com/wasmrec/wasmrec/host/demo"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginapi"
)

//go:embed dev.yaml
var devConfig []byte

type devOptions struct {
	hostOptions
	binDir        string
	pluginsDir    string
	kubeconfigOut string
	plugins       []string
	examples      bool
	churn         time.Duration
	duration      time.Duration
}

func newDevCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start a local control plane and run your plugins, or the example ones, on it",
		Long: `dev starts etcd and kube-apiserver (found in --bin-dir, $KUBEBUILDER_ASSETS, beside the wasmrec
binary, or in a bin/ above the working directory; 'make install' and 'make controlplane' put them
there) and writes a kubeconfig for it.

With --plugin, it runs your plugins: a folder is built (as 'wasmrec build' does) and built again
whenever its sources change, and the host swaps to the new module without a restart; a .wasm file
is run as it is, and swapped when it changes. Each runs as a Plugin object (kubectl get plugins
shows its state). A folder's host.yaml gives the plugin's grant (else it gets what its manifest
asks for) and applies again when it changes; its crds/*.yaml are installed and its samples/*.yaml
applied, at start and when they change.

Without --plugin, it runs the example plugins on objects it makes: app (Go) and app-c (C) keep a
ConfigMap and a Service per App, rollout stamps a config hash on a Deployment when its ConfigMap
changes, failing fails on purpose so its retries show the backoff; every few seconds dev edits
something and the log shows the plugins answering.

Ctrl-C stops it; the control plane and its data go with it.`,
		Example: `  # Run the plugin in the working directory, rebuilding it when its sources change:
  wasmrec dev --plugin .

  # Two plugins, one a built module:
  wasmrec dev --plugin ./hello --plugin ./other/other.wasm

  # The example plugins, for a minute:
  wasmrec dev --duration 1m

  # A control plane alone, for replicas of 'wasmrec run --share-plugins' you start yourself:
  wasmrec dev --examples=false --plugin-objects=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), stdout, stderr) },
	}
	f := cmd.Flags()
	f.StringVar(&o.binDir, "bin-dir", "", "directory holding etcd and kube-apiserver (default $KUBEBUILDER_ASSETS, else the wasmrec binary's directory, else the nearest bin/ above the working directory)")
	f.StringArrayVar(&o.plugins, "plugin", nil, "a plugin's folder or .wasm file to run (repeat for more); without it, dev runs the example plugins")
	f.BoolVar(&o.examples, "examples", true, "without --plugin, run the example plugins (false: the control plane alone, and a host for plugin objects unless --plugin-objects=false)")
	f.StringVar(&o.pluginsDir, "plugins-dir", "", "directory holding the example plugins (default plugins/ beside etcd and kube-apiserver)")
	f.StringVar(&o.kubeconfigOut, "kubeconfig-out", "", "where to write a kubeconfig for the local control plane (default wasmrec/dev.kubeconfig in the user's cache directory)")
	f.BoolVar(&o.pluginObjects, "plugin-objects", true, "run the Plugin and ClusterPlugin objects made on the control plane (false leaves them to hosts you run against it, such as replicas of 'wasmrec run --share-plugins'; --plugin needs it)")
	f.DurationVar(&o.churn, "churn-interval", 4*time.Second, "how often the example run edits something (0 turns it off)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0 runs until interrupted)")
	o.addFlags(cmd)
	return cmd
}

func (o *devOptions) run(ctx context.Context, stdout, stderr io.Writer) (err error) {
	if err := o.checkFlags(); err != nil {
		return err
	}
	if len(o.plugins) > 0 && !o.pluginObjects {
		return errors.New("--plugin runs your plugins as ClusterPlugin objects: it needs --plugin-objects (the default)")
	}
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
	var hc plugin.HostConfig
	var mine []*devPlugin
	if len(o.plugins) > 0 {
		if mine, err = loadDevPlugins(ctx, o.plugins, stdout); err != nil {
			return err
		}
		// Checked as a host config would be (names unique, settings valid); they run as Plugin
		// objects, so that a new host.yaml applies without a restart.
		check := plugin.HostConfig{}
		for _, dp := range mine {
			check.Plugins = append(check.Plugins, dp.config)
		}
		if err := check.Validate(); err != nil {
			return err
		}
	} else if o.examples {
		if err := o.examplePlugins(&hc, binDir); err != nil {
			return err
		}
	}
	if o.kubeconfigOut == "" {
		if o.kubeconfigOut, err = defaultKubeconfig(); err != nil {
			return err
		}
	}
	if err := kubeconfigInUse(o.kubeconfigOut); err != nil {
		return err
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
	fmt.Fprintf(stdout, "control plane up at %s; for kubectl:\n  export KUBECONFIG=%s\n", cp.Config.Host, o.kubeconfigOut)

	// The Plugin and ClusterPlugin CRDs, and the admission policy that lets no one grant a
	// plugin more than they hold.
	if err := pluginapi.Install(ctx, cp.Config); err != nil {
		return err
	}
	// The control plane is the developer's own: plugin objects may load modules from anywhere.
	hc.PluginObjects.Sources = []string{"/", "oci://"}
	if o.pluginObjects {
		fmt.Fprintln(stdout, "plugin objects on this control plane may load modules from any file and registry (it is yours; `wasmrec run` takes pluginObjects.sources for anyone else's)")
	}
	if len(mine) > 0 {
		if err := installFolderObjects(ctx, cp.Config, mine, stdout); err != nil {
			return err
		}
		for _, dp := range mine {
			if err := applyPluginObject(ctx, cp.Config, dp.config); err != nil {
				return err
			}
		}
		var watched []*devPlugin
		for _, dp := range mine {
			if dp.dir != "" {
				watched = append(watched, dp)
			}
		}
		var extra []manager.Runnable
		if len(watched) > 0 {
			extra = append(extra, &devRebuilder{plugins: watched, cfg: cp.Config, log: log.WithName("dev"), out: stderr})
		}
		fmt.Fprintf(stdout, "running plugins %v as ClusterPlugin objects (kubectl get clusterplugins); Ctrl-C stops\n", pluginNames(mine))
		return runHost(ctx, cp.Config, &hc, &o.hostOptions, log, extra...)
	}

	if !o.examples {
		if !o.pluginObjects {
			fmt.Fprintln(stdout, "running no host: the control plane is yours (wasmrec run --kubeconfig ...); Ctrl-C stops")
			<-ctx.Done()
			return nil
		}
		fmt.Fprintln(stdout, "running the plugins of Plugin and ClusterPlugin objects (kubectl get plugins,clusterplugins -A); Ctrl-C stops")
		return runHost(ctx, cp.Config, &hc, &o.hostOptions, log)
	}
	if err := demo.InstallCRD(ctx, cp.Config); err != nil {
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
	return runHost(ctx, cp.Config, &hc, &o.hostOptions, log, extra...)
}

// examplePlugins fills hc with the example plugins, from the plugins directory.
func (o *devOptions) examplePlugins(hc *plugin.HostConfig, binDir string) error {
	if o.pluginsDir == "" {
		o.pluginsDir = filepath.Join(binDir, "plugins")
	}
	if err := yaml.UnmarshalStrict(devConfig, hc); err != nil {
		return fmt.Errorf("the built-in dev config: %w", err)
	}
	for i := range hc.Plugins {
		hc.Plugins[i].Module = filepath.Join(o.pluginsDir, hc.Plugins[i].Module)
		if _, err := os.Stat(hc.Plugins[i].Module); err != nil {
			return fmt.Errorf("plugin %q: %w: run `make plugins` in the wasmrec checkout to build the example plugins, or run your own with --plugin", hc.Plugins[i].Name, err)
		}
	}
	return nil
}

// kubeconfigInUse refuses to overwrite a kubeconfig whose API server answers: another dev's,
// which everything pointed at it (kubectl, replicas) would silently leave for this one's.
func kubeconfigInUse(path string) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil // none, or not a kubeconfig: nothing to keep
	}
	for _, cluster := range cfg.Clusters {
		u, err := url.Parse(cluster.Server)
		if err != nil || u.Host == "" {
			continue
		}
		conn, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err != nil {
			continue
		}
		conn.Close()
		return fmt.Errorf("%s belongs to a control plane that is still running (%s answers): another 'wasmrec dev'? Stop it, or give this one a kubeconfig of its own with --kubeconfig-out", path, cluster.Server)
	}
	return nil
}

// defaultKubeconfig is wasmrec/dev.kubeconfig in the user's cache directory.
func defaultKubeconfig() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the kubeconfig (%w): set --kubeconfig-out", err)
	}
	dir = filepath.Join(dir, "wasmrec")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return filepath.Join(dir, "dev.kubeconfig"), nil
}
