package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

// The metrics server's certificate: one of the host's own by default, the directory's when
// --metrics-cert-dir names one, and a clear refusal when that directory lacks the pair.
func TestMetricsTLSConfig(t *testing.T) {
	own, err := (&hostOptions{}).metricsTLSConfig()
	if err != nil || len(own.Certificates) != 1 {
		t.Fatalf("a certificate of its own: %v", err)
	}
	dir := t.TempDir()
	if _, err := (&hostOptions{metricsCertDir: dir}).metricsTLSConfig(); err == nil || !strings.Contains(err.Error(), "--metrics-cert-dir "+dir) || !strings.Contains(err.Error(), "tls.crt and tls.key") {
		t.Fatalf("an empty directory: %v, want a refusal naming the flag and the files", err)
	}
	crt, key, err := certutil.GenerateSelfSignedCertKey("metrics.example", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600))
	must(os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600))
	if c, err := (&hostOptions{metricsCertDir: dir}).metricsTLSConfig(); err != nil || len(c.Certificates) != 1 {
		t.Fatalf("the directory's pair: %v", err)
	}
}
