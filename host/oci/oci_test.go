package oci_test

import (
	"bytes"

	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	orasoci "oras.land/oras-go/v2/content/oci"

	"github.com/wasmrec/wasmrec/host/oci"
)

var module = []byte("\x00asm\x01\x00\x00\x00 not really a plugin, but bytes are bytes")

func client(t *testing.T) *oci.Client {
	t.Helper()
	c, err := oci.New(oci.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPushPullLayoutAndCache(t *testing.T) {
	ctx := context.Background()
	ref := "oci:" + filepath.Join(t.TempDir(), "layout") + ":v1"
	c := client(t)
	if _, err := c.Push(ctx, module, []byte(`{"name":"x"}`), ref); err != nil {
		t.Fatal(err)
	}
	m, err := c.Pull(ctx, ref, oci.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Wasm) != string(module) || m.Cached || !strings.HasPrefix(m.Digest, "sha256:") {
		t.Fatalf("first pull: %+v", m)
	}
	again, err := c.Pull(ctx, ref, oci.PullOptions{})
	if err != nil || !again.Cached || string(again.Wasm) != string(module) {
		t.Fatalf("second pull should come from the cache: %+v, %v", again, err)
	}
	pinned, err := c.Pull(ctx, "oci:"+filepath.Join(filepath.Dir(strings.TrimPrefix(ref, "oci:")), "layout")+"@"+m.ManifestDigest, oci.PullOptions{})
	if err != nil || pinned.Digest != m.Digest {
		t.Fatalf("pull by digest: %+v, %v", pinned, err)
	}
}

// A blob whose bytes do not match its digest is refused, not run.
func TestCorruptBlobIsRefused(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "layout")
	ref := "oci:" + dir + ":v1"
	c := client(t)
	if _, err := c.Push(ctx, module, []byte(`{}`), ref); err != nil {
		t.Fatal(err)
	}
	// Find the module's blob and flip its bytes, keeping its size.
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
	corrupted := false
	for _, b := range blobs {
		data, _ := os.ReadFile(b)
		if string(data) == string(module) {
			data[len(data)-1] ^= 0xff
			if err := os.WriteFile(b, data, 0o644); err != nil {
				t.Fatal(err)
			}
			corrupted = true
		}
	}
	if !corrupted {
		t.Fatal("module blob not found in the layout")
	}
	_, err := client(t).Pull(ctx, ref, oci.PullOptions{}) // a fresh cache: the blob must be read
	if err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("Pull of a corrupt blob = %v, want a digest error", err)
	}
}

func TestNotAWasmArtifact(t *testing.T) {
	dir := t.TempDir()
	_, err := client(t).Pull(context.Background(), "oci:"+dir+":missing", oci.PullOptions{})
	if err == nil || !strings.Contains(err.Error(), "image layout "+dir+": invalid OCI Image Layout") {
		t.Fatalf("Pull of a missing tag = %v", err)
	}
}

// The older layout (wasm-to-oci: application/vnd.wasm.content.layer.v1+wasm) pulls too, and a
// large module reports its progress.
func TestOlderLayoutAndProgress(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "layout")
	store, err := orasoci.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	big := append(append([]byte(nil), module...), make([]byte, 5<<20)...)
	layer := content.NewDescriptorFromBytes(oci.MediaTypeLayerV1, big)
	config := content.NewDescriptorFromBytes(oci.MediaTypeConfigV1, []byte(`{}`))
	for _, b := range []struct {
		d    ocispec.Descriptor
		data []byte
	}{{layer, big}, {config, []byte(`{}`)}} {
		if err := store.Push(ctx, b.d, bytes.NewReader(b.data)); err != nil {
			t.Fatal(err)
		}
	}
	desc, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{Layers: []ocispec.Descriptor{layer}, ConfigDescriptor: &config})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Tag(ctx, desc, "old"); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	c, err := oci.New(oci.Options{CacheDir: t.TempDir(), Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Pull(ctx, "oci:"+dir+":old", oci.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Wasm, big) || m.Digest != layer.Digest.String() {
		t.Fatalf("pulled %d bytes, digest %s", len(m.Wasm), m.Digest)
	}
	if strings.Count(progress.String(), "% (") < 5 || !strings.Contains(progress.String(), "pulled "+m.Digest) {
		t.Fatalf("no progress for a 5 MiB module:\n%s", progress.String())
	}
}

// A module pushed with a signer has what it signed attached as a referrer before the tag moves;
// Referrers reads it back, and Attach adds another.
func TestPushSignedAndReferrers(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "layout")
	ref := "oci:" + dir + ":v1"
	c := client(t)
	const artifactType = "application/vnd.example.signature"
	var signed []string
	signer := oci.Signer{ArtifactType: artifactType, Sign: func(ctx context.Context, name, digest string) ([]byte, error) {
		// The tag does not point at the module yet.
		if _, err := c.Resolve(ctx, ref, oci.PullOptions{}); err == nil {
			t.Error("the tag moved before the module was signed")
		}
		signed = append(signed, name+"@"+digest)
		return []byte("signature of " + digest), nil
	}}
	digest, err := c.Push(ctx, module, []byte(`{"name":"x"}`), ref, signer)
	if err != nil {
		t.Fatal(err)
	}
	if len(signed) != 1 || signed[0] != "oci:"+dir+"@"+digest {
		t.Fatalf("signed %v, want the manifest %s once", signed, digest)
	}
	got, err := c.Referrers(ctx, ref, digest, artifactType)
	if err != nil || len(got) != 1 || string(got[0]) != "signature of "+digest {
		t.Fatalf("referrers: %q, %v", got, err)
	}
	if _, err := c.Attach(ctx, ref, digest, artifactType, []byte("a second one"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Referrers(ctx, ref, digest, artifactType); err != nil || len(got) != 2 {
		t.Fatalf("after attaching another: %q, %v", got, err)
	}
	if got, err := c.Referrers(ctx, ref, digest, "application/vnd.example.other"); err != nil || len(got) != 0 {
		t.Fatalf("of another type: %q, %v", got, err)
	}
}
