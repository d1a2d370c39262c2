package modsource

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/wasmrec/wasmrec/host/internal/filewatch"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/signature"
)

// target is a plugin as a trigger sees it, recording the swaps asked of it.
type target struct {
	mu       sync.Mutex
	src      *Source
	swaps    [][]byte
	moved    chan struct{}
	oci      *oci.Client
	checkers []*signature.Checker // who must sign what it swaps to
	refused  []error
	notNow   int // swaps to answer ErrNotNow before one succeeds
	attempts int // swaps asked, ErrNotNow ones included
	tried    bool
}

func (t *target) Source() (<-chan struct{}, *Source) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.moved == nil {
		t.moved = make(chan struct{})
	}
	return t.moved, t.src
}

func (t *target) Serving() string { return "sha256:serving" }

func (t *target) SwapFrom(_ context.Context, wasm []byte, from string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.attempts++
	if t.notNow > 0 {
		t.notNow--
		return fmt.Errorf("%w: does not fit", ErrNotNow)
	}
	if t.src.Ref == from {
		t.swaps = append(t.swaps, wasm)
	}
	return nil
}

// Tried moves the source to the manifest tried, as a plugin does, if told to.
func (t *target) Tried(src *Source, manifestDigest string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tried && t.src == src {
		t.src = &Source{Ref: src.Ref, ManifestDigest: manifestDigest}
	}
}

func (t *target) Verify(ctx context.Context, wasm []byte, src *Source) error {
	return Verify(ctx, t.oci, t.checkers, wasm, src)
}

func (t *target) Refuse(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refused = append(t.refused, err)
}

// waitFor waits until cond holds, for at most 5 s, and fails saying why otherwise.
func waitFor(t *testing.T, cond func() bool, why string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (t *target) refusals() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]error(nil), t.refused...)
}

func (t *target) swapped() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([][]byte(nil), t.swaps...)
}

// followFile runs a FileWatcher for tg over a module file holding "v1", until the test ends,
// and returns the file's path once the watch is set up. tg.src is set to that file.
func followFile(t *testing.T, tg *target) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugin.wasm")
	if err := os.WriteFile(path, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := filewatch.New(logr.Discard())
	tg.src = &Source{Ref: path, Fetched: time.Now().Add(time.Minute)}
	w := &FileWatcher{Plugin: "p", Target: tg, Files: files, Fetch: &Fetcher{}, Log: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done; files.Close() })
	time.Sleep(100 * time.Millisecond) // the watch is set up
	return path
}

func TestOCIRef(t *testing.T) {
	for in, want := range map[string]string{"oci://reg:5000/repo:v1": "reg:5000/repo:v1", "oci:dir:v1": "oci:dir:v1", "plugin.wasm": ""} {
		got, ok := OCIRef(in)
		if got != want || ok != (want != "") {
			t.Errorf("OCIRef(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestFetchNamesAMissingFile(t *testing.T) {
	var f Fetcher
	_, _, err := f.Fetch(context.Background(), nil, "/nonexistent/plugin.wasm", Bounds{})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/plugin.wasm") {
		t.Errorf("fetching a missing file: %v; want an error naming it", err)
	}
	// Inside a directory the bounds allow, the error names the whole path too.
	dir := t.TempDir()
	missing := filepath.Join(dir, "plugin.wasm")
	if _, _, err := f.Fetch(context.Background(), nil, missing, Bounds{Dirs: []string{dir}}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("fetching a missing file within its bounds: %v; want an error naming %s", err, missing)
	}
	if _, _, err := f.Fetch(context.Background(), nil, "oci://reg/repo:v1", Bounds{}); err == nil || !strings.Contains(err.Error(), "no OCI client") {
		t.Errorf("a registry module without a client: %v", err)
	}
}

func TestFileWatcherSwapsWhenTheFileChanges(t *testing.T) {
	tg := &target{}
	path := followFile(t, tg)
	// Replaced by rename, as a build tool or a kubelet volume does.
	tmp := filepath.Join(filepath.Dir(path), ".plugin.wasm.tmp")
	if err := os.WriteFile(tmp, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(tg.swapped()) > 0 }, "no swap 5s after the module file was replaced")
	if got := string(tg.swapped()[0]); got != "v2" {
		t.Errorf("swapped to %q, want the new file's v2", got)
	}
}

// A changed module file that does not fit the plugin's memory budget now is tried again later,
// without another change to the file.
func TestFileWatcherTriesAgainAModuleThatDidNotFit(t *testing.T) {
	was := notNowRetry
	t.Cleanup(func() { notNowRetry = was }) // after the watcher stops (cleanups run last first)
	notNowRetry = 20 * time.Millisecond
	tg := &target{notNow: 2}
	path := followFile(t, tg)
	if err := os.WriteFile(path, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(tg.swapped()) > 0 }, "the module that did not fit was never tried again")
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if tg.attempts != 3 || string(tg.swaps[0]) != "v2" {
		t.Errorf("%d swaps asked, then %q: want 2 that did not fit, then v2", tg.attempts, tg.swaps[0])
	}
}

// A registry that fails is asked again with backoff, not on every poll.
func TestTagPollerBacksOffAFailingRegistry(t *testing.T) {
	var requests atomic.Int64
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, `{"errors":[{"code":"NAME_UNKNOWN","message":"no such repository"}]}`, http.StatusNotFound)
	}))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	client, err := oci.New(oci.Options{CacheDir: "-", Insecure: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{src: &Source{Ref: "oci://" + host + "/plugins/p:v1"}}
	const interval = 20 * time.Millisecond
	p := &TagPoller{Plugin: "p", Target: tg, OCI: client, Interval: interval, Log: logr.Discard()}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_ = p.Start(ctx)
	// Polled every 20 ms, 1.5 s is 75 polls; with backoff (20, 40, 80, ... ms) it is 6 or 7.
	n := requests.Load()
	if n == 0 {
		t.Fatal("the registry was never asked")
	}
	polls := 1500 * time.Millisecond / interval
	if n > int64(polls)/4 {
		t.Errorf("%d requests to a failing registry in 1.5s polled every %v: it is not backed off", n, interval)
	}
	if len(tg.swapped()) != 0 {
		t.Error("a failing registry swapped something in")
	}
}

// A tag moved to a module that does not fit the plugin's memory budget now is tried again at
// the next polls until it fits, not given up until the tag moves again; one swapped or refused
// is not tried again.
func TestTagPollerTriesAgainAModuleThatDidNotFit(t *testing.T) {
	ctx := context.Background()
	client, err := oci.New(oci.Options{CacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	ref := "oci:" + filepath.Join(t.TempDir(), "layout") + ":v1"
	first, err := client.Push(ctx, []byte("v1"), []byte(`{}`), ref)
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{src: &Source{Ref: ref, ManifestDigest: first}, notNow: 3, tried: true}
	p := &TagPoller{Plugin: "p", Target: tg, OCI: client, Interval: 10 * time.Millisecond, Log: logr.Discard()}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.Start(runCtx) }()
	defer func() { cancel(); <-done }()
	if _, err := client.Push(ctx, []byte("v2"), []byte(`{}`), ref); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(tg.swapped()) > 0 }, "the module that did not fit was never tried again")
	time.Sleep(100 * time.Millisecond) // about 10 polls more
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if tg.attempts != 4 || len(tg.swaps) != 1 || string(tg.swaps[0]) != "v2" {
		t.Errorf("%d swaps asked, %d done (%q): want 3 that did not fit, then v2 once", tg.attempts, len(tg.swaps), tg.swaps)
	}
}

// signer returns a key (Ed25519, PKCS #8) and a checker that wants its signatures.
func signer(t *testing.T) (*signature.Key, *signature.Checker) {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	pem := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mGG9qwut9\n-----END PRIVATE KEY-----\n"
	if err := os.WriteFile(keyFile, []byte(pem), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := signature.ReadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.Public()
	if err != nil {
		t.Fatal(err)
	}
	checker, err := signature.Policy{Keys: []string{pub}}.Compile(signature.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return key, checker
}

// A tag moved to an unsigned module is refused once, however often it is polled, and swapped
// in at the next poll once a good signature is attached to it.
func TestTagPollerWaitsForASignature(t *testing.T) {
	ctx := context.Background()
	key, checker := signer(t)
	client, err := oci.New(oci.Options{CacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	ref := "oci:" + filepath.Join(t.TempDir(), "layout") + ":v1"
	signer := oci.Signer{ArtifactType: signature.ArtifactType, Sign: key.SignManifest}
	first, err := client.Push(ctx, []byte("v1"), []byte(`{}`), ref, signer)
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{src: &Source{Ref: ref, ManifestDigest: first}, oci: client, checkers: []*signature.Checker{checker}}
	p := &TagPoller{Plugin: "p", Target: tg, OCI: client, Interval: 10 * time.Millisecond, Log: logr.Discard()}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.Start(runCtx) }()
	defer func() { cancel(); <-done }()

	second, err := client.Push(ctx, []byte("v2"), []byte(`{}`), ref) // unsigned
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // about 30 polls
	if got := tg.refusals(); len(got) != 1 || !strings.Contains(got[0].Error(), "is not signed") {
		t.Fatalf("refusals of the unsigned module: %v, want one saying it is not signed", got)
	}
	if len(tg.swapped()) != 0 {
		t.Fatal("an unsigned module was swapped in")
	}
	bundle, err := key.SignManifest(ctx, "layout", second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Attach(ctx, ref, second, signature.ArtifactType, bundle, signature.Annotations()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(tg.swapped()) > 0 }, "no swap 5s after the module was signed")
	if got := string(tg.swapped()[0]); got != "v2" || len(tg.refusals()) != 1 {
		t.Errorf("swapped to %q after %d refusals, want v2 after one", got, len(tg.refusals()))
	}
}

// A module file refused as unsigned swaps in once its signature is written beside it, the
// module file untouched.
func TestFileWatcherSwapsOnceSigned(t *testing.T) {
	ctx := context.Background()
	key, checker := signer(t)
	tg := &target{checkers: []*signature.Checker{checker}}
	path := followFile(t, tg)

	if err := os.WriteFile(path, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(tg.refusals()) > 0 }, "the unsigned module file was not refused")
	if len(tg.swapped()) != 0 {
		t.Fatal("an unsigned module file was swapped in")
	}
	b, err := key.SignBlob(ctx, path, []byte("v2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+signature.FileSuffix, b, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(tg.swapped()) > 0 }, "no swap 5s after the module file was signed")
	if got := string(tg.swapped()[0]); got != "v2" {
		t.Errorf("swapped to %q, want v2", got)
	}
}

// A module written in place slowly, in chunks further apart than the watcher's settle time, is
// swapped in once, whole: the partial files it read on the way end mid-section and are waited
// out, not swapped to (and refused) one after another.
func TestFileWatcherWaitsForASlowWrite(t *testing.T) {
	tg := &target{}
	path := followFile(t, tg)

	// A module: the header and a custom section ("c") of 3000 bytes (size 3002: 0xba 0x17).
	module := append([]byte("\x00asm\x01\x00\x00\x00\x00\xba\x17\x01c"), make([]byte, 3000)...)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(module); i += 1000 {
		if _, err := f.Write(module[i:min(i+1000, len(module))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // past the 100ms settle
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(tg.swapped()) > 0 }, "no swap 5s after the module file was written")
	time.Sleep(500 * time.Millisecond) // any later swap
	swaps := tg.swapped()
	if len(swaps) != 1 || len(swaps[0]) != len(module) {
		sizes := make([]int, len(swaps))
		for i, s := range swaps {
			sizes[i] = len(s)
		}
		t.Fatalf("swaps of %v bytes; want one, of the whole %d-byte module", sizes, len(module))
	}
}

// Within Bounds, a module file is read inside the directory that holds it: a symbolic link out
// of it is refused, as are a FIFO (at once, not blocking the read), a file over MaxSize, and a
// path outside every directory.
func TestFetchStaysWithinItsBounds(t *testing.T) {
	srv := t.TempDir()
	teamA, teamB := filepath.Join(srv, "team-a"), filepath.Join(srv, "team-b")
	for _, d := range []string{teamA, teamB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(teamB, "theirs.wasm"), []byte("team B's module"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(teamA, "mine.wasm"), []byte("team A's module"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(teamB, "theirs.wasm"), filepath.Join(teamA, "link.wasm")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(teamA, "fifo.wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := Bounds{Dirs: []string{teamA}, MaxSize: 1 << 10}
	var f Fetcher
	ctx := context.Background()
	if got, _, err := f.Fetch(ctx, nil, filepath.Join(teamA, "mine.wasm"), b); err != nil || string(got) != "team A's module" {
		t.Fatalf("its own module: %q, %v", got, err)
	}
	for name, path := range map[string]string{
		"a symbolic link out": filepath.Join(teamA, "link.wasm"),
		"a path outside":      filepath.Join(teamB, "theirs.wasm"),
		"a FIFO":              filepath.Join(teamA, "fifo.wasm"),
	} {
		done := make(chan error, 1)
		go func() { _, _, err := f.Fetch(ctx, nil, path, b); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: read", name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the read blocked", name)
		}
	}
	if _, _, err := f.Fetch(ctx, nil, filepath.Join(teamA, "mine.wasm"), Bounds{Dirs: b.Dirs, MaxSize: 4}); err == nil || !strings.Contains(err.Error(), "over the limit of 0.0 MiB (4 bytes") {
		t.Errorf("over MaxSize: %v", err)
	}
}
