package modsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/wasmrec/wasmrec/host/internal/filewatch"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/plugin/internal/versions"
	"github.com/wasmrec/wasmrec/host/signature"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/backoff"
)

// Source is where a running module came from: a file path or an OCI reference, and for the
// latter the manifest digest it resolved to.
type Source struct {
	Ref            string
	ManifestDigest string
	Fetched        time.Time // when its module was read (zero: unknown)
}

// OCIRef returns the registry or layout reference of module, if it comes from one:
// "oci://registry/repository:tag" gives "registry/repository:tag", and "oci:dir:tag" (an image
// layout) is returned as it is.
func OCIRef(module string) (string, bool) {
	if ref, ok := strings.CutPrefix(module, "oci://"); ok {
		return ref, true
	}
	if strings.HasPrefix(module, "oci:") {
		return module, true
	}
	return "", false
}

// Bounds are what a plugin's module may be read from, and how much of it.
type Bounds struct {
	// Dirs, if set, are the directories the module's files must lie in (a plugin object's, the
	// operator's sources): a file or image layout is opened inside the one that holds its path,
	// and ".." or a symbolic link that leads out of it is refused.
	Dirs []string
	// MaxSize bounds the module's bytes; 0: no bound.
	MaxSize int64
}

// root is the directory of b.Dirs that holds path, "" without Dirs.
func (b Bounds) root(path string) (string, error) {
	if len(b.Dirs) == 0 {
		return "", nil
	}
	path = filepath.Clean(path)
	for _, d := range b.Dirs {
		d = filepath.Clean(d)
		if d == "/" || path == d || strings.HasPrefix(path, d+string(filepath.Separator)) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%s is not inside the directories its modules may come from", path)
}

// pull is what b allows of a pull of an image layout at path.
func (b Bounds) pull(path string) (oci.PullOptions, error) {
	root, err := b.root(path)
	return oci.PullOptions{Root: root, MaxSize: b.MaxSize}, err
}

// Fetcher reads modules. One per host: plugins that read the same file at once share the read.
type Fetcher struct {
	reads singleflight.Group // module files being read, by path, size and times
}

// Fetch reads the module at module, within b: a file, or through c a registry or image layout.
// A file is read only if it is a regular file within b (never a FIFO or a device, which would
// block the read). The source it returns says where the module came from and when.
func (f *Fetcher) Fetch(ctx context.Context, c *oci.Client, module string, b Bounds) ([]byte, *Source, error) {
	src := &Source{Ref: module, Fetched: time.Now()}
	if ref, ok := OCIRef(module); ok {
		if c == nil {
			return nil, nil, fmt.Errorf("module %s comes from a registry, and this host has no OCI client", module)
		}
		opts := oci.PullOptions{MaxSize: b.MaxSize}
		if dir, _, layout := oci.ParseLayout(ref); layout {
			var err error
			if opts, err = b.pull(dir); err != nil {
				return nil, nil, err
			}
		}
		m, err := c.Pull(ctx, ref, opts)
		if err != nil {
			return nil, nil, err
		}
		src.ManifestDigest = m.ManifestDigest
		return m.Wasm, src, nil
	}
	root, err := b.root(module)
	if err != nil {
		return nil, nil, err
	}
	// Plugins that read the same file at once (one per team, say, at start or after a change)
	// share one read. The key holds the file's size and times, so that a read begun before a
	// change is never handed to a reader that came after it, and the bounds it was read within.
	key := fmt.Sprintf("%s\x00%s\x00%d", module, root, b.MaxSize)
	if fi, err := os.Stat(module); err == nil {
		key = fmt.Sprintf("%s\x00%d\x00%d\x00%d", key, fi.Size(), fi.ModTime().UnixNano(), lastChange(fi).UnixNano())
	}
	v, err, _ := f.reads.Do(key, func() (any, error) { return readFile(module, root, b.MaxSize) })
	if err != nil {
		return nil, nil, fmt.Errorf("reading its module: %w", err)
	}
	return v.([]byte), src, nil
}

// readFile reads the regular file at path, inside root if set, of at most maxSize bytes.
func readFile(path, root string, maxSize int64) ([]byte, error) {
	var r *os.Root
	name := path
	if root != "" {
		var err error
		if r, err = os.OpenRoot(root); err != nil {
			return nil, err
		}
		defer r.Close()
		if name, err = filepath.Rel(root, filepath.Clean(path)); err != nil {
			return nil, err
		}
	}
	f, err := oci.OpenFile(r, name, maxSize)
	if err != nil {
		if pe := (*fs.PathError)(nil); r != nil && errors.As(err, &pe) && pe.Path == name {
			pe.Path = path // the name inside root is relative: say the file the config names
		}
		return nil, err
	}
	defer f.Close()
	if maxSize <= 0 {
		return io.ReadAll(f)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSize+1)) // a file that grows while read is cut
	if err == nil && int64(len(b)) > maxSize {
		err = &oci.TooLargeError{What: path, Size: int64(len(b)), Limit: maxSize}
	}
	return b, err
}

// Verify checks that wasm, fetched from src, is signed as each of checkers wants (none: nothing
// to check). A module from a registry is signed by its manifest's digest, in Sigstore bundles
// attached to the manifest as referrers; a module file by its bytes, in the bundle beside it
// (FILE.sigstore.json). A module that is not is a *signature.Error, which names who signed it
// and who was wanted; a registry that cannot be asked is another error.
func Verify(ctx context.Context, c *oci.Client, checkers []*signature.Checker, wasm []byte, src *Source) error {
	if len(checkers) == 0 {
		return nil
	}
	ref, _ := OCIRef(src.Ref)
	if ref == "" {
		ref = src.Ref
	}
	bundles, sum, err := signature.Find(ctx, c, ref, src.ManifestDigest, wasm)
	if err != nil {
		return err
	}
	for _, c := range checkers {
		if _, err := c.Check(bundles, sum); err != nil {
			return err
		}
	}
	return nil
}

// Target is the plugin a trigger swaps.
// ErrNotNow is a swap that was not tried, and may succeed later (see Target.SwapFrom).
var ErrNotNow = errors.New("the swap is tried again later")

type Target interface {
	// Source returns where the running module came from, and a channel closed when that changes.
	Source() (<-chan struct{}, *Source)
	// Serving is the digest of the module serving.
	Serving() string
	// SwapFrom swaps to wasm, unless the target's source is no longer from: then it does nothing.
	// A refusal is logged and counted by the target. An error that is ErrNotNow is a module not
	// tried (it did not fit the plugin's memory budget): it is tried again at the next poll.
	SwapFrom(ctx context.Context, wasm []byte, from string) error
	// Tried records that src's tag was tried at manifestDigest, unless the source moved meanwhile.
	Tried(src *Source, manifestDigest string)
	// Verify checks that wasm, from src, is signed as the plugin requires (Verify, above).
	Verify(ctx context.Context, wasm []byte, src *Source) error
	// Refuse logs, counts and reports a module refused before its swap (by Verify).
	Refuse(err error)
}

// FileWatcher swaps a plugin's module when its file changes. It follows the plugin's current
// source: after a swap to another file it watches that one, and it idles while the module comes
// from a registry. It is a manager Runnable that runs on every replica, so a follower also has
// the new module when it takes over.
type FileWatcher struct {
	Plugin string // the plugin's name, for the runnable's
	Target Target
	Files  *filewatch.Watcher // the host's one file watcher
	Fetch  *Fetcher
	Bounds Bounds // what the module may be read from, and how much of it
	Log    logr.Logger
}

// NeedLeaderElection is false: every replica follows the file.
func (w *FileWatcher) NeedLeaderElection() bool { return false }

// Name names the watcher in logs.
func (w *FileWatcher) Name() string { return w.Plugin + " (module file)" }

// Start follows the module file until ctx is done, through the host's one file watcher: a
// write in place, a file replaced by rename, and a ConfigMap or Secret volume's `..data` swap
// all wake it, and it swaps once the changes settle (a swap to the digest running does
// nothing). A file that cannot be watched is logged, not fatal: the plugin keeps serving, and
// a later move to another file is followed.
func (w *FileWatcher) Start(ctx context.Context) error {
	var (
		path   string           // the file followed ("" for none)
		sub    *filewatch.Sub   // its subscription (nil for none)
		sig    *filewatch.Sub   // its signature's (FILE.sigstore.json): a module refused as unsigned comes in once signed
		settle <-chan time.Time // changes come in bursts: act once they stop
	)
	changed := func(s *filewatch.Sub) <-chan struct{} {
		if s == nil {
			return nil
		}
		return s.C
	}
	stop := func() {
		for _, s := range []**filewatch.Sub{&sub, &sig} {
			if *s != nil {
				(*s).Stop()
				*s = nil
			}
		}
	}
	follow := func() <-chan struct{} {
		moved, src := w.Target.Source()
		next := src.Ref
		if _, fromRegistry := OCIRef(next); fromRegistry {
			next = ""
		}
		if next == path {
			return moved
		}
		stop()
		path, settle = next, nil
		if next != "" {
			var err error
			if sub, err = w.Files.Watch(next); err != nil {
				w.Log.Error(err, "cannot watch the module file: changes to it are not swapped in", "path", next)
			} else if changedSince(next, src.Fetched) {
				// It changed between the module's read and now: read it again.
				settle = time.After(100 * time.Millisecond)
			}
			sig, _ = w.Files.Watch(next + signature.FileSuffix) // its folder is watched already, or not at all
		}
		return moved
	}
	moved := follow()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-moved:
			moved = follow()
		case <-changed(sub):
			settle = time.After(100 * time.Millisecond)
		case <-changed(sig):
			settle = time.After(100 * time.Millisecond)
		case <-settle:
			settle = nil
			b, src, err := w.Fetch.Fetch(ctx, nil, path, w.Bounds)
			if err != nil {
				w.Log.Error(err, "reading the changed module file; the current module keeps serving", "path", path)
				continue
			}
			if wasm.Truncated(b) && writing(path) {
				w.Log.V(1).Info("the module file ends mid-section and changed just now: waiting for its writer", "path", path, "bytes", len(b))
				settle = time.After(writePause)
				continue
			}
			if digestOf(b) == w.Target.Serving() {
				continue
			}
			if err := w.Target.Verify(ctx, b, src); err != nil {
				w.Target.Refuse(err) // its signature may come: the next change is looked at
				continue
			}
			var before *versions.RefusedBeforeError
			switch err := w.Target.SwapFrom(ctx, b, path); { // the target logs and counts the rest
			case errors.As(err, &before):
				w.Log.Info("the module file holds a module refused before; the current module keeps serving", "path", path, "refused", before.Digest, "serving", w.Target.Serving())
			case errors.Is(err, ErrNotNow):
				settle = time.After(notNowRetry) // read and tried again then, if no change comes first
			}
		}
	}
}

// notNowRetry is how soon a module file whose swap was not tried (ErrNotNow) is tried again.
var notNowRetry = 10 * time.Second

// A module file written in place (cp, a slow network volume) is read as it grows: one cut short
// that changed within writeWindow is read again writePause later, and refused (as truncated) only
// once it has stood still that long.
const (
	writeWindow = 2 * time.Second
	writePause  = 250 * time.Millisecond
)

// writing reports whether path changed within writeWindow.
func writing(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && time.Since(lastChange(fi)) < writeWindow
}

// TagPoller swaps a plugin's module when the registry tag its module came from moves to a new
// digest. It follows the plugin's current source: after a swap to another reference it polls
// that one, and it idles while the module is a file or pinned by digest. A registry that
// cannot be reached leaves the running module serving, is logged now and then, and is asked
// again on the backoff.TagPoll schedule (from the poll interval, doubling to 5 min) until it
// answers; a module refused is counted once and not tried again until the tag moves. It runs on
// every replica.
type TagPoller struct {
	Plugin   string // the plugin's name, for the runnable's
	Target   Target
	OCI      *oci.Client // nil: nothing to poll
	Interval time.Duration
	Bounds   Bounds // what the module may be read from, and how much of it
	Log      logr.Logger

	unsigned string // the manifest last refused for its signatures: looked at again each poll
}

// NeedLeaderElection is false: every replica follows the tag.
func (t *TagPoller) NeedLeaderElection() bool { return false }

// Name names the poller in logs.
func (t *TagPoller) Name() string { return t.Plugin + " (tag poller)" }

// Start polls until ctx is done.
func (t *TagPoller) Start(ctx context.Context) error {
	unreachable := rate.Sometimes{Interval: 5 * time.Minute} // says a failing registry now and then
	failures := backoff.TagPoll.From(t.Interval).Start()
	next := t.Interval
	for {
		timer := time.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		next = t.Interval
		if ref, err := t.poll(ctx); err != nil {
			next = failures.Next()
			unreachable.Do(func() {
				t.Log.Error(err, "polling the module's tag; the current module keeps serving, and the registry is asked again with backoff (said at most every few minutes)", "ref", ref, "next", next.Round(time.Second))
			})
			continue
		}
		failures.Reset()
	}
}

// poll swaps to the module the tag points at if it moved. Its error is the registry's: a module
// refused is the target's to say.
func (t *TagPoller) poll(ctx context.Context) (ref string, err error) {
	_, src := t.Target.Source()
	ref, ok := OCIRef(src.Ref)
	if !ok || strings.Contains(ref, "@") || t.OCI == nil {
		return ref, nil // a file, or pinned by digest: nothing moves
	}
	opts := oci.PullOptions{MaxSize: t.Bounds.MaxSize}
	if dir, _, layout := oci.ParseLayout(ref); layout {
		if opts, err = t.Bounds.pull(dir); err != nil {
			return ref, err
		}
	}
	digest, err := t.OCI.Resolve(ctx, ref, opts)
	if err != nil || (digest == src.ManifestDigest && digest != t.unsigned) {
		return ref, err
	}
	m, err := t.OCI.Pull(ctx, ref, opts)
	if err != nil {
		return ref, fmt.Errorf("pulling %s: %w", ref, err)
	}
	// A module refused for its signatures is looked at again at each poll, quietly, as a
	// signature is often attached after the push; once signed, it swaps in.
	again := m.ManifestDigest == t.unsigned
	if err := t.Target.Verify(ctx, m.Wasm, &Source{Ref: src.Ref, ManifestDigest: m.ManifestDigest}); err != nil {
		var refused *signature.Error
		if !errors.As(err, &refused) {
			return ref, fmt.Errorf("checking the signatures of %s: %w", ref, err)
		}
		if !again {
			t.Log.Info("tag moved to a module that is not signed as required; the current module keeps serving, and the tag is looked at again at each poll", "ref", ref, "manifest", m.ManifestDigest)
			t.Target.Refuse(err)
		}
		t.unsigned = m.ManifestDigest
		t.Target.Tried(src, m.ManifestDigest)
		return ref, nil
	}
	t.unsigned = ""
	if again {
		t.Log.Info("the module the tag moved to is signed now: swapping", "ref", ref, "manifest", m.ManifestDigest, "module", m.Digest)
	} else {
		t.Log.Info("tag moved: swapping", "ref", ref, "manifest", m.ManifestDigest, "module", m.Digest)
	}
	if err := t.Target.SwapFrom(ctx, m.Wasm, src.Ref); errors.Is(err, ErrNotNow) { // logs and counts a refusal
		return ref, nil // not tried: the next poll pulls it again (from the cache) and tries
	}
	// Refused or not, this manifest has been tried: wait for the tag to move again. If the
	// plugin moved to another source meanwhile, that one stays.
	t.Target.Tried(src, m.ManifestDigest)
	return ref, nil
}

// digestOf is a module's digest, as the host names modules: "sha256:" and hex.
func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// WaitFor waits until d has passed or, for a module file, until the file changes or appears
// (then a moment more, for the writer to finish); false if ctx ends first. It paces the
// retries of a plugin whose module could not be had.
func WaitFor(ctx context.Context, files *filewatch.Watcher, module string, d time.Duration) bool {
	var changed <-chan struct{}
	if _, fromRegistry := OCIRef(module); !fromRegistry {
		if sub, err := files.Watch(module); err == nil { // a folder that is not there: the timer alone
			defer sub.Stop()
			changed = sub.C
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-changed:
	}
	t.Reset(100 * time.Millisecond)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// changedSince tells whether the file at path (through its symlinks) may have changed since t:
// its modification or change time (a rename sets the latter) is not clearly before t. A file
// that cannot be read counts as changed.
func changedSince(path string, t time.Time) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return true
	}
	return !lastChange(fi).Before(t.Add(-time.Second)) // file times can be coarse
}

// lastChange is the later of a file's modification and change times.
func lastChange(fi os.FileInfo) time.Time {
	changed := fi.ModTime()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if c := time.Unix(st.Ctim.Unix()); c.After(changed) {
			changed = c
		}
	}
	return changed
}
