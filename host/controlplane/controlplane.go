package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Binaries the control plane needs in its BinDir.
var Binaries = []string{"etcd", "kube-apiserver"}

// ControllerManager is the binary Options.ControllerManager runs, from BinDir too.
const ControllerManager = "kube-controller-manager"

// AllBinaries are Binaries and ControllerManager: what a control plane started with
// Options.ControllerManager needs in its BinDir.
var AllBinaries = append(slices.Clone(Binaries), ControllerManager)

// Options configure Start. The zero value is ready to use.
type Options struct {
	// BinDir holds etcd and kube-apiserver, and kube-controller-manager with ControllerManager.
	// Defaults to $KUBEBUILDER_ASSETS, else the wasmrec binary's directory, else the first bin/
	// holding them found walking up from the working directory.
	BinDir string

	// StartTimeout bounds the start of each process. Defaults to 60 seconds.
	StartTimeout time.Duration

	// Verbose copies the processes' output to this process's stdout and stderr.
	Verbose bool

	// WithoutShardedLists leaves the API server's ShardedListAndWatch feature gate off, as
	// clusters have it by default: lists and watches ignore ListOptions.ShardSelector.
	WithoutShardedLists bool

	// ControllerManager also runs kube-controller-manager once the API server serves, with the
	// controllers a cluster without nodes needs (see controllerManagerControllers): garbage
	// collection of owned objects, namespace deletion, ServiceAccounts and their tokens.
	// Defaults to false: etcd and kube-apiserver alone.
	ControllerManager bool

	// ControllerManagerLog is the file kube-controller-manager's output goes to, truncated at
	// start. Defaults to a file in a temporary directory that Stop removes.
	ControllerManagerLog string
}

// binaries is what a control plane started with o needs in its BinDir.
func (o Options) binaries() []string {
	if o.ControllerManager {
		return AllBinaries
	}
	return Binaries
}

// ControlPlane is a running kube-apiserver and etcd, and kube-controller-manager if asked for.
type ControlPlane struct {
	env *envtest.Environment
	kcm *controllerManager // nil without Options.ControllerManager
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Kubeconfig is Config as a kubeconfig file's contents, for kubectl and friends.
	Kubeconfig []byte
}

// Start starts etcd and kube-apiserver on free loopback ports and waits until the API server
// serves; with Options.ControllerManager, then kube-controller-manager, and waits until its
// controllers run.
func Start(opts Options) (*ControlPlane, error) {
	dir, err := FindBinDir(opts.BinDir, opts.binaries()...)
	if err != nil {
		return nil, err
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	no := false
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		UseExistingCluster:       &no,
		ControlPlaneStartTimeout: opts.StartTimeout,
		AttachControlPlaneOutput: opts.Verbose,
	}
	// The API server's alpha sharded list and watch (ListOptions.shardSelector), which sharded
	// plugins use when the API server offers it.
	if !opts.WithoutShardedLists {
		env.ControlPlane.GetAPIServer().Configure().Append("feature-gates", "ShardedListAndWatch=true")
	}
	var kcmDir string
	if opts.ControllerManager {
		if kcmDir, err = prepareControllerManager(env); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		if kcmDir != "" {
			os.RemoveAll(kcmDir)
		}
		return nil, fmt.Errorf("controlplane: starting etcd and kube-apiserver from %s: %w", dir, err)
	}
	cp := &ControlPlane{env: env, Config: cfg, Kubeconfig: env.KubeConfig}
	if opts.ControllerManager {
		if cp.kcm, err = startControllerManager(filepath.Join(dir, ControllerManager), kcmDir, cp, opts); err != nil {
			cp.kcm = nil // stopped already
			return nil, errors.Join(err, cp.Stop())
		}
	}
	return cp, nil
}

// Stop stops kube-controller-manager, the API server and etcd and removes their data.
func (cp *ControlPlane) Stop() error {
	var errs []error
	if cp.kcm != nil {
		errs = append(errs, cp.kcm.stop())
	}
	if err := cp.env.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("controlplane: stopping: %w", err))
	}
	return errors.Join(errs...)
}

// ControllerManagerExited is closed when kube-controller-manager exits before Stop, after which
// ControllerManagerErr says why; nil without Options.ControllerManager.
func (cp *ControlPlane) ControllerManagerExited() <-chan struct{} {
	if cp.kcm == nil {
		return nil
	}
	return cp.kcm.died
}

// ControllerManagerErr is why kube-controller-manager exited before Stop, with where its log is
// and its last lines; nil while it runs, and after Stop.
func (cp *ControlPlane) ControllerManagerErr() error {
	if cp.kcm == nil {
		return nil
	}
	select {
	case <-cp.kcm.died:
		return cp.kcm.exitErr()
	default:
		return nil
	}
}

// FindBinDir returns dir if it holds the binaries (Binaries when none are named), else looks
// where Options.BinDir says. The error names where it looked, what a folder holding some of
// them lacks, and how to build them.
func FindBinDir(dir string, binaries ...string) (string, error) {
	if len(binaries) == 0 {
		binaries = Binaries
	}
	if dir == "" {
		dir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if dir != "" {
		if missing := lacks(dir, binaries); len(missing) > 0 {
			return "", fmt.Errorf("controlplane: %s lacks %s: %s", dir, strings.Join(missing, ", "), remedy(binaries))
		}
		return filepath.Abs(dir)
	}
	var looked []string
	// look returns whether d holds them all, and notes a folder holding some of them.
	look := func(d string) bool {
		missing := lacks(d, binaries)
		if len(missing) > 0 && len(missing) < len(binaries) {
			looked = append(looked, fmt.Sprintf("%s lacks %s", d, strings.Join(missing, ", ")))
		}
		return len(missing) == 0
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err := filepath.EvalSymlinks(exe); err == nil {
			if look(filepath.Dir(exe)) {
				return filepath.Dir(exe), nil // installed side by side (make install)
			}
			if len(looked) == 0 {
				looked = append(looked, filepath.Dir(exe)+" (the wasmrec binary's) holds none")
			}
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if look(filepath.Join(d, "bin")) {
			return filepath.Join(d, "bin"), nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	looked = append(looked, "no bin/ in "+wd+" or above holds them all")
	return "", fmt.Errorf("controlplane: no folder holds %s ($KUBEBUILDER_ASSETS is not set): %s: %s",
		strings.Join(binaries, ", "), strings.Join(looked, "; "), remedy(binaries))
}

// remedy says how to build the binaries.
func remedy(binaries []string) string {
	return fmt.Sprintf("run `make install` in the wasmrec checkout (it installs %s beside the wasmrec binary) or `make controlplane` (into its bin/), or set KUBEBUILDER_ASSETS", strings.Join(binaries, ", "))
}

// lacks lists the binaries dir does not hold as executable files, each with why.
func lacks(dir string, binaries []string) []string {
	var missing []string
	for _, b := range binaries {
		st, err := os.Stat(filepath.Join(dir, b))
		switch {
		case err != nil:
			missing = append(missing, b)
		case st.Mode()&0o111 == 0:
			missing = append(missing, b+" (not executable)")
		}
	}
	return missing
}

// AddUser returns a config for a new user with no permissions beyond what every authenticated
// user has (discovery). Grant it more with RBAC objects.
func (cp *ControlPlane) AddUser(name string) (*rest.Config, error) {
	u, err := cp.env.AddUser(envtest.User{Name: name}, cp.Config)
	if err != nil {
		return nil, fmt.Errorf("controlplane: adding user %q: %w", name, err)
	}
	return u.Config(), nil
}
