package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dev.kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: dev\n  cluster:\n    server: " + server + "\ncontexts:\n- name: dev\n  context: {cluster: dev}\ncurrent-context: dev\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A second dev does not overwrite the kubeconfig of a control plane still running.
func TestDevKeepsARunningControlPlanesKubeconfig(t *testing.T) {
	running := httptest.NewTLSServer(http.NotFoundHandler())
	defer running.Close()
	path := writeKubeconfig(t, running.URL)
	err := kubeconfigInUse(path)
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig-out") || !strings.Contains(err.Error(), running.URL) {
		t.Fatalf("a kubeconfig whose API server answers: got %v, want an error naming it and --kubeconfig-out", err)
	}

	// One left by a dev that is gone is overwritten, as is no file at all.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "https://" + ln.Addr().String()
	ln.Close()
	if err := kubeconfigInUse(writeKubeconfig(t, gone)); err != nil {
		t.Errorf("a kubeconfig whose API server is gone: %v", err)
	}
	if err := kubeconfigInUse(filepath.Join(t.TempDir(), "none")); err != nil {
		t.Errorf("no kubeconfig: %v", err)
	}
}
