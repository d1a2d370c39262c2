package filewatch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newWatcher(t *testing.T) *Watcher {
	t.Helper()
	w := New(logr.Discard())
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func watch(t *testing.T, w *Watcher, path string) *Sub {
	t.Helper()
	s, err := w.Watch(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// woken waits for a value on s.C; quiet checks that none comes.
func woken(t *testing.T, s *Sub, what string) {
	t.Helper()
	select {
	case <-s.C:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no notification after 5s", what)
	}
}

func quiet(t *testing.T, s *Sub, what string) {
	t.Helper()
	select {
	case <-s.C:
		t.Fatalf("%s: notified", what)
	case <-time.After(200 * time.Millisecond):
	}
}

// drain takes what a burst of events left pending.
func drain(s *Sub) {
	time.Sleep(50 * time.Millisecond)
	select {
	case <-s.C:
	default:
	}
}

// The three ways a module file is updated: written in place, replaced by rename, and swapped
// under a ConfigMap or Secret volume by kubelet (files reached through the `..data` symlink).
func TestWatchFollowsEveryKindOfUpdate(t *testing.T) {
	w := newWatcher(t)
	dir := t.TempDir()

	file := filepath.Join(dir, "a.wasm")
	write(t, file, "v1")
	s := watch(t, w, file)
	write(t, file, "v2")
	woken(t, s, "written in place")
	drain(s)

	tmp := filepath.Join(dir, ".a.wasm.tmp")
	write(t, tmp, "v3")
	drain(s)
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	woken(t, s, "replaced by rename")
	drain(s)

	write(t, filepath.Join(dir, "other.wasm"), "x")
	quiet(t, s, "another file in the directory")

	// kubelet's layout: vol/a.wasm -> ..data/a.wasm, ..data -> ..<timestamp>/.
	vol := t.TempDir()
	kubeletUpdate := func(version string) {
		ts := filepath.Join(vol, "..ts-"+version)
		if err := os.Mkdir(ts, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(ts, "a.wasm"), version)
		if err := os.Symlink(filepath.Base(ts), filepath.Join(vol, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	kubeletUpdate("v1")
	if err := os.Symlink(filepath.Join("..data", "a.wasm"), filepath.Join(vol, "a.wasm")); err != nil {
		t.Fatal(err)
	}
	vs := watch(t, w, filepath.Join(vol, "a.wasm"))
	kubeletUpdate("v2")
	woken(t, vs, "kubelet's ..data swap")
	if b, err := os.ReadFile(filepath.Join(vol, "a.wasm")); err != nil || string(b) != "v2" {
		t.Fatalf("read through the volume: %q, %v", b, err)
	}
	drain(vs)
	// Written in place where the symlinks lead now (another directory since the swap).
	write(t, filepath.Join(vol, "..ts-v2", "a.wasm"), "v2, edited")
	woken(t, vs, "the symlinks' target written in place")
	drain(vs)
	write(t, filepath.Join(vol, "..ts-v1", "a.wasm"), "v1, edited")
	quiet(t, vs, "the file the symlinks led to before the swap")

	// A symlink to a file in another directory: a write in place there is a change.
	elsewhere := t.TempDir()
	target := filepath.Join(elsewhere, "b.wasm")
	write(t, target, "v1")
	link := filepath.Join(t.TempDir(), "b.wasm")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	ls := watch(t, w, link)
	write(t, target, "v2")
	woken(t, ls, "a symlinked file written in place")
}

// One inotify instance serves every subscription: far more files than the kernel's default 128
// instances per user, in as many directories, and several subscriptions to one file.
func TestWatchManyFilesWithOneInstance(t *testing.T) {
	w := newWatcher(t)
	root := t.TempDir()
	var subs []*Sub
	for i := range 300 {
		dir := filepath.Join(root, fmt.Sprint(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, watch(t, w, filepath.Join(dir, "m.wasm")))
	}
	shared := filepath.Join(root, "0", "m.wasm")
	second := watch(t, w, shared)
	write(t, shared, "v1")
	woken(t, subs[0], "first subscription to a file")
	woken(t, second, "second subscription to the same file")
	quiet(t, subs[1], "a file in another directory")

	// Stopping one of two subscriptions keeps the directory watched for the other.
	drain(subs[0])
	second.Stop()
	second.Stop()
	write(t, shared, "v2")
	woken(t, subs[0], "after the other subscription stopped")
	if n := len(w.dirs); n != 300 {
		t.Fatalf("%d directories watched, want 300", n)
	}
	for _, s := range subs {
		s.Stop()
	}
	if n := len(w.dirs); n != 0 {
		t.Fatalf("%d directories still watched after every subscription stopped", n)
	}
}

func TestWatchAfterClose(t *testing.T) {
	w := New(logr.Discard())
	s, err := w.Watch(filepath.Join(t.TempDir(), "m.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if _, err := w.Watch(filepath.Join(t.TempDir(), "m.wasm")); err != ErrClosed {
		t.Fatalf("Watch after Close = %v, want ErrClosed", err)
	}
}
