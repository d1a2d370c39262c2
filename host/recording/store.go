package recording

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The modes of a Policy.
const (
	ModeNone     = "none"     // nothing is recorded
	ModeFailures = "failures" // reconciles that failed: an error, a trap, a timeout
	ModeSample   = "sample"   // a share of reconciles (Policy.Sample), and every failure
	ModeAll      = "all"      // every reconcile
)

// DefaultMaxBytes bounds a plugin's recordings on disk unless its settings say otherwise.
const DefaultMaxBytes = 256 << 20

// Policy says which reconciles of a plugin are kept, and how much of them.
type Policy struct {
	// Mode is none, failures, sample or all.
	Mode string `json:"mode,omitempty"`
	// Sample is the share of reconciles kept in sample mode, in (0, 1].
	Sample float64 `json:"sample,omitempty"`
	// MaxBytes bounds the plugin's recordings on disk (a quantity: 64Mi); the oldest go first.
	// Defaults to the host's bound (DefaultMaxBytes unless it says otherwise).
	MaxBytes *resource.Quantity `json:"maxBytes,omitempty"`
}

// Bytes is MaxBytes in bytes, 0 if unset.
func (p Policy) Bytes() int64 {
	if p.MaxBytes == nil {
		return 0
	}
	return p.MaxBytes.Value()
}

// Check refuses a policy that cannot be followed, naming the field of each mistake.
func (p Policy) Check(field string) error {
	var errs []error
	switch p.Mode {
	case "", ModeNone, ModeFailures, ModeAll:
		if p.Sample != 0 {
			errs = append(errs, &SettingError{"sample", fmt.Errorf("%s.sample is set, but mode is %q: a sample is kept in mode sample only", field, p.Mode)})
		}
	case ModeSample:
		if p.Sample <= 0 || p.Sample > 1 {
			errs = append(errs, &SettingError{"sample", fmt.Errorf("%s.sample %v: give the share of reconciles to keep, more than 0 and at most 1 (0.01 keeps one in a hundred)", field, p.Sample)})
		}
	default:
		errs = append(errs, &SettingError{"mode", fmt.Errorf("%s.mode %q: use none, failures, sample or all", field, p.Mode)})
	}
	if p.MaxBytes != nil && p.MaxBytes.Sign() <= 0 {
		errs = append(errs, &SettingError{"maxBytes", fmt.Errorf("%s.maxBytes %s: give a size, like 64Mi, or leave it out for the host's bound (%d MiB unless it says otherwise)", field, p.MaxBytes, DefaultMaxBytes>>20)})
	}
	return errors.Join(errs...)
}

// A SettingError is a mistake of one setting of a Policy: Setting is its name ("mode"), for
// a config file's reader to say on which line it stands.
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// On reports whether the policy records anything.
func (p Policy) On() bool { return p.Mode != "" && p.Mode != ModeNone }

// Keep reports whether a reconcile that ended so is kept.
func (p Policy) Keep(failed bool) bool {
	switch p.Mode {
	case ModeAll:
		return true
	case ModeFailures:
		return failed
	case ModeSample:
		return failed || rand.Float64() < p.Sample
	}
	return false
}

// Store keeps one plugin's recordings in a directory, within a bound on their bytes.
//
// Each instance the plugin ran has a directory of its own, i-<instance>, with two logs: the
// steps it ran (steps.log, its _initialize first), and its recordings (recordings.log), each
// entry its length (4 bytes, little-endian), then a zstd frame of JSON documents, each followed
// by a newline: the writer writes what it was handed in one batch (batchDelay) as one entry of
// each log, compressed together. A recording of the instance's 100th reconcile needs the 99
// steps before it: they are written with the first recording that needs them, and shared by
// those after. Past its bound, the store drops whole instances' directories, the least recently
// written first (never the one written last): a recording is kept with all it needs, or not at
// all. What is in the directory when a Store opens it is kept, in the order of the directories'
// times. Beside them
// are the modules the recordings were made with (module-<hex>.wasm): the store holds the
// modules the plugin runs (KeepModule) and writes one with the first recording made with it,
// so that a store that writes nothing, in failures mode while nothing fails, costs nothing.
//
// Put hands a recording to the Store's writer and never waits for the disk: a reconcile is not
// slowed by its recording. A recording the writer has no room for in its queue is dropped and
// counted.
type Store struct {
	dir      string
	maxBytes int64
	log      logr.Logger

	mu    sync.Mutex
	units map[string]*unit // instance directories and module files, by name
	bytes int64
	// offered are the modules the plugin runs (KeepModule), the last offered last: a module
	// is written beside the first recording made with it, and again after the bound dropped it.
	offered []offeredModule
	// tooBig are the offered modules not written for their size, said once each.
	tooBig map[string]bool

	// The writer's queue: Put appends, and wakes the writer if the queue was empty; the writer
	// waits batchDelay for more, then writes all it holds together. A reconcile's recording
	// thus costs no wake-up of its own, and a batch one write to each log.
	qmu      sync.Mutex
	jobs     []job
	queued   int           // recordings in jobs
	closed   bool          // no more jobs; guarded by qmu
	wake     chan struct{} // the queue is no longer empty
	urgent   chan struct{} // a flush or Close: write now
	entry    []byte        // an entry being written; the writer's
	dropped  atomic.Int64
	dropNote rate.Sometimes // says now and then that recordings were dropped
	written  atomic.Int64
	done     chan struct{}
}

// unit is what the store drops whole: an instance's directory, or a module's file.
type unit struct {
	name    string
	size    int64
	written time.Time
	touched time.Time // a module's file's time, as last set

	// An instance's logs while the writer has them open, how many steps steps.log holds and
	// their chain. Only the writer uses them.
	steps, recs *os.File
	count       int
	chain       Chain
	// pendSteps and pendRecs are the JSON documents not yet written to steps.log and
	// recordings.log, each followed by a newline: the writer writes each as one entry once its
	// queue is empty, so that a batch is compressed together.
	pendSteps, pendRecs []byte
}

// maxPending is how many bytes of documents an instance holds before they are written, its
// writer's queue empty or not.
const maxPending = 1 << 20

type job struct {
	rec    *Recording
	before []*Step
	flush  chan struct{}
}

type offeredModule struct {
	digest string
	wasm   []byte
}

// maxOffered is how many modules a store holds to write: the live version and a rollout's.
const maxOffered = 2

// Names in a store's directory.
const (
	instancePrefix = "i-"
	stepsLog       = "steps.log"
	recordingsLog  = "recordings.log"
	modulePrefix   = "module-"
	moduleSuffix   = ".wasm"
	// zstSuffix ends the name of a module a store of format v1 kept, compressed with zstd.
	zstSuffix = ".wasm.zst"
)

// idleInstance is how long the writer keeps an instance's logs open with nothing to write.
const idleInstance = time.Minute

// Open opens (or makes) dir as a store of at most maxBytes (0: DefaultMaxBytes), and starts
// its writer; Close stops it.
func Open(dir string, maxBytes int64, log logr.Logger) (*Store, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("recordings directory: %w", err)
	}
	s := &Store{dir: dir, maxBytes: maxBytes, log: log, units: map[string]*unit{}, wake: make(chan struct{}, 1), urgent: make(chan struct{}, 1), done: make(chan struct{}),
		dropNote: rate.Sometimes{First: 1, Interval: 30 * time.Second}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("recordings directory: %w", err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		u := &unit{name: e.Name(), written: info.ModTime()}
		switch {
		case e.IsDir() && strings.HasPrefix(e.Name(), instancePrefix):
			for _, f := range []string{stepsLog, recordingsLog} {
				if fi, err := os.Stat(filepath.Join(dir, e.Name(), f)); err == nil {
					u.size += fi.Size()
					if fi.ModTime().After(u.written) {
						u.written = fi.ModTime()
					}
				}
			}
		case e.Type().IsRegular() && strings.HasPrefix(e.Name(), modulePrefix):
			u.size = info.Size()
		default:
			continue
		}
		s.units[u.name] = u
		s.bytes += u.size
	}
	s.trim("")
	go s.write()
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Put queues rec for writing, with the steps its instance ran before it, in order: those not
// written yet are written with it, then rec.Step, and rec's Before and Chain set from them.
// It returns at once; false says the queue was full and rec was dropped.
func (s *Store) Put(rec *Recording, before []*Step) bool {
	if s.enqueue(job{rec: rec, before: before}, false) {
		return true
	}
	s.dropped.Add(1)
	s.dropNote.Do(func() {
		s.log.Info("dropped recordings the plugin's settings keep: the writer is behind (the disk slower than the reconciles), or the store closed; they are counted in wasmrec_plugin_recordings_dropped_total", "dropped", s.dropped.Load(), "dir", s.dir)
	})
	return false
}

// KeepModule says the plugin runs wasm, of that digest ("sha256:<hex>"): it is written beside
// the first recording made with it, so that its recordings replay with nothing else, and kept
// as long as recordings of it are written. The store holds wasm, unchanged, until two other
// modules are offered after it.
func (s *Store) KeepModule(digest string, wasm []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered = slices.DeleteFunc(s.offered, func(m offeredModule) bool { return m.digest == digest })
	s.offered = append(s.offered, offeredModule{digest, wasm})
	if len(s.offered) > maxOffered {
		s.offered = slices.Delete(s.offered, 0, len(s.offered)-maxOffered)
	}
}

// Flush waits until what was Put before it is written.
func (s *Store) Flush() {
	ch := make(chan struct{})
	if s.enqueue(job{flush: ch}, true) {
		<-ch
	}
}

// maxQueue bounds the recordings queued for the writer; past it, Put drops them. The writer
// empties the queue every batchDelay at least: 4096 in 100 ms.
const maxQueue = 4096

// batchDelay is how long the writer waits, woken, for more recordings to write together.
const batchDelay = 100 * time.Millisecond

// enqueue hands j to the writer, unless the store is closed or, for a recording, its queue is
// full; urgent wakes the writer at once. A reconcile still running when its plugin closes may
// Put after Close.
func (s *Store) enqueue(j job, urgent bool) bool {
	s.qmu.Lock()
	if s.closed || (j.rec != nil && s.queued >= maxQueue) {
		s.qmu.Unlock()
		return false
	}
	first := len(s.jobs) == 0
	s.jobs = append(s.jobs, j)
	if j.rec != nil {
		s.queued++
	}
	s.qmu.Unlock()
	if first {
		signal(s.wake)
	}
	if urgent {
		signal(s.urgent)
	}
	return true
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Dropped is how many recordings Put dropped, its queue full.
func (s *Store) Dropped() int64 { return s.dropped.Load() }

// Written is how many recordings the store has written.
func (s *Store) Written() int64 { return s.written.Load() }

// Bytes is what the store's files hold.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Close writes what is queued and stops the writer.
func (s *Store) Close() {
	s.qmu.Lock()
	s.closed = true
	s.qmu.Unlock()
	signal(s.urgent)
	<-s.done
}

func (s *Store) write() {
	defer close(s.done)
	defer s.closeIdle(time.Time{})
	tick := time.NewTicker(idleInstance)
	defer tick.Stop()
	batch := time.NewTimer(batchDelay)
	batch.Stop()
	for {
		select {
		case <-tick.C:
			s.closeIdle(time.Now().Add(-idleInstance))
			continue
		case <-s.wake:
			batch.Reset(batchDelay)
			select {
			case <-batch.C:
			case <-s.urgent:
				batch.Stop()
			}
		case <-s.urgent:
		}
		s.qmu.Lock()
		jobs, closed := s.jobs, s.closed
		s.jobs, s.queued = nil, 0
		s.qmu.Unlock()
		for _, j := range jobs {
			switch {
			case j.flush != nil:
				s.writePending()
				close(j.flush)
			default:
				if err := s.writeRecording(j.rec, j.before); err != nil {
					s.log.Error(err, "writing a recording", "reconcileID", j.rec.ReconcileID)
				}
			}
		}
		s.writePending() // what came together is written together
		if closed {
			return
		}
	}
}

// writePending writes the frames the instances hold, each instance's steps before its
// recordings, so that a recording on disk always finds its steps.
func (s *Store) writePending() {
	s.mu.Lock()
	units := make([]*unit, 0, len(s.units))
	for _, u := range s.units {
		if len(u.pendSteps) > 0 || len(u.pendRecs) > 0 {
			units = append(units, u)
		}
	}
	s.mu.Unlock()
	if len(units) == 0 {
		return
	}
	// All are written before the store is trimmed: a unit's size is known once it is written.
	newest := units[0]
	for _, u := range units {
		n := s.writeUnit(u)
		s.mu.Lock()
		u.size += n
		s.bytes += n
		if u.written.After(newest.written) {
			newest = u
		}
		s.mu.Unlock()
	}
	s.trim(newest.name)
}

// writeUnit writes an instance's pending documents, its steps' as one entry of steps.log, then
// its recordings' as one of recordings.log, and returns the bytes written. A log that cannot be
// written is closed: the next recording opens it again and reads what it holds.
func (s *Store) writeUnit(u *unit) (written int64) {
	defer func() { u.pendSteps, u.pendRecs = u.pendSteps[:0], u.pendRecs[:0] }()
	if u.steps == nil { // dropped past the bound meanwhile
		return 0
	}
	for _, l := range []struct {
		f    *os.File
		docs []byte
		what string
	}{{u.steps, u.pendSteps, "writing recorded steps"}, {u.recs, u.pendRecs, "writing recordings"}} {
		if len(l.docs) == 0 {
			continue
		}
		s.entry = appendEntry(s.entry[:0], l.docs)
		if _, err := l.f.Write(s.entry); err != nil {
			s.log.Error(err, l.what, "instance", u.name)
			u.closeLogs()
			return written
		}
		written += int64(len(s.entry))
	}
	return written
}

// closeIdle closes the logs of the instances last written before t (all, for the zero t).
func (s *Store) closeIdle(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.units {
		if u.steps != nil && (t.IsZero() || u.written.Before(t)) {
			n := s.writeUnit(u)
			u.size += n
			s.bytes += n
			u.closeLogs()
		}
	}
}

func (u *unit) closeLogs() {
	if u.steps != nil {
		u.steps.Close()
		u.recs.Close()
		u.steps, u.recs = nil, nil
	}
}

func moduleFile(digest string) string {
	return modulePrefix + strings.TrimPrefix(digest, "sha256:") + moduleSuffix
}

// compressedModuleFile is the name of the module of that digest compressed with zstd: as a
// store of format v1 kept it, and as a bundle carries it.
func compressedModuleFile(digest string) string {
	return modulePrefix + strings.TrimPrefix(digest, "sha256:") + zstSuffix
}

// keepModuleOf writes the module of that digest, if the store does not have it and it was
// offered, or marks its file as just written.
func (s *Store) keepModuleOf(digest string) error {
	name := moduleFile(digest)
	s.mu.Lock()
	_, have := s.units[name]
	var wasm []byte
	for _, m := range s.offered {
		if m.digest == digest {
			wasm = m.wasm
		}
	}
	s.mu.Unlock()
	switch {
	case have:
		s.touch(name)
		return nil
	case wasm == nil:
		return nil // not offered: `wasmrec replay` says to give it with --module
	case int64(len(wasm)) > s.maxBytes/4:
		// It would crowd out the recordings, and be written again whenever the bound dropped it.
		s.mu.Lock()
		said := s.tooBig[digest]
		if s.tooBig == nil {
			s.tooBig = map[string]bool{}
		}
		s.tooBig[digest] = true
		s.mu.Unlock()
		if !said {
			s.log.Info("not keeping the module beside its recordings: it is more than a quarter of their bound; `wasmrec replay` then needs --module", "digest", digest, "bytes", len(wasm), "maxBytes", s.maxBytes)
		}
		return nil
	}
	// As it is: compressing a module of 3.7 MB took 25 ms of the host's CPU (zstd's fastest
	// level), a third of its size on disk.
	if err := writeFile(filepath.Join(s.dir, name), wasm); err != nil {
		return err
	}
	s.mu.Lock()
	s.units[name] = &unit{name: name, size: int64(len(wasm)), written: time.Now(), touched: time.Now()}
	s.bytes += int64(len(wasm))
	s.mu.Unlock()
	return nil
}

// touch marks the module file of that name, if the store has it, as just written; its file's
// time is set at most once a minute.
func (s *Store) touch(name string) {
	now := time.Now()
	s.mu.Lock()
	u, ok := s.units[name]
	set := ok && now.Sub(u.touched) > time.Minute
	if ok {
		u.written = now
	}
	if set {
		u.touched = now
	}
	s.mu.Unlock()
	if set {
		_ = os.Chtimes(filepath.Join(s.dir, name), now, now)
	}
}

// instance returns the unit of an instance's directory with its logs open for appending.
func (s *Store) instance(id string) (*unit, error) {
	if id == "" || strings.ContainsAny(id, `/\.`) {
		return nil, fmt.Errorf("a recording of an instance named %q", id)
	}
	name := instancePrefix + id
	s.mu.Lock()
	u := s.units[name]
	s.mu.Unlock()
	if u != nil && u.steps != nil {
		return u, nil
	}
	path := filepath.Join(s.dir, name)
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	if u == nil {
		u = &unit{name: name, written: time.Now()}
	} else { // its logs were closed while it was idle: its steps are read again for their chain
		steps, err := readDocs(filepath.Join(path, stepsLog), -1)
		if err != nil {
			return nil, err
		}
		u.count, u.chain = len(steps), Chain{}
		for _, b := range steps {
			u.chain = u.chain.Next(b)
		}
	}
	var err error
	if u.steps, err = os.OpenFile(filepath.Join(path, stepsLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		return nil, err
	}
	if u.recs, err = os.OpenFile(filepath.Join(path, recordingsLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		u.steps.Close()
		u.steps = nil
		return nil, err
	}
	s.mu.Lock()
	s.units[name] = u
	s.mu.Unlock()
	return u, nil
}

func (s *Store) writeRecording(rec *Recording, before []*Step) error {
	u, err := s.instance(rec.Instance)
	if err != nil {
		return err
	}
	if len(before) < u.count {
		return fmt.Errorf("instance %s: a recording after %d steps, but its log holds %d already", rec.Instance, len(before), u.count)
	}
	pending, chain := len(u.pendSteps), u.chain
	for _, st := range append(before[u.count:len(before):len(before)], rec.Step) {
		at := len(u.pendSteps)
		u.pendSteps = st.appendJSON(u.pendSteps)
		u.chain = u.chain.Next(u.pendSteps[at:])
		u.pendSteps = append(u.pendSteps, '\n')
	}
	rec.Before, rec.Chain = len(before), u.chain.String()
	rec.Request = *rec.Step.Request
	rec.Outcome = rec.Step.Outcome
	b, _, err := rec.Encode()
	if err != nil {
		u.pendSteps, u.chain = u.pendSteps[:pending], chain
		return err
	}
	u.pendRecs = append(append(u.pendRecs, b...), '\n')
	u.count = len(before) + 1
	s.mu.Lock()
	u.written = time.Now()
	s.mu.Unlock()
	if len(u.pendSteps)+len(u.pendRecs) > maxPending {
		s.writePending()
	}
	if rec.Module != "" {
		if err := s.keepModuleOf(rec.Module); err != nil {
			s.log.Error(err, "keeping the module beside the recordings", "digest", rec.Module)
		}
	}
	s.written.Add(1)
	return nil
}

// appendEntry appends an entry of a log holding docs (JSON documents, each followed by a
// newline) to dst: the length of the zstd frame, then the frame.
func appendEntry(dst, docs []byte) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = compress(dst, docs)
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// readDocs reads the first n JSON documents of a log (all for n < 0). An entry cut short at
// the end (the host stopped while writing it) ends the log.
func readDocs(path string, n int) ([][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for entry := 0; len(raw) >= 4 && (n < 0 || len(out) < n); entry++ {
		size := binary.LittleEndian.Uint32(raw)
		if uint64(size) > uint64(len(raw)-4) {
			break
		}
		b, err := decompress(raw[4 : 4+size])
		if err != nil {
			return nil, fmt.Errorf("%s, entry %d: %w", path, entry, err)
		}
		// One document, or several each followed by a newline (a JSON document as written
		// here holds none of its own).
		for doc := range bytes.SplitSeq(b, []byte{'\n'}) {
			if len(doc) > 0 && (n < 0 || len(out) < n) {
				out = append(out, doc)
			}
		}
		raw = raw[4+size:]
	}
	return out, nil
}

// docBytes returns documents [from, to) of a log as a log of their own, one entry each.
func docBytes(path string, from, to int) ([]byte, error) {
	docs, err := readDocs(path, -1)
	if err != nil {
		return nil, err
	}
	if from < 0 || to < from || to > len(docs) {
		return nil, fmt.Errorf("%s holds %d documents, not %d", path, len(docs), to)
	}
	var out []byte
	for _, d := range docs[from:to] {
		out = appendEntry(out, append(d[:len(d):len(d)], '\n'))
	}
	return out, nil
}

// trim drops the least recently written units, but keep, until the store is within its bound.
func (s *Store) trim(keep string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes <= s.maxBytes {
		return
	}
	units := make([]*unit, 0, len(s.units))
	for _, u := range s.units {
		if u.name != keep {
			units = append(units, u)
		}
	}
	slices.SortFunc(units, func(a, b *unit) int { return a.written.Compare(b.written) })
	for _, u := range units {
		if s.bytes <= s.maxBytes {
			return
		}
		u.closeLogs()
		if err := os.RemoveAll(filepath.Join(s.dir, u.name)); err != nil {
			s.log.Error(err, "removing recordings past the store's bound", "path", filepath.Join(s.dir, u.name))
			continue
		}
		s.bytes -= u.size
		delete(s.units, u.name)
		s.log.Info("dropped recordings past the store's bound, the least recently written first", "dropped", u.name, "bytes", u.size, "maxBytes", s.maxBytes)
	}
}

// writeFile writes data to path through a temporary file.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// Listed is a recording in a store.
type Listed struct {
	Digest string
	*Recording
	dir   string // its instance's
	index int    // in its instance's recordings.log
}

// List returns the store's recordings, the oldest first.
func (s *Store) List() []Listed {
	l, _ := List(s.dir)
	return l
}

// List returns the recordings in dir, a plugin's, the oldest first. Their Steps are not read.
func List(dir string) ([]Listed, error) {
	instances, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Listed
	for _, in := range instances {
		if !in.IsDir() || !strings.HasPrefix(in.Name(), instancePrefix) {
			continue
		}
		idir := filepath.Join(dir, in.Name())
		frames, err := readDocs(filepath.Join(idir, recordingsLog), -1)
		if err != nil {
			continue
		}
		for i, b := range frames {
			rec, err := DecodeRecording(b)
			if err != nil {
				continue
			}
			out = append(out, Listed{Digest: digestOf(b), Recording: rec, dir: idir, index: i})
		}
	}
	slices.SortStableFunc(out, func(a, b Listed) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// find finds the recording of that digest, or of a prefix of one, in dir.
func find(dir, digest string) (Listed, error) {
	hex := strings.TrimPrefix(digest, "sha256:")
	all, err := List(dir)
	if err != nil {
		return Listed{}, err
	}
	var match []Listed
	for _, l := range all {
		if strings.HasPrefix(strings.TrimPrefix(l.Digest, "sha256:"), hex) {
			match = append(match, l)
		}
	}
	switch len(match) {
	case 0:
		return Listed{}, fmt.Errorf("no recording %s in %s: `wasmrec replay %s --list` lists them", digest, dir, dir)
	case 1:
		return match[0], nil
	}
	return Listed{}, fmt.Errorf("%d recordings in %s begin with %s: give more of the digest", len(match), dir, hex)
}

// Load reads the recording of that digest (a prefix of its hex digits will do, if only one
// matches) from dir, a plugin's, with its reconcile step, and the steps before it, which it
// checks against the recording's chain.
func Load(dir, digest string) (*Recording, []*Step, error) {
	l, err := find(dir, digest)
	if err != nil {
		return nil, nil, err
	}
	return l.Load()
}

// InstanceDir is the directory of the instance the recording was made on: recordings of one
// instance share the steps before them.
func (l Listed) InstanceDir() string { return l.dir }

// Load reads a listed recording with its reconcile step and the steps before it, checked
// against its chain, without listing its directory again.
func (l Listed) Load() (*Recording, []*Step, error) {
	short := ShortDigest(l.Digest)
	frames, err := readDocs(filepath.Join(l.dir, stepsLog), l.Before+1)
	if err != nil {
		return nil, nil, fmt.Errorf("recording %s: %w", short, err)
	}
	if len(frames) != l.Before+1 {
		return nil, nil, fmt.Errorf("recording %s: its instance's log holds %d steps, not the %d it needs", short, len(frames), l.Before+1)
	}
	var chain Chain
	steps := make([]*Step, 0, len(frames))
	for i, b := range frames {
		st, err := DecodeStep(b)
		if err != nil {
			return nil, nil, fmt.Errorf("recording %s: step %d: %w", short, i, err)
		}
		chain = chain.Next(b)
		steps = append(steps, st)
	}
	if chain.String() != l.Chain {
		return nil, nil, fmt.Errorf("recording %s: the steps in its instance's log are not those it was recorded with (their chain is %s, the recording's %s)", short, ShortDigest(chain.String()), ShortDigest(l.Chain))
	}
	rec := *l.Recording
	rec.Step = steps[l.Before]
	if rec.Step.Kind != StepReconcile {
		return nil, nil, fmt.Errorf("recording %s: its step %d is a %s, not a reconcile", short, l.Before, rec.Step.Kind)
	}
	return &rec, steps[:l.Before], nil
}

// LoadModule reads the module of that digest from dir, a plugin's, if it was kept there.
func LoadModule(dir, digest string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, moduleFile(digest)))
	if errors.Is(err, fs.ErrNotExist) { // kept by a store of format v1
		if z, zerr := os.ReadFile(filepath.Join(dir, compressedModuleFile(digest))); zerr == nil {
			return decompress(z)
		}
	}
	return b, err
}

// ShortDigest is a digest's first 12 hex digits.
func ShortDigest(d string) string {
	hex := strings.TrimPrefix(d, "sha256:")
	return hex[:min(12, len(hex))]
}
