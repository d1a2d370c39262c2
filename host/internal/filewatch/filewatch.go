package filewatch

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
)

// Watcher follows files through their directories: editors and `cp` replace a file rather than
// write it, and kubelet updates a ConfigMap or Secret volume by swapping the `..data` symlink
// the files point through. Every such change, and a write in place, wakes the file's
// subscribers; they read the file again and decide whether it changed. One fsnotify watcher
// serves every subscription (the kernel allows 128 inotify instances per user by default), and
// each directory is watched once however many subscriptions it has.
type Watcher struct {
	log logr.Logger

	mu     sync.Mutex
	fw     *fsnotify.Watcher // nil until the first Watch
	done   chan struct{}     // closed when the event loop has returned
	dirs   map[string]int    // directories watched, with their subscription counts
	subs   map[*Sub]struct{}
	closed bool
}

// New returns a Watcher that logs its errors to log. It opens nothing until the first Watch.
func New(log logr.Logger) *Watcher {
	return &Watcher{log: log, dirs: map[string]int{}, subs: map[*Sub]struct{}{}}
}

// Sub is one subscription to a file. C receives a value when the file may have changed; a
// burst of changes may be one value.
type Sub struct {
	C chan struct{}

	w    *Watcher
	path string // as given, made absolute
	// at is the file as named, and where its symlinks lead when that is another file (kubelet's
	// volumes: a.wasm -> ..data/a.wasm -> ..2026_11_23.../a.wasm), whose directory is watched
	// too so that a write in place there is seen. Guarded by w.mu.
	at, target place
}

// place is a file: the directory watched, and the name in it.
type place struct{ dir, base string }

func placeOf(path string) place { return place{filepath.Dir(path), filepath.Base(path)} }

// ErrClosed is returned by Watch on a closed Watcher.
var ErrClosed = errors.New("filewatch: watcher closed")

// Watch subscribes to path. Stop the subscription when done with it.
func (w *Watcher) Watch(path string) (*Sub, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s := &Sub{C: make(chan struct{}, 1), w: w, path: abs, at: placeOf(abs)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	if w.fw == nil {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, fmt.Errorf("watching files: %w", err)
		}
		w.fw, w.done = fw, make(chan struct{})
		go w.loop(fw)
	}
	if err := w.holdLocked(s.at.dir); err != nil {
		return nil, err
	}
	w.subs[s] = struct{}{}
	w.retargetLocked(s)
	return s, nil
}

// holdLocked watches dir, once however many places are in it.
func (w *Watcher) holdLocked(dir string) error {
	if w.dirs[dir] == 0 {
		if err := w.fw.Add(dir); err != nil {
			return fmt.Errorf("watching %s: %w", dir, err)
		}
	}
	w.dirs[dir]++
	return nil
}

// releaseLocked stops watching dir once no place is in it.
func (w *Watcher) releaseLocked(dir string) {
	if w.dirs[dir]--; w.dirs[dir] <= 0 {
		delete(w.dirs, dir)
		if !w.closed {
			_ = w.fw.Remove(dir)
		}
	}
}

// retargetLocked follows s's symlinks again, and watches where they lead now if that is
// elsewhere. A link that leads nowhere (yet) is followed at the next change.
func (w *Watcher) retargetLocked(s *Sub) {
	var next place
	if resolved, err := filepath.EvalSymlinks(s.path); err == nil {
		if p := placeOf(resolved); p.dir != s.at.dir {
			next = p
		}
	}
	if next == s.target {
		return
	}
	if s.target.dir != "" {
		w.releaseLocked(s.target.dir)
	}
	s.target = place{}
	if next.dir != "" {
		if err := w.holdLocked(next.dir); err != nil {
			w.log.Error(err, "watching where a module file's symlink leads: a write in place there is not seen", "path", s.path)
			return
		}
		s.target = next
	}
}

// Stop ends the subscription. It is safe to call more than once.
func (s *Sub) Stop() {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.subs[s]; !ok {
		return
	}
	delete(w.subs, s)
	w.releaseLocked(s.at.dir)
	if s.target.dir != "" {
		w.releaseLocked(s.target.dir)
	}
}

// Close stops watching. Subscriptions stop receiving.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	fw, done := w.fw, w.done
	w.mu.Unlock()
	if fw == nil {
		return nil
	}
	err := fw.Close()
	<-done
	return err
}

func (w *Watcher) loop(fw *fsnotify.Watcher) {
	defer close(w.done)
	for {
		select {
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			w.notify(func(s *Sub) bool { return s.matches(ev.Name) })
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			// An overflow loses events: every subscriber reads its file again.
			w.log.Error(err, "watching module files; reading every followed file again")
			w.notify(func(*Sub) bool { return true })
		}
	}
}

// matches tells whether a change to name may change the subscribed file: the file itself, or
// one of the `..`-prefixed entries (`..data`, `..2026_11_23...`) kubelet swaps in an atomic
// volume update, or the file its symlinks lead to.
func (s *Sub) matches(name string) bool {
	p := placeOf(name)
	if p.dir == s.at.dir {
		return p.base == s.at.base || strings.HasPrefix(p.base, "..")
	}
	return p == s.target
}

func (w *Watcher) notify(match func(*Sub) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.subs {
		if match(s) {
			w.retargetLocked(s)
			select {
			case s.C <- struct{}{}:
			default: // one pending value says it all
			}
		}
	}
}
