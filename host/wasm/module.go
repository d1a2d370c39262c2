package wasm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/time/rate"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm/internal/binary"
)

// Module is one compiled plugin version with its pool of instances.
//
// Three locks guard its state, each for a job of its own:
//   - mu guards the pool: idle, closed and shrink. get and put take it on every reconcile, and
//     hold it only while they change those.
//   - codeMu guards the code and what goes with it: wasm, code, unloadCode, snap, taking and
//     noSnapshot; snapTaken waits with it. codeFor holds it while it loads the code again, a
//     compile or a read from the cache directory that takes up to seconds: were it mu, that
//     would hold up what needs the pool alone (Instances for a metrics scrape, Retire, the idle
//     timer, the get and put of instances already made).
//   - dropMu guards dropped, the guest's output lost past the LogLimit and not said yet. A
//     reconcile takes it as it ends, never with another lock held, so it has no place in their
//     order. mu would do; it keeps log accounting off the lock every get and put takes.
//
// mu is taken before codeMu (armCodeUnload runs under mu), never after.
type Module struct {
	opts   Options
	engine *Engine
	// wasm is what code is loaded from again after it was let go: the code's own bytes while it
	// is loaded, nil once they were written to the engine's cache directory (spill). Guarded by
	// codeMu.
	wasm     []byte
	digest   string
	manifest *abi.Manifest
	describe Describe
	released sync.Once   // code released, by Close
	charge   *codeCharge // what the Module holds of Options.Code, given back by Close

	// code is shared with the other Modules of the same bytes and settings; nil while it is let
	// go (CodeIdleTimeout). It changes under codeMu, only while every token is held, so an
	// instance being made (its token held) always finds it.
	codeMu     sync.Mutex
	code       *code
	unloadCode *time.Timer // armed while the pool is empty
	// snap is what new instances start from, taken from the first one made with the code, and
	// let go with it; taking says one is being taken (snapTaken is signalled when it ends),
	// noSnapshot that taking one failed (the Module does not try again). All are guarded by
	// codeMu.
	snap       *snapshot
	taking     bool
	snapTaken  *sync.Cond
	noSnapshot bool

	// logLines and logBytes pace the guest's output over all instances; dropNote says now and
	// then what was dropped since it last did (dropped), and which limits were met.
	logLines, logBytes *rate.Limiter
	dropNote           rate.Sometimes
	dropMu             sync.Mutex // guards dropped
	dropped            droppedOutput

	tokens chan struct{} // one per instance allowed; held while an instance is checked out
	mu     sync.Mutex    // guards idle, closed and shrink
	idle   []*instance   // the oldest first: get takes the last, put appends
	closed bool
	// shrink closes the instances idle past IdleTimeout; armed while any is idle.
	shrink *time.Timer

	stats counters
}

// Compile checks wasm against ABI v1, compiles it, instantiates it once to read and check its
// manifest, and keeps that instance in the pool. Modules of the same bytes, memory cap and
// interruption share their compiled code (see code); each has its own instances. Every error
// names the plugin. A panic while compiling or instantiating is recovered, logged with its
// stack, and returned as a *PanicError: one plugin's module never takes the host down.
func (e *Engine) Compile(ctx context.Context, wasm []byte, opts Options) (_ *Module, err error) {
	opts = opts.withDefaults()
	m := &Module{opts: opts, engine: e, digest: digestOf(wasm), tokens: make(chan struct{}, opts.MaxInstances),
		logLines: rate.NewLimiter(rate.Limit(opts.LogLimit.LinesPerSecond), int(2*opts.LogLimit.LinesPerSecond)),
		logBytes: rate.NewLimiter(rate.Limit(opts.LogLimit.BytesPerSecond), int(2*opts.LogLimit.BytesPerSecond)),
		dropNote: rate.Sometimes{First: 1, Interval: 30 * time.Second},
	}
	m.snapTaken = sync.NewCond(&m.codeMu)
	for range opts.MaxInstances {
		m.tokens <- struct{}{}
	}
	defer func() {
		if err == nil || errors.As(err, new(*BudgetError)) { // the budget's words name the plugin
			return
		}
		var p *PanicError
		if errors.As(err, &p) {
			opts.Logger.Error(err, "recovered a panic while loading the plugin's module", "digest", m.digest, "stack", string(p.Stack))
		}
		err = fmt.Errorf("plugin %q: %w", opts.Name, err)
	}()
	defer recoverPanic(&err)

	if m.charge, err = chargeCompile(opts.Code, len(wasm), e.holds(m.digest, opts)); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			m.charge.release()
		}
	}()
	if m.code, err = e.load(ctx, wasm, m.digest, opts); err != nil {
		return nil, err
	}
	m.charge.settle(len(wasm))
	m.wasm, m.describe = m.code.wasm, m.code.describe
	if why := m.code.snapshots.Why; why != "" && *opts.Snapshots {
		opts.Logger.Info("instances of this plugin start by running its initialisation, not from a snapshot", "reason", why)
	}
	defer func() {
		if err != nil {
			_ = e.release(context.WithoutCancel(ctx), m.code)
		}
	}()
	<-m.tokens
	inst, err := m.newInstance(ctx, nil)
	if err != nil {
		return nil, err
	}
	if m.manifest, err = inst.readManifest(ctx); err != nil {
		return nil, err
	}
	if m.manifest.MapsInGuest() && inst.mapFn == nil {
		return nil, fmt.Errorf("its manifest has a watch whose map is %q, but the module does not export %s: build it with an SDK that has map functions (sdk/go's MapWatch), or export %s as ABI.md says", abi.MapFunc, abi.ExportMap, abi.ExportMap)
	}
	m.put(inst, true)
	return m, nil
}

// Digest is the module's sha256, "sha256:<hex>".
func (m *Module) Digest() string { return m.digest }

// ShortDigest is the first 12 hex digits of the digest, as log lines show it.
func (m *Module) ShortDigest() string { return ShortDigest(m.digest) }

// ShortDigest cuts a "sha256:<hex>" digest to its first 12 hex digits.
func ShortDigest(digest string) string {
	_, hex, ok := strings.Cut(digest, ":")
	if !ok {
		hex = digest
	}
	return hex[:min(12, len(hex))]
}

// Manifest is what the plugin says about itself.
func (m *Module) Manifest() *abi.Manifest { return m.manifest }

// Describe lists the module's exports and imports.
func (m *Module) Describe() Describe { return m.describe }

// Name is the plugin's name.
func (m *Module) Name() string { return m.opts.Name }

// Stats returns what has happened to the module's instances so far: a copy, which the module's
// later events leave as it is.
func (m *Module) Stats() Stats { return m.stats.read() }

// Close retires the module and releases its compiled code and runtime (once no other Module
// shares them). If reconciles still run on it when ctx ends, Close returns an error and the
// code is released once they are back, never under them.
func (m *Module) Close(ctx context.Context) error {
	if err := m.Retire(ctx); err != nil {
		go func() {
			_ = m.Retire(context.Background())
			m.released.Do(func() {
				_ = m.releaseCode(context.Background())
				m.charge.release()
			})
		}()
		return err
	}
	var err error
	m.released.Do(func() {
		err = m.releaseCode(context.WithoutCancel(ctx))
		m.charge.release()
	})
	return err
}

// newInstance instantiates the module: from its snapshot if it has one, else running
// _initialize, and then it takes the snapshot from the new instance if it has none yet. A panic
// in wazero while it does is recovered and returned as a *PanicError, so that a pool's token is
// never lost to one. rp, if set, replays a recorded _initialize: the instance starts plainly,
// its inputs from the recording.
func (m *Module) newInstance(ctx context.Context, rp *replayer) (_ *instance, err error) {
	defer recoverPanic(&err)
	code, err := m.codeFor(ctx)
	if err != nil {
		return nil, err
	}
	var (
		snap  *snapshot
		taker bool
	)
	if rp == nil {
		snap, taker = m.snapshotToStart(code)
	}
	if taker {
		defer m.tookSnapshot()
	}
	inst := &instance{module: m, stack: make([]uint64, 2), replay: rp}
	inst.stdout = &lineWriter{inst: inst, stream: "stdout"}
	inst.stderr = &lineWriter{inst: inst, stream: "stderr"}
	if m.opts.Record || rp != nil {
		inst.id = newInstanceID()
		if snap == nil {
			inst.step = &recording.Step{Kind: recording.StepInitialize}
		}
	}
	// The guest's monotonic clock starts with the instance: read from the host's, it would tell
	// the plugin how long the host (or the machine) has been up. It starts at 1 ns, not 0: Go's
	// runtime takes a first reading of 0 for a broken clock and throws. An instance started from
	// a snapshot goes on from the snapshot's reading: its runtime holds times read before. The
	// wall clock is real.
	hostNow := m.engine.nanotime
	origin := hostNow() - 1
	start := []string{abi.ExportInitialize}
	if snap != nil {
		origin, start = hostNow()-snap.clock, nil
	}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(m.opts.Name).
		WithStdout(inst.stdout).
		WithStderr(inst.stderr).
		WithWalltime(inst.walltime, sys.ClockResolution(time.Microsecond)).
		WithNanotime(func() int64 { return inst.monotime(hostNow() - origin + inst.skipped) }, 1).
		WithNanosleep(inst.sleep).
		WithRandSource(randomSource{inst}).
		WithStartFunctions(start...)
	mod, err := m.engine.instantiate(ctx, code.runtime, code.compiled, cfg)
	if err != nil {
		return nil, fmt.Errorf("instantiating: %w", explainPanic(explain(err, m.opts), inst.stderr, m.opts))
	}
	inst.mod = mod
	inst.mem = mod.Memory()
	inst.reconcile = mod.ExportedFunction(abi.ExportReconcile)
	inst.mapFn = mod.ExportedFunction(abi.ExportMap)
	if inst.step != nil {
		inst.step.Outcome = recording.Returned
		if rp != nil {
			if err := rp.endStep(inst.step); err != nil {
				_ = mod.Close(ctx)
				return nil, err
			}
		}
		inst.endStep()
	}
	if snap != nil {
		if err := snap.restore(mod, code.snapshots); err != nil {
			_ = mod.Close(ctx)
			return nil, fmt.Errorf("starting an instance from the snapshot: %w", err)
		}
		if snap.init != nil {
			inst.lineage, inst.lineageBytes = []*recording.Step{snap.init}, snap.init.Size()
		}
		m.stats.fromSnapshot.Add(1)
	} else if taker {
		m.takeSnapshot(ctx, code, inst, hostNow()-origin+inst.skipped)
	}
	if code.loopChecks && *m.opts.Interruptible {
		flag, ok := mod.ExportedGlobal(binary.InterruptExport).(api.MutableGlobal)
		if !ok {
			_ = mod.Close(ctx)
			return nil, fmt.Errorf("the instrumented module lacks its %s global", binary.InterruptExport)
		}
		inst.interrupt = flag
		inst.deadline = time.AfterFunc(time.Duration(math.MaxInt64), func() { flag.Set(1) })
		inst.deadline.Stop()
	}
	m.stats.instantiated.Add(1)
	m.stats.live.Add(1)
	return inst, nil
}
