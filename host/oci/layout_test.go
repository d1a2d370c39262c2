package oci_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/host/oci"
)

func TestParseLayout(t *testing.T) {
	for ref, want := range map[string][2]string{
		"oci:/srv/m/layout:v1":                    {"/srv/m/layout", "v1"},
		"oci:/srv/m/layout":                       {"/srv/m/layout", "latest"},
		"oci:/srv/m/layout@sha256:ab":             {"/srv/m/layout", "sha256:ab"},
		"oci:./rel/layout:v2":                     {"./rel/layout", "v2"},
		"oci:/srv/modules/team-a:/../team-b/l:v1": {"/srv/modules/team-a:/../team-b/l", "v1"},
		"oci:/srv/modules/team-a:/../team-b/l":    {"/srv/modules/team-a:/../team-b/l", "latest"},
		"oci:/srv/m/a@b/layout:v1":                {"/srv/m/a@b/layout", "v1"},
	} {
		dir, reference, ok := oci.ParseLayout(ref)
		if !ok || dir != want[0] || reference != want[1] {
			t.Errorf("ParseLayout(%q) = %q, %q, %v; want %q, %q", ref, dir, reference, ok, want[0], want[1])
		}
	}
	for _, ref := range []string{"oci://reg/x:v1", "/srv/m/a.wasm", "reg/x:v1"} {
		if _, _, ok := oci.ParseLayout(ref); ok {
			t.Errorf("ParseLayout(%q) took it for a layout", ref)
		}
	}
}

// A pull reads a layout and never writes it: a directory that is not a layout stays as it was
// (the host once made blobs/, oci-layout and index.json in any directory it was pointed at).
func TestPullNeverWritesALayout(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "private"), []byte("Hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := client(t).Pull(context.Background(), "oci:"+dir+":v1", oci.PullOptions{})
	if err == nil {
		t.Fatal("pulled from a directory that is no layout")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the pull wrote into %s: %v", dir, entries)
	}
	if strings.Contains(err.Error(), "Hunter2") || strings.Contains(err.Error(), "'H'") {
		t.Errorf("the error tells of a file's contents: %v", err)
	}
}

// Inside Root, a layout may not lead out: not by "..", not by a symbolic link to another
// team's layout; a FIFO is refused at once instead of blocking the pull; a layer over MaxSize
// is refused before it is read.
func TestPullStaysInsideItsRoot(t *testing.T) {
	ctx := context.Background()
	srv := t.TempDir()
	teamA, teamB := filepath.Join(srv, "team-a"), filepath.Join(srv, "team-b")
	c := client(t)
	if _, err := c.Push(ctx, module, []byte(`{}`), "oci:"+filepath.Join(teamB, "layout")+":v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Push(ctx, module, []byte(`{}`), "oci:"+filepath.Join(teamA, "own")+":v1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(teamB, "layout"), filepath.Join(teamA, "link")); err != nil {
		t.Fatal(err)
	}
	within := oci.PullOptions{Root: teamA}
	for name, ref := range map[string]string{
		"dot-dot": "oci:" + teamA + ":/../team-b/layout:v1",
		"clean":   "oci:" + filepath.Join(teamA, "..", "team-b", "layout") + ":v1",
		"symlink": "oci:" + filepath.Join(teamA, "link") + ":v1",
	} {
		if m, err := client(t).Pull(ctx, ref, within); err == nil {
			t.Errorf("%s: pulled team B's module (%s) from inside team A's directory", name, m.Digest)
		}
	}
	if _, err := client(t).Pull(ctx, "oci:"+filepath.Join(teamA, "own")+":v1", within); err != nil {
		t.Errorf("its own layout: %v", err)
	}
	// The layer is over the bound: refused naming the bound.
	_, err := client(t).Pull(ctx, "oci:"+filepath.Join(teamA, "own")+":v1", oci.PullOptions{Root: teamA, MaxSize: int64(len(module)) - 1})
	var tooLarge *oci.TooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "maxModuleSize") {
		t.Errorf("a layer over MaxSize: %v", err)
	}
	// A FIFO as the index: refused, not waited on.
	fifo := filepath.Join(teamA, "fifo")
	if err := os.MkdirAll(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fifo, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fifo, "index.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := client(t).Pull(ctx, "oci:"+fifo+":v1", within); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO as index.json: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pull blocked on a FIFO")
	}
}

// The cache answers a pull only with a layer the source itself holds: a layout of one's own
// that names another team's layer digest is refused, though the host has that layer cached.
// A layer that is not wasm is not kept.
func TestCacheAnswersOnlyForTheSource(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	theirs := "oci:" + filepath.Join(t.TempDir(), "team-b") + ":v1"
	if _, err := c.Push(ctx, module, []byte(`{}`), theirs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(ctx, theirs, oci.PullOptions{}); err != nil { // now in the cache
		t.Fatal(err)
	}
	// Her layout: the same manifest, without the layer's blob.
	mine := filepath.Join(t.TempDir(), "team-a")
	if _, err := c.Push(ctx, module, []byte(`{}`), "oci:"+mine+":v1"); err != nil {
		t.Fatal(err)
	}
	blobs, _ := filepath.Glob(filepath.Join(mine, "blobs", "sha256", "*"))
	for _, b := range blobs {
		if data, _ := os.ReadFile(b); string(data) == string(module) {
			if err := os.Remove(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m, err := c.Pull(ctx, "oci:"+mine+":v1", oci.PullOptions{}); err == nil {
		t.Fatalf("served %s from the cache to a layout that does not hold it", m.Digest)
	} else if !strings.Contains(err.Error(), "does not hold") {
		t.Errorf("the refusal: %v", err)
	}

	// Not wasm: pulled, refused by the host later, and never cached.
	junk := "oci:" + filepath.Join(t.TempDir(), "junk") + ":v1"
	if _, err := c.Push(ctx, []byte("HELLO, not wasm"), []byte(`{}`), junk); err != nil {
		t.Fatal(err)
	}
	m, err := c.Pull(ctx, junk, oci.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.CachedModule(m.Digest); ok {
		t.Error("a layer that is not wasm was kept in the cache")
	}
}
