package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// controllerManagerControllers are the controllers kube-controller-manager runs: what a cluster
// does on its own that an author's plugin may count on. The workload controllers (Deployments,
// ReplicaSets, Jobs) stay off: with no scheduler and no kubelet their Pods would wait for ever.
var controllerManagerControllers = []string{
	"garbage-collector-controller",             // deletes objects whose owners are gone
	"namespace-controller",                     // empties and removes a namespace being deleted
	"serviceaccount-controller",                // each namespace's default ServiceAccount
	"serviceaccount-token-controller",          // fills ServiceAccount token Secrets
	"root-ca-certificate-publisher-controller", // each namespace's kube-root-ca.crt ConfigMap
}

// controllerManager is a running kube-controller-manager.
type controllerManager struct {
	path    string
	cmd     *exec.Cmd
	dir     string // its kubeconfig, the root CA and the service-account key; removed by stop
	log     string
	logFile *os.File
	exited  chan struct{}
	err     error         // how it exited, set before exited closes
	died    chan struct{} // closed when it exits before stop
	stopped atomic.Bool   // stop has begun
}

// prepareControllerManager makes the directory of kube-controller-manager's files and gives
// the API server a service-account signing key that kube-controller-manager signs tokens with
// too, before the API server starts.
func prepareControllerManager(env *envtest.Environment) (dir string, err error) {
	if dir, err = os.MkdirTemp("", "wasmrec-kube-controller-manager-"); err != nil {
		return "", err
	}
	key, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "sa.key"), key, 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("controlplane: the service-account signing key: %w", err)
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("service-account-key-file", filepath.Join(dir, "sa.key"))
	args.Set("service-account-signing-key-file", filepath.Join(dir, "sa.key"))
	return dir, nil
}

// startControllerManager starts kube-controller-manager on cp, with leader election and its own
// serving off, and waits until its controllers run: the default namespace has its default
// ServiceAccount. A kube-controller-manager that exits or does not get there is an error that
// ends with its log's last lines.
func startControllerManager(path, dir string, cp *ControlPlane, opts Options) (_ *controllerManager, err error) {
	m := &controllerManager{path: path, dir: dir, log: opts.ControllerManagerLog, exited: make(chan struct{}), died: make(chan struct{})}
	defer func() {
		if err != nil {
			err = errors.Join(err, m.stop())
		}
	}()
	if m.log == "" {
		m.log = filepath.Join(dir, "kube-controller-manager.log")
	}
	kubeconfig, ca := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(kubeconfig, cp.Kubeconfig, 0o600); err != nil {
		return m, err
	}
	if err := os.WriteFile(ca, cp.Config.CAData, 0o600); err != nil {
		return m, err
	}
	if m.logFile, err = os.OpenFile(m.log, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600); err != nil {
		return m, fmt.Errorf("controlplane: kube-controller-manager's log: %w", err)
	}
	m.cmd = exec.Command(path,
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--secure-port=0", // no port to clash with another control plane's
		"--controllers="+strings.Join(controllerManagerControllers, ","),
		"--service-account-private-key-file="+filepath.Join(dir, "sa.key"),
		"--root-ca-file="+ca,
		"--use-service-account-credentials=false",
	)
	m.cmd.Stdout, m.cmd.Stderr = m.logFile, m.logFile
	if opts.Verbose {
		m.cmd.Stdout, m.cmd.Stderr = io.MultiWriter(m.logFile, os.Stdout), io.MultiWriter(m.logFile, os.Stderr)
	}
	// A process group of its own, as envtest gives etcd and kube-apiserver: Ctrl-C in a
	// terminal reaches this process, which stops it.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		m.cmd = nil
		return m, fmt.Errorf("controlplane: starting %s: %w: %s", path, err, remedy([]string{ControllerManager}))
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.exited)
		if !m.stopped.Load() {
			close(m.died)
		}
	}()

	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return m, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		_, last = cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if last == nil {
			return m, nil
		}
		select {
		case <-m.exited:
			return m, m.exitErr()
		case <-ctx.Done():
			if apierrors.IsNotFound(last) {
				last = errors.New("the default namespace has no default ServiceAccount yet")
			}
			return m, fmt.Errorf("controlplane: %s did not start its controllers in %s (%v); %s", path, opts.StartTimeout, last, m.logTail())
		case <-tick.C:
		}
	}
}

// exitErr is how the process exited, and where its log is.
func (m *controllerManager) exitErr() error {
	return fmt.Errorf("controlplane: %s exited (%v); %s", m.path, m.err, m.logTail())
}

// logTail names the log and quotes its last lines.
func (m *controllerManager) logTail() string {
	b, err := os.ReadFile(m.log)
	if err != nil {
		return "its log, " + m.log + ", cannot be read: " + err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-10):]
	return fmt.Sprintf("its log, %s, ends:\n%s", m.log, strings.Join(lines, "\n"))
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s) and removes its files, the log only
// if it is in them.
func (m *controllerManager) stop() error {
	m.stopped.Store(true)
	var errs []error
	if m.cmd != nil {
		select {
		case <-m.exited: // it exited on its own: its error was said then
		default:
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-m.exited:
			case <-time.After(10 * time.Second):
				_ = m.cmd.Process.Kill()
				<-m.exited
				errs = append(errs, fmt.Errorf("controlplane: %s did not stop in 10s of SIGTERM: killed", m.path))
			}
		}
	}
	if m.logFile != nil {
		errs = append(errs, m.logFile.Close())
	}
	errs = append(errs, os.RemoveAll(m.dir))
	return errors.Join(errs...)
}
