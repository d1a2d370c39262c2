package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const root = "../../.."

// The image built twice from a real wasmrec binary has the same digest; its config runs
// wasmrec as nonroot with the labels given; its layers hold the files with the owners, modes
// and time expected; the binary taken out of its layer runs; a push puts the same digest in a
// registry; and the manifests written beside it name the image by that digest.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary runs on Linux")
	}
	start := time.Now()
	dir := t.TempDir()
	bin := wasmrecBinary(t, dir)
	tool := filepath.Join(dir, "image")
	// The tool runs as its own process, built without the race detector: compressing and
	// decompressing the 100 MB binary with it takes minutes.
	goCommand(t, ".", "build", "-o", tool, ".")

	plugins := filepath.Join(dir, "plugins")
	must(t, os.Mkdir(plugins, 0o755))
	wasm := map[string][]byte{"app.wasm": []byte("\x00asm\x01\x00\x00\x00app"), "rollout.wasm": []byte("\x00asm\x01\x00\x00\x00rollout")}
	for n, b := range wasm {
		must(t, os.WriteFile(filepath.Join(plugins, n), b, 0o600))
	}
	must(t, os.WriteFile(filepath.Join(plugins, "README"), []byte("not a module"), 0o644))
	certs := filepath.Join(dir, "ca.pem")
	pemBytes := testCA(t)
	must(t, os.WriteFile(certs, pemBytes, 0o644))

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	regHost := strings.TrimPrefix(reg.URL, "http://")

	epoch := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	labels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/wasmrec/wasmrec",
		"org.opencontainers.image.version":  "v0.0.0-imagetest",
		"org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
	}
	build := func(out string, extra ...string) string {
		t.Helper()
		args := append([]string{"-o", out, "-binary", bin, "-plugins", plugins, "-ca-certs", certs,
			"-version", labels["org.opencontainers.image.version"], "-revision", labels["org.opencontainers.image.revision"],
			"-epoch", fmt.Sprint(epoch.Unix()), "-deploy", filepath.Join(root, "deploy")}, extra...)
		cmd := exec.Command(tool, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if err != nil {
			t.Fatalf("image %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		t.Logf("image %s:\n%s%s", strings.Join(extra, " "), stderr.String(), stdout)
		return strings.TrimSpace(string(stdout))
	}
	out1, out2 := filepath.Join(dir, "image1"), filepath.Join(dir, "image2")
	built1 := time.Now()
	ref1 := build(out1, "-push", regHost+"/wasmrec:test")
	t.Logf("one build and push: %v", time.Since(built1))
	// Neither the files' times and modes nor the registry change the image.
	later := time.Now().Add(time.Hour)
	for n := range wasm {
		must(t, os.Chtimes(filepath.Join(plugins, n), later, later))
		must(t, os.Chmod(filepath.Join(plugins, n), 0o755))
	}
	ref2 := build(out2, "-repo", "registry.example.com/wasmrec")

	repo1, d1, _ := strings.Cut(ref1, "@")
	repo2, d2, _ := strings.Cut(ref2, "@")
	if repo1 != regHost+"/wasmrec" || repo2 != "registry.example.com/wasmrec" || !strings.HasPrefix(d1, "sha256:") {
		t.Fatalf("the tool printed %q and %q, want the repositories by digest", ref1, ref2)
	}
	if d1 != d2 {
		t.Fatalf("two builds from the same inputs: %s, then %s", d1, d2)
	}
	for _, f := range []string{"index.json", "oci-layout"} {
		a, err := os.ReadFile(filepath.Join(out1, f))
		must(t, err)
		b, err := os.ReadFile(filepath.Join(out2, f))
		must(t, err)
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds:\n%s\n%s", f, a, b)
		}
	}

	// The registry holds the same image.
	tag, err := name.ParseReference(regHost + "/wasmrec:test")
	must(t, err)
	desc, err := remote.Head(tag)
	must(t, err)
	if desc.Digest.String() != d1 {
		t.Errorf("the registry's wasmrec:test is %s, not %s", desc.Digest, d1)
	}

	// The manifests are deploy/'s, the Deployment's image by digest.
	sources, err := filepath.Glob(filepath.Join(root, "deploy", "*.yaml"))
	must(t, err)
	for _, src := range sources {
		want, err := os.ReadFile(src)
		must(t, err)
		got, err := os.ReadFile(filepath.Join(out1, "deploy", filepath.Base(src)))
		must(t, err)
		if filepath.Base(src) == "deployment.yaml" {
			want = bytes.Replace(want, []byte("image: WASMREC_IMAGE\n"), []byte("image: "+ref1+"\n"), 1)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/deploy/%s is not deploy/%[2]s with the image %s", out1, filepath.Base(src), ref1)
		}
	}

	blobs, err := filepath.Glob(filepath.Join(out1, "blobs", "*", "*"))
	must(t, err)
	for _, b := range blobs {
		if fi, err := os.Stat(b); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v (%v), want 0644: every user can read the layout", b, fi.Mode(), err)
		}
	}

	img := layoutImage(t, out1, d1)
	m, err := img.Manifest()
	must(t, err)
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 3 {
		t.Fatalf("manifest: %s with config %s and %d layers, want an OCI image of 3 layers", m.MediaType, m.Config.MediaType, len(m.Layers))
	}
	cf, err := img.ConfigFile()
	must(t, err)
	wantConfig := v1.Config{
		Entrypoint: []string{"/usr/local/bin/wasmrec"},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		User:       "65532:65532",
		WorkingDir: "/",
		Labels:     labels,
	}
	if got := fmt.Sprintf("%+v", cf.Config); got != fmt.Sprintf("%+v", wantConfig) {
		t.Errorf("config:\n%s\nwant\n%s", got, fmt.Sprintf("%+v", wantConfig))
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(epoch) {
		t.Errorf("config: %s/%s created %v, want linux/%s created %v", cf.OS, cf.Architecture, cf.Created, runtime.GOARCH, epoch)
	}
	for _, h := range cf.History {
		if !h.Created.Equal(epoch) {
			t.Errorf("history %q created %v, want %v", h.CreatedBy, h.Created, epoch)
		}
	}
	if len(cf.History) != 3 || len(cf.RootFS.DiffIDs) != 3 {
		t.Errorf("config: %d history entries and %d diff ids, want 3 each", len(cf.History), len(cf.RootFS.DiffIDs))
	}

	// The layers, in order: what each holds, with its owner, mode and contents.
	type want struct {
		typ      byte
		mode     int64
		uid      int
		contents string // "" for folders; "*" for the binary, checked by running it
	}
	binStat, err := os.Stat(bin)
	must(t, err)
	layers := []map[string]want{
		{
			"etc/":                              {tar.TypeDir, 0o755, 0, ""},
			"etc/group":                         {tar.TypeReg, 0o644, 0, group},
			"etc/passwd":                        {tar.TypeReg, 0o644, 0, passwd},
			"etc/ssl/":                          {tar.TypeDir, 0o755, 0, ""},
			"etc/ssl/certs/":                    {tar.TypeDir, 0o755, 0, ""},
			"etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644, 0, string(pemBytes)},
			"home/":                             {tar.TypeDir, 0o755, 0, ""},
			"home/nonroot/":                     {tar.TypeDir, 0o700, nonroot, ""},
			"tmp/":                              {tar.TypeDir, 0o1777, 0, ""},
			"var/":                              {tar.TypeDir, 0o755, 0, ""},
			"var/cache/":                        {tar.TypeDir, 0o755, 0, ""},
			"var/cache/wasmrec/":                {tar.TypeDir, 0o755, nonroot, ""},
		},
		{
			"plugins/":             {tar.TypeDir, 0o755, 0, ""},
			"plugins/app.wasm":     {tar.TypeReg, 0o644, 0, string(wasm["app.wasm"])},
			"plugins/rollout.wasm": {tar.TypeReg, 0o644, 0, string(wasm["rollout.wasm"])},
		},
		{
			"usr/":                  {tar.TypeDir, 0o755, 0, ""},
			"usr/local/":            {tar.TypeDir, 0o755, 0, ""},
			"usr/local/bin/":        {tar.TypeDir, 0o755, 0, ""},
			"usr/local/bin/wasmrec": {tar.TypeReg, 0o755, 0, "*"},
		},
	}
	extracted := filepath.Join(dir, "wasmrec")
	for i, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer %d is %s, want %s", i, l.MediaType, types.OCILayer)
		}
		var names []string
		diffID := readLayer(t, filepath.Join(out1, "blobs", l.Digest.Algorithm, l.Digest.Hex), l.Digest, func(h *tar.Header, r io.Reader) {
			names = append(names, h.Name)
			w, ok := layers[i][h.Name]
			if !ok {
				t.Errorf("layer %d holds %s, which it should not", i, h.Name)
				return
			}
			if h.Typeflag != w.typ || h.Mode != w.mode || h.Uid != w.uid || h.Gid != w.uid || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) {
				t.Errorf("layer %d: %s is type %c mode %o owner %d:%d (%q:%q) time %v, want type %c mode %o owner %d:%[10]d, no names, time %v",
					i, h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, w.typ, w.mode, w.uid, epoch)
			}
			switch w.contents {
			case "":
			case "*":
				if h.Size != binStat.Size() {
					t.Errorf("%s is %d bytes, the binary %d", h.Name, h.Size, binStat.Size())
				}
				f, err := os.OpenFile(extracted, os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
				must(t, err)
				_, err = io.Copy(f, r)
				must(t, errors.Join(err, f.Close()))
			default:
				b, err := io.ReadAll(r)
				must(t, err)
				if string(b) != w.contents {
					t.Errorf("%s holds %q, want %q", h.Name, b, w.contents)
				}
			}
		})
		if diffID != cf.RootFS.DiffIDs[i] {
			t.Errorf("layer %d unpacks to %s, the config says %s", i, diffID, cf.RootFS.DiffIDs[i])
		}
		if !slices.IsSorted(names) || len(names) != len(layers[i]) {
			t.Errorf("layer %d holds %v, want %d entries in path order", i, names, len(layers[i]))
		}
	}
	out, err := exec.Command(extracted, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "wasmrec ") {
		t.Errorf("the image's /usr/local/bin/wasmrec version: %v\n%s", err, out)
	}
	t.Logf("the image's wasmrec says: %s", bytes.TrimSpace(out))
	t.Logf("the whole test: %v", time.Since(start))
}

// wasmrecBinary is bin/wasmrec, as `make build` leaves it, or else one built into dir.
func wasmrecBinary(t *testing.T, dir string) string {
	p := filepath.Join(root, "bin", "wasmrec")
	arch, err := staticLinuxArch(p)
	if err == nil && arch == runtime.GOARCH {
		return p
	}
	if err == nil {
		err = fmt.Errorf("built for %s", arch)
	}
	t.Logf("%s: %v; building one as make build does", p, err)
	out := filepath.Join(dir, "wasmrec-built")
	goCommand(t, root, "build", "-trimpath", "-ldflags", "-X main.version=imagetest", "-o", out, "./cmd/wasmrec")
	return out
}

// goCommand runs go in dir, building static binaries for this machine.
func goCommand(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// layoutImage is the one image of the layout in dir, which must be d.
func layoutImage(t *testing.T, dir, d string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	must(t, err)
	im, err := idx.IndexManifest()
	must(t, err)
	if len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != d {
		t.Fatalf("the layout's index: %+v, want the one image %s", im.Manifests, d)
	}
	if p := im.Manifests[0].Platform; p == nil || p.OS != "linux" || p.Architecture != runtime.GOARCH {
		t.Errorf("the index names the image's platform %+v, want linux/%s", p, runtime.GOARCH)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	must(t, err)
	return img
}

// readLayer checks the blob at path against its digest and calls each for every entry of the
// tar inside, and returns the tar's digest. It decompresses with gzip(1) when there is one: Go's
// gzip under the race detector takes seconds per megabyte.
func readLayer(t *testing.T, path string, d v1.Hash, each func(*tar.Header, io.Reader)) v1.Hash {
	t.Helper()
	blob, err := os.ReadFile(path)
	must(t, err)
	if got := sha(blob); got != d {
		t.Fatalf("%s holds %s", path, got)
	}
	var r io.Reader
	var wait func() error
	if gz, err := exec.LookPath("gzip"); err == nil {
		cmd := exec.Command(gz, "-dc")
		cmd.Stdin = bytes.NewReader(blob)
		out, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		r, wait = out, cmd.Wait
	} else {
		t.Logf("no gzip(1): decompressing in Go (slow under the race detector): %v", err)
		zr, err := gzip.NewReader(bytes.NewReader(blob))
		must(t, err)
		r, wait = zr, zr.Close
	}
	h := sha256.New()
	tr := tar.NewReader(io.TeeReader(r, h))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		each(hdr, tr)
	}
	_, err = io.Copy(h, r) // the tar's end, past its last entry
	must(t, errors.Join(err, wait()))
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}

// testCA is a self-signed certificate in PEM.
func testCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "image test CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	must(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Plain HTTP goes to a loopback registry only, unless insecure; HTTPS anywhere.
func TestPlainHTTPGuard(t *testing.T) {
	ok := roundTripFunc(func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 200}, nil })
	for _, c := range []struct {
		url      string
		insecure bool
		allowed  bool
	}{
		{"http://127.0.0.1:5000/v2/", false, true},
		{"http://localhost:5000/v2/", false, true},
		{"http://[::1]:5000/v2/", false, true},
		{"http://10.0.0.7:5000/v2/", false, false},
		{"http://registry.local:5000/v2/", false, false},
		{"http://registry.example.com/v2/", false, false},
		{"http://registry.example.com/v2/", true, true},
		{"https://10.0.0.7:5000/v2/", false, true},
	} {
		req, err := http.NewRequest(http.MethodGet, c.url, nil)
		must(t, err)
		_, err = plainHTTPGuard{base: ok, insecure: c.insecure}.RoundTrip(req)
		if (err == nil) != c.allowed {
			t.Errorf("%s (insecure %v): %v, want allowed %v", c.url, c.insecure, err, c.allowed)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// What the tool refuses before it builds anything.
func TestRefusals(t *testing.T) {
	if _, err := pushRef("registry.example.com/wasmrec@sha256:"+strings.Repeat("0", 64), false); err == nil || !strings.Contains(err.Error(), "push to a tag") {
		t.Errorf("a push to a digest: %v", err)
	}
	dir := t.TempDir()
	if err := writeManifests(t.TempDir(), dir, "registry.example.com/wasmrec@sha256:0"); err == nil || !strings.Contains(err.Error(), "WASMREC_IMAGE") {
		t.Errorf("manifests with no image line to set: %v", err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644))
	if err := writeLayout(dir, nil); err == nil || !strings.Contains(err.Error(), "not emptying it") {
		t.Errorf("a layout over a folder of other files: %v", err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "script"), []byte("#!/bin/sh\n"), 0o755))
	if _, err := staticLinuxArch(filepath.Join(dir, "script")); err == nil {
		t.Error("a script taken for a Linux binary")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
