package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Binaries the control plane needs in its BinDir.
var Binaries = []string{"etcd", "kube-apiserver"}

// Options configure Start. The zero value is ready to use.
type Options struct {
	// BinDir holds etcd and kube-apiserver. Defaults to $KUBEBUILDER_ASSETS, else the first
	// bin/ holding both found walking up from the working directory.
	BinDir string

	// StartTimeout bounds the start of each process. Defaults to 60 seconds.
	StartTimeout time.Duration

	// Verbose copies the processes' output to this process's stdout and stderr.
	Verbose bool

	// WithoutShardedLists leaves the API server's ShardedListAndWatch feature gate off, as
	// clusters have it by default: lists and watches ignore ListOptions.ShardSelector.
	WithoutShardedLists bool
}

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	env *envtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Kubeconfig is Config as a kubeconfig file's contents, for kubectl and friends.
	Kubeconfig []byte
}

// Start starts etcd and kube-apiserver on free loopback ports and waits until the API server
// serves.
func Start(opts Options) (*ControlPlane, error) {
	dir, err := FindBinDir(opts.BinDir)
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
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("controlplane: starting etcd and kube-apiserver from %s: %w", dir, err)
	}
	return &ControlPlane{env: env, Config: cfg, Kubeconfig: env.KubeConfig}, nil
}

// Stop stops the API server and etcd and removes their data.
func (cp *ControlPlane) Stop() error {
	if err := cp.env.Stop(); err != nil {
		return fmt.Errorf("controlplane: stopping: %w", err)
	}
	return nil
}

// FindBinDir returns dir if it holds the binaries, else looks where Options.BinDir says. The
// error says how to build what is missing.
func FindBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if dir != "" {
		if err := hasBinaries(dir); err != nil {
			return "", err
		}
		return filepath.Abs(dir)
	}
	if exe, err := os.Executable(); err == nil && hasBinaries(filepath.Dir(exe)) == nil {
		return filepath.Dir(exe), nil // installed side by side (make install)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if hasBinaries(filepath.Join(d, "bin")) == nil {
			return filepath.Join(d, "bin"), nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("controlplane: no bin/ with %v found from %s upwards: run `make install` in the wasmrec checkout (it installs them beside the wasmrec binary) or `make controlplane` (into its bin/), or set KUBEBUILDER_ASSETS", Binaries, wd)
}

func hasBinaries(dir string) error {
	var errs []error
	for _, b := range Binaries {
		st, err := os.Stat(filepath.Join(dir, b))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
		case st.Mode()&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s: not executable", filepath.Join(dir, b)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("controlplane: %s lacks binaries (run `make controlplane` to build them): %w", dir, errors.Join(errs...))
	}
	return nil
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
