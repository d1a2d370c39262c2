package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/recording"
)

// Host serves the calls a guest makes during one reconcile. req is only valid during the call.
type Host interface {
	Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte)
}

// Call is one reconcile of a plugin, or one map of a watched object (Module.Map).
type Call struct {
	Request abi.Request
	// Host serves the guest's calls; nil refuses them all.
	Host Host
	// Logger, tagged with the request and a reconcile ID, receives the guest's output.
	Logger logr.Logger
	// Map, set for Module.Map, is what the map export is given; Request is then unused.
	Map *recording.MapInput
	// MayRun, if set, is asked once the call has its CPU share and an instance, just before
	// the guest runs; false ends the call with ErrNotRun. A call that waited for either may
	// find meanwhile that it must not run: its replica no longer holds the plugin.
	MayRun func() bool

	// Step is what the reconcile saw and did, Before the steps its instance ran before it, its
	// _initialize first, and Instance names the instance: set when the module records
	// (Options.Record) and the reconcile ran, whatever its outcome. None changes afterwards.
	Step     *recording.Step
	Before   []*recording.Step
	Instance string
}

type instanceKey struct{}

// instance is one instantiation of a module. It is used by one goroutine at a time: the pool
// hands it out and takes it back.
type instance struct {
	module    *Module
	mod       api.Module
	mem       api.Memory
	reconcile api.Function
	mapFn     api.Function      // the map export; nil if the module has none
	interrupt api.MutableGlobal // set to 1, it stops the guest at its next loop (nil: not instrumented)
	deadline  *time.Timer       // sets interrupt at a reconcile's deadline; idle between reconciles
	stack     []uint64
	reqBuf    []byte

	pending        []byte // what read copies out next
	cur            *Call  // the reconcile in progress, nil between reconciles
	stdout, stderr *lineWriter

	idleSince time.Time // when it went back to the pool, while it is there

	// step is the step in progress when the module records or replays, and lineage the steps
	// the instance ran before it (lineageBytes their size), never changed in place: a Call's
	// Before is a slice of it.
	id           string // names it in recordings
	step         *recording.Step
	lineage      []*recording.Step
	lineageBytes int
	replay       *replayer // feeds a replay's inputs, and checks what the guest does
	recycle      bool      // its recorded steps passed MaxLineage: replace it

	wake    <-chan struct{} // ends the guest's sleeps: the reconcile's deadline or cancellation
	stop    <-chan struct{} // ends them too: the host is stopping (reconcile.Stopping)
	skipped int64           // ns the guest's clock is ahead: sleeps cut short by a stop
	logged  int             // bytes the reconcile in progress has logged
	dropped droppedOutput   // what it could not log, past the LogLimit
}

// droppedOutput counts guest output dropped past a LogLimit, and by which limit.
type droppedOutput struct {
	lines, bytes                       int
	perReconcile, linesRate, bytesRate bool
}

func (d *droppedOutput) add(o droppedOutput) {
	d.lines += o.lines
	d.bytes += o.bytes
	d.perReconcile = d.perReconcile || o.perReconcile
	d.linesRate = d.linesRate || o.linesRate
	d.bytesRate = d.bytesRate || o.bytesRate
}

// limits names the limits met.
func (d droppedOutput) limits() string {
	var met []string
	for _, l := range []struct {
		on   bool
		name string
	}{{d.perReconcile, "perReconcile"}, {d.linesRate, "linesPerSecond"}, {d.bytesRate, "bytesPerSecond"}} {
		if l.on {
			met = append(met, l.name)
		}
	}
	return strings.Join(met, ",")
}

// admit tells whether a line of n bytes of the guest's output may go to the log, and counts it
// as dropped if not.
func (inst *instance) admit(n int) bool {
	m := inst.module
	var d droppedOutput
	switch {
	case inst.logged+n > m.opts.LogLimit.PerReconcile:
		d.perReconcile = true
	case !m.logLines.Allow():
		d.linesRate = true
	case !m.logBytes.AllowN(time.Now(), n):
		d.bytesRate = true
	default:
		inst.logged += n
		return true
	}
	d.lines, d.bytes = 1, n
	inst.dropped.add(d)
	m.stats.logDroppedLines.Add(1)
	m.stats.logDroppedBytes.Add(int64(n))
	return false
}

// AdmitLog tells whether a host log line of n bytes that the plugin caused (its reconcile's
// error, say) may be written, within the plugin's log rates, and counts it as dropped if not.
func (m *Module) AdmitLog(n int) bool {
	if m.logLines.Allow() && m.logBytes.AllowN(time.Now(), n) {
		return true
	}
	m.stats.logDroppedLines.Add(1)
	m.stats.logDroppedBytes.Add(int64(n))
	return false
}

// endOutput closes a reconcile's output: what it dropped is added to what the plugin has
// dropped since it last said so, which it says at most every 30 s.
func (inst *instance) endOutput() {
	m := inst.module
	if inst.dropped.lines > 0 {
		m.dropMu.Lock()
		m.dropped.add(inst.dropped)
		m.dropMu.Unlock()
		m.dropNote.Do(func() {
			m.dropMu.Lock()
			d := m.dropped
			m.dropped = droppedOutput{}
			m.dropMu.Unlock()
			l := m.opts.LogLimit
			inst.logger().Info("dropped the plugin's output past its log limit since this was last said (all of it is counted in wasmrec_plugin_log_dropped_lines_total and _bytes_total); raise logLimit in its config to keep more",
				"droppedLines", d.lines, "droppedBytes", d.bytes, "limitsMet", d.limits(),
				"linesPerSecond", l.LinesPerSecond, "bytesPerSecond", l.BytesPerSecond, "perReconcileBytes", l.PerReconcile)
		})
	}
	inst.logged, inst.dropped = 0, droppedOutput{}
}

func (inst *instance) logger() logr.Logger {
	if inst.cur != nil {
		return inst.cur.Logger
	}
	return inst.module.opts.Logger
}

// Reconcile runs the plugin's reconcile export on an instance from the pool. A trap, an
// interruption at ctx's deadline or a malformed result is an error, and the instance is thrown
// away. The error names the plugin.
func (m *Module) Reconcile(ctx context.Context, c *Call) (abi.Result, error) {
	res, _, err := m.run(ctx, c, false)
	return res, err
}

// Map runs the plugin's map export on an instance from the pool, for c.Map: an object of the
// kind of the manifest's watches[c.Map.Watch], whose event enqueues the requests it returns.
// The guest's host calls go to c.Host, as a reconcile's do. A trap, an interruption at ctx's
// deadline or a malformed result is an error, and the instance is thrown away. The error names
// the plugin. When the module records, the map is a step of its instance (c.Step), which a
// replay of a later reconcile on that instance runs again.
func (m *Module) Map(ctx context.Context, c *Call) ([]abi.Request, error) {
	if c.Map == nil {
		return nil, fmt.Errorf("plugin %q: a map needs its object", m.opts.Name)
	}
	_, reqs, err := m.run(ctx, c, true)
	return reqs, err
}

// run runs c, a map or a reconcile, on an instance from the pool, under the module's CPU share.
// When the module records, c gets the step and the steps its instance ran before it.
func (m *Module) run(ctx context.Context, c *Call, isMap bool) (res abi.Result, reqs []abi.Request, err error) {
	if s := m.opts.CPU; s != nil {
		if err := s.acquire(ctx); err != nil {
			return res, nil, fmt.Errorf("plugin %q: %w", m.opts.Name, err)
		}
		defer s.release()
	}
	inst, err := m.get(ctx)
	if err != nil {
		return res, nil, err
	}
	if c.MayRun != nil && !c.MayRun() {
		m.put(inst, true)
		return res, nil, ErrNotRun
	}
	var healthy bool
	if isMap {
		if m.opts.Record {
			inst.step = &recording.Step{Kind: recording.StepMap, Map: &recording.MapInput{Watch: c.Map.Watch, Object: bytes.Clone(c.Map.Object)}}
		}
		reqs, healthy, err = inst.map1(ctx, c)
	} else {
		if m.opts.Record {
			inst.step = &recording.Step{Kind: recording.StepReconcile, Request: &recording.Request{Namespace: c.Request.Namespace, Name: c.Request.Name, Retries: c.Request.Retries}}
		}
		// Debug lines the host would drop need not be made; a recording keeps them.
		res, healthy, err = inst.reconcile1(ctx, c, !m.opts.Record && !c.Logger.V(1).Enabled())
	}
	if step := inst.step; step != nil {
		c.Step, c.Before, c.Instance = step, inst.lineage[:len(inst.lineage):len(inst.lineage)], inst.id
		inst.endStep()
		inst.recycle = inst.lineageBytes > MaxLineage
	}
	m.put(inst, healthy)
	return res, reqs, err
}

// endStep adds the step in progress to the instance's lineage. The lineage only grows: a
// Call's Before, a slice of it whose capacity is its length, never sees a change.
func (inst *instance) endStep() {
	inst.lineage = append(inst.lineage, inst.step)
	inst.lineageBytes += inst.step.Size()
	inst.step = nil
}

// reconcile1 runs c on inst, telling the guest whether the host drops its debug lines, and
// says whether inst may serve again. Its step, if it records, gets the outcome. c is only read:
// callers may share it.
func (inst *instance) reconcile1(ctx context.Context, c *Call, dropsDebug bool) (res abi.Result, healthy bool, err error) {
	req := c.Request
	req.DropsDebug = dropsDebug
	inst.reqBuf = abi.AppendRequest(inst.reqBuf[:0], req)
	inst.stack[0] = uint64(len(inst.reqBuf))
	ret, healthy, err := inst.invoke(ctx, c, inst.reconcile, inst.reqBuf)
	if err != nil || ret == 0 {
		return abi.Result{}, healthy, err
	}
	m := inst.module
	b, err := inst.resultBytes(ret)
	if err == nil {
		if inst.step != nil {
			inst.step.Result = bytes.Clone(b)
		}
		res, err = abi.DecodeResult(b)
	}
	if err != nil {
		m.stats.badResults.Add(1)
		err = fmt.Errorf("plugin %q: %w", m.opts.Name, err)
		step := inst.stepOrScratch()
		step.Outcome, step.Error = recording.BadResult, err.Error()
		return abi.Result{}, false, err
	}
	return res, healthy, nil
}

// map1 runs c, a map, on inst, and says whether inst may serve again. Its step, if it
// records, gets the outcome.
func (inst *instance) map1(ctx context.Context, c *Call) (reqs []abi.Request, healthy bool, err error) {
	m := inst.module
	if inst.mapFn == nil {
		return nil, true, fmt.Errorf("plugin %q: its module does not export %s", m.opts.Name, abi.ExportMap)
	}
	inst.stack[0], inst.stack[1] = uint64(c.Map.Watch), uint64(len(c.Map.Object))
	ret, healthy, err := inst.invoke(ctx, c, inst.mapFn, c.Map.Object)
	if err != nil || ret == 0 {
		return nil, healthy, err
	}
	ptr, n := abi.UnpackPtrLen(ret)
	b, ok := inst.mem.Read(ptr, n)
	switch {
	case n > abi.MaxMapResult:
		err = fmt.Errorf("%w: %d bytes, more than %d", abi.ErrMalformedRequests, n, abi.MaxMapResult)
	case !ok:
		err = fmt.Errorf("%w: [%d, %d) is outside the plugin's %d bytes of memory", abi.ErrMalformedRequests, ptr, uint64(ptr)+uint64(n), inst.mem.Size())
	default:
		if inst.step != nil {
			inst.step.Result = bytes.Clone(b)
		}
		reqs, err = abi.DecodeRequests(b)
	}
	if err != nil {
		m.stats.badResults.Add(1)
		err = fmt.Errorf("plugin %q: %w", m.opts.Name, err)
		step := inst.stepOrScratch()
		step.Outcome, step.Error = recording.BadResult, err.Error()
		return nil, false, err
	}
	return reqs, healthy, nil
}

// stepOrScratch is the step in progress, or, when none is recorded, a step whose writes are
// never read.
func (inst *instance) stepOrScratch() *recording.Step {
	if inst.step != nil {
		return inst.step
	}
	return new(recording.Step)
}

// invoke calls fn, an export that takes a pending buffer (the reconcile or the map), for c on
// inst: pending is what read hands the guest first, and inst.stack holds fn's arguments. It
// returns what fn returned, and says whether inst may serve again. A trap or a timeout is an
// error (its step, if it records, gets the outcome); otherwise the step has returned and the
// caller reads ret.
func (inst *instance) invoke(ctx context.Context, c *Call, fn api.Function, pending []byte) (ret uint64, healthy bool, err error) {
	m := inst.module
	inst.cur = c
	inst.pending = pending
	stop := inst.armInterrupt(ctx)
	if inst.interrupt != nil { // a guest that may not be interrupted sleeps as long as it asks
		inst.wake = ctx.Done()
	}
	inst.stop = reconcile.Stopping(ctx)
	callErr := fn.CallWithStack(context.WithValue(ctx, instanceKey{}, inst), inst.stack)
	inst.wake, inst.stop = nil, nil
	// An instance whose flag was (or is being) set is not used again, even if it returned.
	interrupted := stop != nil && !stop()
	inst.stdout.flush()
	inst.stderr.flush()
	panicLines := inst.stderr.takePanic()
	if callErr == nil {
		for _, l := range panicLines { // it only wrote what looked like a panic, and went on
			inst.stderr.log([]byte(l), 1)
		}
	}
	inst.endOutput()
	inst.cur, inst.pending = nil, nil
	step := inst.stepOrScratch()

	if callErr != nil {
		if interrupted || errors.Is(ctx.Err(), context.DeadlineExceeded) { // our timer may fire before ctx's own
			m.stats.timeouts.Add(1)
			err = fmt.Errorf("plugin %q: %w: %w", m.opts.Name, c.worded(ErrTimedOut), explain(callErr, m.opts))
			step.Outcome, step.Error = recording.TimedOut, err.Error()
			return 0, false, err
		}
		m.stats.traps.Add(1)
		if len(panicLines) > 0 {
			err = newGuestPanic(m.opts.Name, panicLines, m.opts)
		} else {
			err = fmt.Errorf("plugin %q: %w: %w", m.opts.Name, c.worded(ErrTrapped), explain(callErr, m.opts))
		}
		step.Outcome, step.Error = recording.Trapped, err.Error()
		return 0, false, err
	}
	if inst.interrupt != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// It returned, but past its deadline: woken from a sleep there, before its next loop
		// check. The call timed out all the same, and counts as such; the instance is sound.
		// (One that may not be interrupted finishes past its deadline, as it may.)
		m.stats.timeouts.Add(1)
		err = fmt.Errorf("plugin %q: %w: the guest returned after its deadline", m.opts.Name, c.worded(ErrTimedOut))
		step.Outcome, step.Error = recording.TimedOut, err.Error()
		return 0, !interrupted, err
	}
	step.Outcome = recording.Returned
	return inst.stack[0], !interrupted, nil
}

// sleep is the guest's nanosleep (WASI's poll_oneoff on a clock, a Go guest's idle scheduler):
// it sleeps ns, or until the reconcile in progress ends, at its deadline or when it is
// cancelled, or until the host begins to stop. A guest asleep is in the host, where the loop
// checks that interrupt a guest cannot reach it: time.Sleep would hold a 20 s sleep past a 3 s
// timeout, and a SIGTERM for as long. Woken at its deadline, the guest goes on and stops at its
// next loop; only interruptible instances are woken there: one that may not be stopped
// half-way sleeps as long as it asked. Woken because the host stops, any guest goes on as if
// its sleep had ended, and finishes its reconcile within the graceful-shutdown timeout.
func (inst *instance) sleep(ns int64) {
	if inst.step != nil && inst.recordSleep(ns) {
		return
	}
	start := time.Now()
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select { // both nil between reconciles (at instantiation, say): the timer alone
	case <-t.C:
	case <-inst.wake:
	case <-inst.stop:
		// Its clock moves on by what it did not sleep: otherwise its runtime, its timer not yet
		// due, would sleep again at once, and again, spinning until the sleep's end.
		inst.skipped += max(0, ns-int64(time.Since(start)))
	}
}

// armInterrupt makes an instrumented instance stop at ctx's deadline (with the instance's own
// timer: no allocation, no goroutine), or when ctx is cancelled if it has no deadline. The
// returned stop disarms it and reports false if the flag was set. It is nil when there is
// nothing to arm.
func (inst *instance) armInterrupt(ctx context.Context) (stop func() bool) {
	switch {
	case inst.interrupt == nil || ctx.Done() == nil:
		return nil
	case ctx.Err() != nil:
		inst.interrupt.Set(1)
		return func() bool { return false }
	}
	if d, ok := ctx.Deadline(); ok {
		inst.deadline.Reset(time.Until(d))
		return inst.deadline.Stop
	}
	flag := inst.interrupt
	return context.AfterFunc(ctx, func() { flag.Set(1) })
}

// resultBytes returns the result envelope the guest returned, in its memory.
func (inst *instance) resultBytes(ret uint64) ([]byte, error) {
	ptr, n := abi.UnpackPtrLen(ret)
	if n > abi.ResultHeaderSize+abi.MaxMessage {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", abi.ErrMalformedResult, n, abi.ResultHeaderSize+abi.MaxMessage)
	}
	b, ok := inst.mem.Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("%w: [%d, %d) is outside the plugin's %d bytes of memory", abi.ErrMalformedResult, ptr, uint64(ptr)+uint64(n), inst.mem.Size())
	}
	return b, nil
}

func (inst *instance) readManifest(ctx context.Context) (*abi.Manifest, error) {
	if inst.module.opts.Record || inst.replay != nil {
		inst.step = &recording.Step{Kind: recording.StepManifest}
		defer inst.endStep()
	}
	b, err := inst.manifestBytes(ctx)
	if step := inst.step; step != nil {
		step.Outcome, step.Result = recording.Returned, bytes.Clone(b)
		if err != nil {
			step.Outcome, step.Error = recording.Trapped, err.Error()
		}
	}
	if err != nil {
		return nil, err
	}
	return abi.DecodeManifest(b)
}

func (inst *instance) manifestBytes(ctx context.Context) ([]byte, error) {
	fn := inst.mod.ExportedFunction(abi.ExportManifest)
	stack := []uint64{0}
	if err := fn.CallWithStack(context.WithValue(ctx, instanceKey{}, inst), stack); err != nil {
		return nil, fmt.Errorf("calling %s: %w", abi.ExportManifest, explainPanic(explain(err, inst.module.opts), inst.stderr, inst.module.opts))
	}
	ptr, n := abi.UnpackPtrLen(stack[0])
	if n > abi.MaxManifest {
		return nil, fmt.Errorf("manifest of %d bytes exceeds %d", n, abi.MaxManifest)
	}
	b, ok := inst.mem.Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("manifest at [%d, %d) is outside the plugin's memory", ptr, uint64(ptr)+uint64(n))
	}
	return b, nil
}

// explainPanic puts the panic message or fatal error the guest wrote before it trapped first
// in err.
func explainPanic(err error, stderr *lineWriter, opts Options) error {
	if stderr == nil || stderr.panicked == "" {
		return err
	}
	stderr.flush()
	p := newGuestPanic(opts.Name, []string{stderr.panicked}, opts)
	if strings.HasPrefix(p.Message, "fatal error: ") {
		return fmt.Errorf("the plugin failed: %s (%w)", p.Message, err)
	}
	return fmt.Errorf("the plugin panicked: %s (%w)", p.Message, err)
}

// lineWriter turns a guest's stdout or stderr into log lines.
type lineWriter struct {
	inst   *instance
	stream string
	buf    []byte
	// panicked is the first "panic: ..." or "fatal error: ..." line written, kept for the error
	// of a call that traps: a Go guest's panic message says what went wrong better than
	// "unreachable".
	panicked string
	// panicking holds, during a reconcile, a "panic: ..." or "fatal error: ..." line on stderr
	// and what followed it (a Go guest's goroutine stack), held back from the log: the call's
	// error says it, if the call traps (see GuestPanic), and the lines are logged as they are if
	// it does not.
	panicking    []string
	panickingLen int
}

// Bounds on a guest panic's stack kept for its error: a deep recursion's is cut.
const (
	maxPanicLines = 200
	maxPanicBytes = 32 << 10
)

// takePanic returns the lines held back as a panic's during the reconcile that ended, if
// any, and forgets them.
func (w *lineWriter) takePanic() []string {
	lines := w.panicking
	w.panicking, w.panickingLen = nil, 0
	return lines
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.inst.recordOutput(recording.Event{Type: recording.EventWrite, Fn: w.stream, In: p})
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			take := min(len(p), maxLogLine-len(w.buf))
			w.buf = append(w.buf, p[:take]...)
			p = p[take:]
			if len(w.buf) >= maxLogLine {
				w.flush()
			}
			continue
		}
		if len(w.buf) == 0 {
			w.emit(p[:min(i, maxLogLine)], 1) // no copy for the usual whole line
		} else {
			w.buf = append(w.buf, p[:min(i, maxLogLine-len(w.buf))]...)
			w.emit(w.buf, 1)
			w.buf = w.buf[:0]
		}
		p = p[i+1:]
	}
	return n, nil
}

// flush emits what is buffered, a line the guest has not ended (yet).
func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(w.buf, 0)
		w.buf = w.buf[:0]
	}
}

// emit logs one line of output, if the log limit admits it: the line and the end bytes (the
// newline) the guest wrote after it, which count against the limit and, dropped, as dropped.
func (w *lineWriter) emit(line []byte, end int) {
	if w.stream == "stderr" && w.inst.cur != nil && (len(w.panicking) > 0 || failureLine(line)) {
		if len(w.panicking) < maxPanicLines && w.panickingLen+len(line) <= maxPanicBytes {
			w.panicking = append(w.panicking, string(bytes.TrimRight(line, "\r")))
			w.panickingLen += len(line)
		}
		return
	}
	if w.panicked == "" && failureLine(line) {
		w.panicked = string(bytes.TrimRight(line, "\r"))
	}
	w.log(line, end)
}

// log logs one line of output, if the log limit admits it.
func (w *lineWriter) log(line []byte, end int) {
	if w.inst.admit(len(line) + end) {
		w.inst.logger().Info(string(bytes.TrimRight(line, "\r")), "stream", w.stream)
	}
}
