package recording

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
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
	// MaxBytes bounds the plugin's recordings on disk; the oldest go first. Defaults to
	// DefaultMaxBytes.
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// Check refuses a policy that cannot be followed, naming the field.
func (p Policy) Check(field string) error {
	switch p.Mode {
	case "", ModeNone, ModeFailures, ModeAll:
		if p.Sample != 0 {
			return fmt.Errorf("%s.sample is set, but mode is %q: a sample is kept in mode sample only", field, p.Mode)
		}
	case ModeSample:
		if p.Sample <= 0 || p.Sample > 1 {
			return fmt.Errorf("%s.sample %v: give the share of reconciles to keep, more than 0 and at most 1 (0.01 keeps one in a hundred)", field, p.Sample)
		}
	default:
		return fmt.Errorf("%s.mode %q: use none, failures, sample or all", field, p.Mode)
	}
	if p.MaxBytes < 0 {
		return fmt.Errorf("%s.maxBytes %d: give a size in bytes, or leave it out for %d MiB", field, p.MaxBytes, DefaultMaxBytes>>20)
	}
	return nil
}

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
// Each instance the plugin ran has a directory of its own: the steps it ran, numbered from its
// _initialize (step-0), each written once, and its recordings, named by their digests. A
// recording of the instance's 100th reconcile needs the 99 steps before it: they are written
// with the first recording that needs them, and shared by those after. Past its bound, the
// store drops whole instances' directories, the least recently written first (never the one
// being written): a recording is kept with all it needs, or not at all. What is in the
// directory when a Store opens it is kept, in the order of the directories' times. Beside them
// are the modules the recordings were made with, kept while a recording of them is written.
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

	queue   chan job
	dropped atomic.Int64
	written atomic.Int64
	done    chan struct{}
	close   sync.Once
}

// unit is what the store drops whole: an instance's directory, or a module's file.
type unit struct {
	name    string
	size    int64
	written time.Time
	// what the writer has written of an instance: its steps' count, and their chain after each
	chains []Chain
}

type job struct {
	rec    *Recording
	before []*Step
	module []byte
	flush  chan struct{}
}

// Names in a store's directory.
const (
	instancePrefix  = "i-"
	recordingPrefix = "rec-"
	stepPrefix      = "step-"
	modulePrefix    = "module-"
	fileSuffix      = ".json.zst"
	moduleSuffix    = ".wasm.zst"
)

// Open opens (or makes) dir as a store of at most maxBytes (0: DefaultMaxBytes), and starts
// its writer; Close stops it.
func Open(dir string, maxBytes int64, log logr.Logger) (*Store, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("recordings directory: %w", err)
	}
	s := &Store{dir: dir, maxBytes: maxBytes, log: log, units: map[string]*unit{}, queue: make(chan job, 256), done: make(chan struct{})}
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
			files, _ := os.ReadDir(filepath.Join(dir, e.Name()))
			for _, f := range files {
				if fi, err := f.Info(); err == nil {
					u.size += fi.Size()
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
// written yet are written with it, and rec's Before and Chain set from them. It returns at
// once; false says the queue was full and rec was dropped.
func (s *Store) Put(rec *Recording, before []*Step) bool {
	select {
	case s.queue <- job{rec: rec, before: before}:
		return true
	default:
		s.dropped.Add(1)
		return false
	}
}

// KeepModule queues a module the plugin runs for writing, so that its recordings can be
// replayed with nothing else; it is kept as long as recordings of it are written.
func (s *Store) KeepModule(wasm []byte) {
	select {
	case s.queue <- job{module: wasm}:
	default:
		s.log.Info("not keeping the module beside the recordings: the writer's queue is full; `wasmrec replay` then needs --module", "digest", digestOf(wasm))
	}
}

// Flush waits until what was Put before it is written.
func (s *Store) Flush() {
	ch := make(chan struct{})
	select {
	case s.queue <- job{flush: ch}:
		<-ch
	case <-s.done:
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
	s.close.Do(func() {
		close(s.queue)
		<-s.done
	})
}

func (s *Store) write() {
	defer close(s.done)
	for j := range s.queue {
		switch {
		case j.flush != nil:
			close(j.flush)
		case j.module != nil:
			if err := s.writeModule(j.module); err != nil {
				s.log.Error(err, "keeping the module beside the recordings")
			}
		default:
			if err := s.writeRecording(j.rec, j.before); err != nil {
				s.log.Error(err, "writing a recording", "reconcileID", j.rec.ReconcileID)
			}
		}
	}
}

func moduleFile(digest string) string {
	return modulePrefix + strings.TrimPrefix(digest, "sha256:") + moduleSuffix
}

func (s *Store) writeModule(wasm []byte) error {
	name := moduleFile(digestOf(wasm))
	s.mu.Lock()
	_, have := s.units[name]
	s.mu.Unlock()
	if have {
		s.touch(name)
		return nil
	}
	n, err := writeFile(filepath.Join(s.dir, name), compress(wasm))
	if err != nil {
		return err
	}
	s.add(&unit{name: name, written: time.Now()}, n)
	return nil
}

func (s *Store) writeRecording(rec *Recording, before []*Step) error {
	if rec.Instance == "" || strings.ContainsAny(rec.Instance, `/\.`) {
		return fmt.Errorf("recording of an instance named %q", rec.Instance)
	}
	name := instancePrefix + rec.Instance
	path := filepath.Join(s.dir, name)
	s.mu.Lock()
	u := s.units[name]
	s.mu.Unlock()
	if u == nil {
		if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		u = &unit{name: name, written: time.Now(), chains: []Chain{{}}}
		s.add(u, 0)
	}
	if u.chains == nil {
		return fmt.Errorf("instance %s: its directory is from an earlier run of the host", rec.Instance)
	}
	var wrote int64
	for i := len(u.chains) - 1; i < len(before); i++ {
		b, err := marshal(before[i])
		if err != nil {
			return err
		}
		n, err := writeFile(filepath.Join(path, stepPrefix+strconv.Itoa(i)+fileSuffix), compress(b))
		if err != nil {
			return err
		}
		wrote += n
		u.chains = append(u.chains, u.chains[i].Next(b))
	}
	if len(before) >= len(u.chains) {
		return fmt.Errorf("instance %s: a recording after %d steps, but %d were written: the steps are gone", rec.Instance, len(before), len(u.chains)-1)
	}
	rec.Before, rec.Chain = len(before), u.chains[len(before)].String()
	b, d, err := rec.Encode()
	if err != nil {
		return err
	}
	n, err := writeFile(filepath.Join(path, recordingPrefix+strings.TrimPrefix(d, "sha256:")+fileSuffix), compress(b))
	if err != nil {
		return err
	}
	s.add(u, wrote+n)
	if rec.Module != "" {
		s.touch(moduleFile(rec.Module))
	}
	s.written.Add(1)
	s.trim(name)
	return nil
}

// add counts n more bytes in u, written now.
func (s *Store) add(u *unit, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.units[u.name] = u
	u.size += n
	u.written = time.Now()
	s.bytes += n
}

// touch marks the unit of that name, if the store has it, as just written.
func (s *Store) touch(name string) {
	s.mu.Lock()
	u, ok := s.units[name]
	if ok {
		u.written = time.Now()
	}
	s.mu.Unlock()
	if ok {
		_ = os.Chtimes(filepath.Join(s.dir, name), u.written, u.written)
	}
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
		if err := os.RemoveAll(filepath.Join(s.dir, u.name)); err != nil {
			s.log.Error(err, "removing recordings past the store's bound", "path", filepath.Join(s.dir, u.name))
			continue
		}
		s.bytes -= u.size
		delete(s.units, u.name)
	}
}

func marshal(st *Step) ([]byte, error) {
	b, err := jsonMarshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding a recorded step: %w", err)
	}
	return b, nil
}

// writeFile writes data to path through a temporary file, and returns its size.
func writeFile(path string, data []byte) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return 0, err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return 0, err
	}
	return int64(len(data)), nil
}

// Listed is a recording in a store.
type Listed struct {
	Digest string
	Size   int64
	Time   time.Time // when it was written
	path   string
}

// List returns the store's recordings, the oldest first.
func (s *Store) List() []Listed {
	l, _ := List(s.dir)
	return l
}

// List returns the recordings in dir, a plugin's, the oldest first.
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
		files, _ := os.ReadDir(filepath.Join(dir, in.Name()))
		for _, f := range files {
			name := f.Name()
			if !strings.HasPrefix(name, recordingPrefix) || !strings.HasSuffix(name, fileSuffix) {
				continue
			}
			info, err := f.Info()
			if err != nil {
				continue
			}
			hex := strings.TrimSuffix(strings.TrimPrefix(name, recordingPrefix), fileSuffix)
			out = append(out, Listed{Digest: "sha256:" + hex, Size: info.Size(), Time: info.ModTime(), path: filepath.Join(dir, in.Name(), name)})
		}
	}
	slices.SortStableFunc(out, func(a, b Listed) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// Load reads the recording of that digest (a prefix of its hex digits will do, if only one
// matches) from dir, a plugin's, and the steps before it, which it checks against the
// recording's chain.
func Load(dir, digest string) (*Recording, []*Step, error) {
	hex := strings.TrimPrefix(digest, "sha256:")
	all, err := List(dir)
	if err != nil {
		return nil, nil, err
	}
	var match []Listed
	for _, l := range all {
		if strings.HasPrefix(strings.TrimPrefix(l.Digest, "sha256:"), hex) {
			match = append(match, l)
		}
	}
	switch len(match) {
	case 0:
		return nil, nil, fmt.Errorf("no recording %s in %s: `wasmrec replay %s --list` lists them", digest, dir, dir)
	case 1:
	default:
		return nil, nil, fmt.Errorf("%d recordings in %s begin with %s: give more of the digest", len(match), dir, hex)
	}
	rec, err := ReadRecording(match[0].path)
	if err != nil {
		return nil, nil, err
	}
	steps := make([]*Step, 0, rec.Before)
	var chain Chain
	for i := range rec.Before {
		z, err := os.ReadFile(filepath.Join(filepath.Dir(match[0].path), stepPrefix+strconv.Itoa(i)+fileSuffix))
		if err != nil {
			return nil, nil, fmt.Errorf("recording %s: step %d of the %d its instance ran before it: %w", ShortDigest(match[0].Digest), i, rec.Before, err)
		}
		b, err := maybeDecompress(z)
		if err != nil {
			return nil, nil, fmt.Errorf("recording %s: step %d: %w", ShortDigest(match[0].Digest), i, err)
		}
		st, err := DecodeStep(b)
		if err != nil {
			return nil, nil, fmt.Errorf("recording %s: step %d: %w", ShortDigest(match[0].Digest), i, err)
		}
		chain = chain.Next(b)
		steps = append(steps, st)
	}
	if chain.String() != rec.Chain {
		return nil, nil, fmt.Errorf("recording %s: the %d steps before it are not those it was recorded after (their chain is %s, the recording's %s)", ShortDigest(match[0].Digest), rec.Before, ShortDigest(chain.String()), ShortDigest(rec.Chain))
	}
	return rec, steps, nil
}

// LoadModule reads the module of that digest from dir, a plugin's, if it was kept there.
func LoadModule(dir, digest string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, moduleFile(digest)))
	if err != nil {
		return nil, err
	}
	return decompress(b)
}

// ReadRecording reads one recording file.
func ReadRecording(path string) (*Recording, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := DecodeRecording(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ShortDigest is a digest's first 12 hex digits.
func ShortDigest(d string) string {
	hex := strings.TrimPrefix(d, "sha256:")
	return hex[:min(12, len(hex))]
}
