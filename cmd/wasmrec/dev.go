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
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/host/controlplane"
	"github.com/wasmrec/wasmrec/host/demo"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

//go:embed dev.yaml
var devConfig []byte

type devOptions struct {
	hostOptions
	binDir        string
	pluginsDir    string
	kubeconfigOut string
	kubeconfig    string // an existing cluster's: no control plane of dev's own
	plugins       []string
	examples      bool
	churn         time.Duration
	duration      time.Duration
	// changed says whether a flag was given on the command line.
	changed func(flag string) bool
}

func newDevCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start a local control plane and run your plugins, or the example ones, on it",
		Long: `dev starts a small local cluster: etcd, kube-apiserver and kube-controller-manager (its garbage
collector, namespace and ServiceAccount controllers; no nodes, scheduler or workload
controllers), found in --bin-dir, $KUBEBUILDER_ASSETS, beside the wasmrec binary, or in a bin/
above the working directory ('make install' and 'make controlplane' put them there), and writes
a kubeconfig for it. kube-controller-manager logs to a file beside that kubeconfig.

With --plugin, it runs your plugins: a folder is built (as 'wasmrec build' does) and built again
whenever its sources change, and the host swaps to the new module without a restart; a .wasm file
is run as it is, and swapped when it changes. Each runs as a ClusterPlugin object (kubectl get
clusterplugins shows its state). A folder's host.yaml gives the plugin's grant (else it gets what its manifest
asks for) and applies again when it changes; its crds/*.yaml are installed and its samples/*.yaml
applied, at start and when they change.

Without --plugin, it runs the example plugins on objects it makes: app (Go) and app-c (C) keep a
ConfigMap and a Service per App, rollout stamps a config hash on a Deployment when its ConfigMap
changes, failing fails on purpose so its retries show the backoff; every few seconds dev edits
something and the log shows the plugins answering.

Ctrl-C stops it; the control plane and its data go with it.

With --kubeconfig FILE, dev starts no control plane: it runs your plugins (--plugin is needed)
against that file's cluster, as its current context's user, each held to its grant by the host.
There dev installs each folder's crds/*.yaml (creating or updating those CRDs) and applies its
samples/*.yaml (server-side apply as the field manager wasmrec-dev; a sample whose fields
another manager owns is reported, not forced), when they change too. It makes no Plugin
objects, ServiceAccounts, RBAC or namespaces and installs no Plugin CRDs: the plugins run in
dev's process, and a host.yaml change needs a restart. Ctrl-C stops the plugins and leaves the
cluster as it is: what dev installed or applied stays. dev reads the file named, not $KUBECONFIG.`,
		Example: `  # Run the plugin in the working directory, rebuilding it when its sources change:
  wasmrec dev --plugin .

  # Two plugins, one a built module:
  wasmrec dev --plugin ./hello --plugin ./other/other.wasm

  # The example plugins, for a minute:
  wasmrec dev --duration 1m

  # A control plane alone, for replicas of 'wasmrec run --share-plugins' you start yourself:
  wasmrec dev --examples=false --plugin-objects=false

  # The plugin in the working directory, on a cluster you already run (kind, a test cluster):
  wasmrec dev --kubeconfig ~/.kube/config --plugin .`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.changed = cmd.Flags().Changed
			return o.run(cmd.Context(), stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.binDir, "bin-dir", "", "directory holding etcd, kube-apiserver and kube-controller-manager (default $KUBEBUILDER_ASSETS, else the wasmrec binary's directory, else the nearest bin/ above the working directory)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "run the --plugin plugins against this kubeconfig's cluster (its current context) instead of starting a control plane; $KUBECONFIG is not read")
	f.StringArrayVar(&o.plugins, "plugin", nil, "a plugin's folder or .wasm file to run (repeat for more); without it, dev runs the example plugins")
	f.BoolVar(&o.examples, "examples", true, "without --plugin, run the example plugins (false: the control plane alone, and a host for plugin objects unless --plugin-objects=false)")
	f.StringVar(&o.pluginsDir, "plugins-dir", "", "directory holding the example plugins (default plugins/ beside etcd, kube-apiserver and kube-controller-manager)")
	f.StringVar(&o.kubeconfigOut, "kubeconfig-out", "", "where to write a kubeconfig for the local control plane (default wasmrec/dev.kubeconfig in the user's cache directory)")
	f.BoolVar(&o.pluginObjects, "plugin-objects", true, "run the Plugin and ClusterPlugin objects made on the control plane (false leaves them to hosts you run against it, such as replicas of 'wasmrec run --share-plugins'; --plugin needs it)")
	f.DurationVar(&o.churn, "churn-interval", 4*time.Second, "how often the example run edits something (0 turns it off)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0 runs until interrupted)")
	o.addFlags(cmd, false)
	return cmd
}

func (o *devOptions) run(ctx context.Context, stdout, stderr io.Writer) (err error) {
	if err := o.checkFlags(); err != nil {
		return err
	}
	if err := o.checkDevFlags(); err != nil {
		return err
	}
	log := o.logger(stderr)
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	if o.kubeconfig != "" {
		return o.runOnCluster(ctx, stdout, stderr, log)
	}
	binDir, err := controlplane.FindBinDir(o.binDir, controlplane.AllBinaries...)
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

	kcmLog := controllerManagerLog(o.kubeconfigOut)
	fmt.Fprintln(stdout, "starting etcd, kube-apiserver and kube-controller-manager (the first start takes a few seconds)...")
	started := time.Now()
	cp, err := controlplane.Start(controlplane.Options{BinDir: binDir, Verbose: o.verbose > 1, ControllerManager: true, ControllerManagerLog: kcmLog})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	if err := os.WriteFile(o.kubeconfigOut, cp.Kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	fmt.Fprintf(stdout, "control plane up at %s in %s (kube-controller-manager logs to %s); for kubectl:\n  export KUBECONFIG=%s\n",
		cp.Config.Host, time.Since(started).Round(100*time.Millisecond), kcmLog, o.kubeconfigOut)
	// A dev whose garbage collector is gone would mislead: it stops, saying why.
	kcm := controllerManagerWatch{cp}

	// The Plugin and ClusterPlugin CRDs, and the admission policy that lets no one grant a
	// plugin more than they hold.
	if err := pluginobjects.Install(ctx, cp.Config); err != nil {
		return err
	}
	// The control plane is the developer's own: plugin objects may load modules from anywhere,
	// and resync as often as a plugin's host config may (the floor guards other tenants).
	hc.PluginObjects.Sources = []string{"/", "oci://"}
	hc.PluginObjects.MinResyncPeriod = &metav1.Duration{Duration: time.Second}
	if o.pluginObjects {
		fmt.Fprintln(stdout, "plugin objects on this control plane may load modules from any file and registry (it is yours; `wasmrec run` takes pluginObjects.sources for anyone else's)")
	}
	if len(mine) > 0 {
		if err := installFolderObjects(ctx, cp.Config, mine, stdout, true); err != nil {
			return err
		}
		for _, dp := range mine {
			if err := applyPluginObject(ctx, cp.Config, dp.config, stdout); err != nil {
				return err
			}
		}
		extra := []manager.Runnable{kcm}
		if r := newDevRebuilder(mine, cp.Config, false, log, stderr); r != nil {
			extra = append(extra, r)
		}
		fmt.Fprintf(stdout, "running plugins %v as ClusterPlugin objects (kubectl get clusterplugins); Ctrl-C stops\n", pluginNames(mine))
		return runHost(ctx, cp.Config, &hc, &o.hostOptions, log, extra...)
	}

	if !o.examples {
		if !o.pluginObjects {
			fmt.Fprintln(stdout, "running no host: the control plane is yours (wasmrec run --kubeconfig ...); Ctrl-C stops")
			return kcm.Start(ctx)
		}
		fmt.Fprintln(stdout, "running the plugins of Plugin and ClusterPlugin objects (kubectl get plugins,clusterplugins -A); Ctrl-C stops")
		return runHost(ctx, cp.Config, &hc, &o.hostOptions, log, kcm)
	}
	if err := demo.InstallCRD(ctx, cp.Config); err != nil {
		return err
	}
	if err := demo.SeedObjects(ctx, cp.Config); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created Apps %v in %q and %q, Deployment %s/web, ConfigMap %s/flaky\n", demo.AppNames, demo.Namespace, demo.NamespaceC, demo.Namespace, demo.Namespace)
	extra := []manager.Runnable{kcm}
	if o.churn > 0 {
		extra = append(extra, &demo.Churn{Config: cp.Config, Interval: o.churn, Log: log.WithName("churn")})
	}
	fmt.Fprintf(stdout, "running plugins from %s; Ctrl-C stops\n", o.pluginsDir)
	return runHost(ctx, cp.Config, &hc, &o.hostOptions, log, extra...)
}

// checkDevFlags refuses combinations dev cannot honour, before anything starts.
func (o *devOptions) checkDevFlags() error {
	if o.kubeconfig == "" {
		if len(o.plugins) > 0 && !o.pluginObjects {
			return errors.New("--plugin runs your plugins as ClusterPlugin objects: it needs --plugin-objects (the default)")
		}
		return nil
	}
	if len(o.plugins) == 0 {
		return errors.New("--kubeconfig runs your plugins (--plugin) on that cluster; the example plugins and other Plugin objects run only on dev's own control plane (drop --kubeconfig)")
	}
	// Flags of dev's own control plane, its example plugins and its plugin objects.
	for _, f := range []string{"bin-dir", "kubeconfig-out", "plugins-dir", "examples", "plugin-objects", "churn-interval"} {
		if o.changed != nil && o.changed(f) {
			return fmt.Errorf("--%s is for dev's own control plane: with --kubeconfig, dev starts none and runs only your --plugin plugins; drop one of the two", f)
		}
	}
	return nil
}

// runOnCluster runs the --plugin plugins against the cluster of --kubeconfig, as a host
// config's plugins: no Plugin objects, ServiceAccounts or RBAC are made there, and nothing is
// deleted on exit.
func (o *devOptions) runOnCluster(ctx context.Context, stdout, stderr io.Writer, log logr.Logger) error {
	cfg, err := clusterConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	mine, err := loadDevPlugins(ctx, o.plugins, stdout)
	if err != nil {
		return err
	}
	hc := plugin.HostConfig{}
	for _, dp := range mine {
		hc.Plugins = append(hc.Plugins, dp.config)
	}
	if err := hc.Validate(); err != nil {
		return err
	}
	if err := installFolderObjects(ctx, cfg, mine, stdout, false); err != nil {
		return err
	}
	var extra []manager.Runnable
	if r := newDevRebuilder(mine, cfg, true, log, stderr); r != nil {
		extra = append(extra, r)
	}
	o.pluginObjects = false // the cluster's plugin objects are another host's
	fmt.Fprintf(stdout, "running plugins %v against %s (from %s); Ctrl-C stops them and leaves the cluster as it is\n", pluginNames(mine), cfg.Host, o.kubeconfig)
	return runHost(ctx, cfg, &hc, &o.hostOptions, log, extra...)
}

// clusterConfig reads the kubeconfig at path alone ($KUBECONFIG is not merged in), and checks
// that its cluster answers. Errors name the file and the server.
func clusterConfig(path string) (*rest.Config, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		return nil, fmt.Errorf("the cluster of --kubeconfig %s, at %s, does not answer: %w: is it running, and is this the kubeconfig you meant?", path, cfg.Host, err)
	}
	return cfg, nil
}

// controllerManagerLog is where dev's kube-controller-manager logs: beside the kubeconfig, named
// after it, so that two devs with kubeconfigs of their own do not share it.
func controllerManagerLog(kubeconfig string) string {
	return strings.TrimSuffix(kubeconfig, filepath.Ext(kubeconfig)) + ".kube-controller-manager.log"
}

// controllerManagerWatch stops dev when its kube-controller-manager exits: without its garbage
// collector and namespace controller, the cluster would no longer behave as one.
type controllerManagerWatch struct{ cp *controlplane.ControlPlane }

func (w controllerManagerWatch) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-w.cp.ControllerManagerExited():
		return fmt.Errorf("dev stops: nothing collects garbage or deletes namespaces any more: %w", w.cp.ControllerManagerErr())
	}
}

func (controllerManagerWatch) Name() string { return "kube-controller-manager" }

// NeedLeaderElection is false: it watches a process, not the cluster.
func (controllerManagerWatch) NeedLeaderElection() bool { return false }

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
