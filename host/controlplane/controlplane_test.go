package controlplane

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

// fakeBinaries makes dir hold the named binaries as scripts running body.
func fakeBinaries(t *testing.T, dir, body string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindBinDir(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	work := filepath.Join(root, "a", "b")
	for _, d := range []string{bin, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fakeBinaries(t, bin, "exit 0", Binaries...)
	t.Chdir(work)

	// etcd and kube-apiserver: the bin/ above the working directory.
	if got, err := FindBinDir(""); err != nil || got != bin {
		t.Fatalf("FindBinDir(\"\") = %q, %v; want %q", got, err, bin)
	}
	// With kube-controller-manager too, a bin/ without it is no answer, and the error names
	// where it looked and the make targets.
	_, err := FindBinDir("", AllBinaries...)
	for _, want := range []string{bin + " lacks kube-controller-manager", "no bin/ in " + work + " or above", "make install", "make controlplane", "KUBEBUILDER_ASSETS"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("FindBinDir without kube-controller-manager: %v; want it to say %q", err, want)
		}
	}
	fakeBinaries(t, bin, "exit 0", ControllerManager)
	if got, err := FindBinDir("", AllBinaries...); err != nil || got != bin {
		t.Errorf("FindBinDir(\"\", AllBinaries...) = %q, %v; want %q", got, err, bin)
	}

	// A named directory is that one, or an error naming what it lacks.
	named := t.TempDir()
	fakeBinaries(t, named, "exit 0", Binaries...)
	_, err = FindBinDir(named, AllBinaries...)
	if err == nil || !strings.Contains(err.Error(), named+" lacks kube-controller-manager:") {
		t.Errorf("FindBinDir(%s) lacking kube-controller-manager: %v", named, err)
	}
	t.Setenv("KUBEBUILDER_ASSETS", named)
	if got, err := FindBinDir(""); err != nil || got != named {
		t.Errorf("with KUBEBUILDER_ASSETS: %q, %v; want %q", got, err, named)
	}
	// A file that cannot be run is said.
	if err := os.Chmod(filepath.Join(named, "etcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FindBinDir(""); err == nil || !strings.Contains(err.Error(), "lacks etcd (not executable)") {
		t.Errorf("etcd not executable: %v", err)
	}
}

// realBinDir is the bin/ holding the control plane's binaries, or the test stops.
func realBinDir(t *testing.T) string {
	t.Helper()
	dir, err := FindBinDir("", AllBinaries...)
	if err != nil {
		testenv.Missing(t, err, "controlplane")
	}
	return dir
}

// With ControllerManager, the controllers run (the default ServiceAccount is made), and Stop
// leaves no process and no files behind but the log it was given.
func TestStartWithControllerManager(t *testing.T) {
	dir := realBinDir(t)
	log := filepath.Join(t.TempDir(), "kcm.log")
	cp, err := Start(Options{BinDir: dir, ControllerManager: true, ControllerManagerLog: log})
	if err != nil {
		t.Fatal(err)
	}
	kcmDir := cp.kcm.dir
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := cs.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the default ServiceAccount: %v", err)
	}
	if cp.ControllerManagerErr() != nil {
		t.Errorf("ControllerManagerErr while running: %v", cp.ControllerManagerErr())
	}
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cp.ControllerManagerExited():
		t.Error("ControllerManagerExited is closed after Stop: a stop asked for is no exit to report")
	default:
	}
	if _, err := os.Stat(kcmDir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Stop: %v", kcmDir, err)
	}
	if b, err := os.ReadFile(log); err != nil || len(b) == 0 {
		t.Errorf("the log %s: %v, %d bytes", log, err, len(b))
	}
}

// A kube-controller-manager that exits at start is an error naming it, its log and the log's
// last lines; the API server and etcd are stopped.
func TestControllerManagerThatExits(t *testing.T) {
	real := realBinDir(t)
	dir := t.TempDir()
	for _, b := range Binaries {
		if err := os.Symlink(filepath.Join(real, b), filepath.Join(dir, b)); err != nil {
			t.Fatal(err)
		}
	}
	fakeBinaries(t, dir, "echo 'flag provided but not defined: -oops' >&2; exit 3", ControllerManager)
	log := filepath.Join(t.TempDir(), "kcm.log")
	cp, err := Start(Options{BinDir: dir, ControllerManager: true, ControllerManagerLog: log})
	if err == nil {
		cp.Stop()
		t.Fatal("Start succeeded with a kube-controller-manager that exits")
	}
	for _, want := range []string{filepath.Join(dir, ControllerManager), "exited (exit status 3)", log, "flag provided but not defined: -oops"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error:\n%v\nwant it to say %q", err, want)
		}
	}
}

// A kube-controller-manager that dies while the control plane runs is reported, with its log.
func TestControllerManagerDiesWhileRunning(t *testing.T) {
	dir := realBinDir(t)
	log := filepath.Join(t.TempDir(), "kcm.log")
	cp, err := Start(Options{BinDir: dir, ControllerManager: true, ControllerManagerLog: log})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if err := cp.kcm.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cp.ControllerManagerExited():
	case <-time.After(10 * time.Second):
		t.Fatal("ControllerManagerExited not closed 10s after kube-controller-manager was killed")
	}
	err = cp.ControllerManagerErr()
	for _, want := range []string{"kube-controller-manager exited (signal: killed)", "its log, " + log + ", ends:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ControllerManagerErr: %v; want it to say %q", err, want)
		}
	}
}
