package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dev's flags for a cluster of the user's, refused before anything starts.
func TestDevKubeconfigFlags(t *testing.T) {
	kubeconfig := writeKubeconfig(t, "https://127.0.0.1:1")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no plugin", []string{"--kubeconfig", kubeconfig}, "--kubeconfig runs your plugins (--plugin)"},
		{"examples", []string{"--kubeconfig", kubeconfig, "--plugin", ".", "--examples=false"}, "--examples is for dev's own control plane"},
		{"bin-dir", []string{"--kubeconfig", kubeconfig, "--plugin", ".", "--bin-dir", "bin"}, "--bin-dir is for dev's own control plane"},
		{"kubeconfig-out", []string{"--kubeconfig", kubeconfig, "--plugin", ".", "--kubeconfig-out", "x"}, "--kubeconfig-out is for dev's own control plane"},
		{"plugin-objects", []string{"--kubeconfig", kubeconfig, "--plugin", ".", "--plugin-objects=false"}, "--plugin-objects is for dev's own control plane"},
		{"plugin without plugin objects", []string{"--plugin", ".", "--plugin-objects=false"}, "it needs --plugin-objects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), append([]string{"dev"}, tc.args...), io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("dev %s: %v; want %q", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
}

// A cluster that does not answer is an error naming the server and the kubeconfig; the
// kubeconfig named is the one read, not $KUBECONFIG's.
func TestDevKubeconfigUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "https://" + ln.Addr().String()
	ln.Close()
	kubeconfig := writeKubeconfig(t, gone)
	t.Setenv("KUBECONFIG", writeKubeconfig(t, "https://127.0.0.1:2"))
	err = run(context.Background(), []string{"dev", "--kubeconfig", kubeconfig, "--plugin", "."}, io.Discard, io.Discard)
	for _, want := range []string{"the cluster of --kubeconfig " + kubeconfig, "at " + gone, "does not answer"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("dev --kubeconfig to a server gone: %v; want %q", err, want)
		}
	}

	missing := filepath.Join(t.TempDir(), "none")
	err = run(context.Background(), []string{"dev", "--kubeconfig", missing, "--plugin", "."}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig "+missing) {
		t.Errorf("dev --kubeconfig of no file: %v; want it named", err)
	}
}

// Without kube-controller-manager, dev refuses to start, naming where it looked and the make
// targets: a dev without garbage collection would mislead its users.
func TestDevNeedsControllerManager(t *testing.T) {
	dir := t.TempDir()
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var stdout strings.Builder
	err := run(context.Background(), []string{"dev", "--bin-dir", dir, "--examples=false", "--kubeconfig-out", filepath.Join(t.TempDir(), "k")}, &stdout, io.Discard)
	for _, want := range []string{dir, "kube-controller-manager", "make controlplane", "make install"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("dev without kube-controller-manager: %v; want %q", err, want)
		}
	}
	if stdout.Len() > 0 {
		t.Errorf("dev printed before refusing:\n%s", stdout.String())
	}
}

func TestControllerManagerLog(t *testing.T) {
	for in, want := range map[string]string{
		"/home/a/.cache/wasmrec/dev.kubeconfig": "/home/a/.cache/wasmrec/dev.kube-controller-manager.log",
		"/tmp/x/kubeconfig":                     "/tmp/x/kubeconfig.kube-controller-manager.log",
	} {
		if got := controllerManagerLog(in); got != want {
			t.Errorf("controllerManagerLog(%s) = %s, want %s", in, got, want)
		}
	}
}
