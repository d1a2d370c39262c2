package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/reconcile"
)

// Host serves the calls a guest makes during one reconcile. req is only valid during the call.
type Host interface {
	Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte)
}

// Call is one reconcile of a plugin.
type Call struct {
	Request abi.Request
	// Host serves the guest's calls; nil refuses them all.
	Host Host
	// Logger, tagged with the request and a reconcile ID, receives the guest's output.
	Logger logr.Logger
}

type instanceKey struct{}

// instance is one instantiation of a module. It is used by one goroutine at a time: the pool
// hands it out and takes it back.
type instance struct {
	module    *Module
	mod       api.Module
	mem       api.Memory
	reconcile api.Function
	interrupt api.MutableGlobal // set to 1, it stops the guest at its next loop (nil: not instrumented)
	deadline  *time.Timer       // sets interrupt at a reconcile's deadline; idle between reconciles
	stack     []uint64
	reqBuf    []byte

	pending        []byte // what read copies out next
	cur            *Call  // the reconcile in progress, nil between reconciles
	stdout, stderr *lineWriter

	idleSince time.Time // when it went back to the pool, while it is there

	wake    <-chan struct{} // ends the guest's sleeps: the reconcile's deadline or cancellation
	stop    <-chan struct{} // ends them too: the host is stopping (reconcile.Stopping)
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
	m.stats.LogDroppedLines.Add(1)
	m.stats.LogDroppedBytes.Add(int64(n))
	return false
}

// AdmitLog tells whether a host log line of n bytes that the plugin caused (its reconcile's
// error, say) may be written, within the plugin's log rates, and counts it as dropped if not.
func (m *Module) AdmitLog(n int) bool {
	if m.logLines.Allow() && m.logBytes.AllowN(time.Now(), n) {
		return true
	}
	m.stats.LogDroppedLines.Add(1)
	m.stats.LogDroppedBytes.Add(int64(n))
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
	if s := m.opts.CPU; s != nil {
		if err := s.acquire(ctx); err != nil {
			return abi.Result{}, fmt.Errorf("plugin %q: %w", m.opts.Name, err)
		}
		defer s.release()
	}
	inst, err := m.get(ctx)
	if err != nil {
		return abi.Result{}, err
	}
	inst.cur = c
	inst.reqBuf = abi.AppendRequest(inst.reqBuf[:0], c.Request)
	inst.pending = inst.reqBuf
	inst.stack[0] = uint64(len(inst.reqBuf))
	stop := inst.armInterrupt(ctx)
	if inst.interrupt != nil { // a guest that may not be interrupted sleeps as long as it asks
		inst.wake = ctx.Done()
	}
	inst.stop = reconcile.Stopping(ctx)
	callErr := inst.reconcile.CallWithStack(context.WithValue(ctx, instanceKey{}, inst), inst.stack)
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

	if callErr != nil {
		m.put(inst, false)
		if interrupted || errors.Is(ctx.Err(), context.DeadlineExceeded) { // our timer may fire before ctx's own
			m.stats.Timeouts.Add(1)
			return abi.Result{}, fmt.Errorf("plugin %q: %w: %w", m.opts.Name, ErrTimedOut, explain(callErr, m.opts))
		}
		m.stats.Traps.Add(1)
		if len(panicLines) > 0 {
			return abi.Result{}, newGuestPanic(m.opts.Name, panicLines)
		}
		return abi.Result{}, fmt.Errorf("plugin %q: %w: %w", m.opts.Name, ErrTrapped, explain(callErr, m.opts))
	}
	if inst.interrupt != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// It returned, but past its deadline: woken from a sleep there, before its next loop
		// check. The reconcile timed out all the same, and counts as such; the instance is
		// sound. (One that may not be interrupted finishes past its deadline, as it may.)
		m.put(inst, !interrupted)
		m.stats.Timeouts.Add(1)
		return abi.Result{}, fmt.Errorf("plugin %q: %w: the guest returned after its deadline", m.opts.Name, ErrTimedOut)
	}
	ret := inst.stack[0]
	if ret == 0 {
		m.put(inst, !interrupted)
		return abi.Result{}, nil
	}
	res, err := inst.readResult(ret)
	if err != nil {
		m.stats.BadResults.Add(1)
		m.put(inst, false)
		return abi.Result{}, fmt.Errorf("plugin %q: %w", m.opts.Name, err)
	}
	m.put(inst, !interrupted)
	return res, nil
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
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select { // both nil between reconciles (at instantiation, say): the timer alone
	case <-t.C:
	case <-inst.wake:
	case <-inst.stop:
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

func (inst *instance) readResult(ret uint64) (abi.Result, error) {
	ptr, n := abi.UnpackPtrLen(ret)
	if n > abi.ResultHeaderSize+abi.MaxMessage {
		return abi.Result{}, fmt.Errorf("%w: %d bytes, more than %d", abi.ErrMalformedResult, n, abi.ResultHeaderSize+abi.MaxMessage)
	}
	b, ok := inst.mem.Read(ptr, n)
	if !ok {
		return abi.Result{}, fmt.Errorf("%w: [%d, %d) is outside the plugin's %d bytes of memory", abi.ErrMalformedResult, ptr, uint64(ptr)+uint64(n), inst.mem.Size())
	}
	return abi.DecodeResult(b)
}

func (inst *instance) readManifest(ctx context.Context) (*abi.Manifest, error) {
	fn := inst.mod.ExportedFunction(abi.ExportManifest)
	stack := []uint64{0}
	if err := fn.CallWithStack(context.WithValue(ctx, instanceKey{}, inst), stack); err != nil {
		return nil, fmt.Errorf("calling %s: %w", abi.ExportManifest, explainPanic(explain(err, inst.module.opts), inst.stderr))
	}
	ptr, n := abi.UnpackPtrLen(stack[0])
	if n > abi.MaxManifest {
		return nil, fmt.Errorf("manifest of %d bytes exceeds %d", n, abi.MaxManifest)
	}
	b, ok := inst.mem.Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("manifest at [%d, %d) is outside the plugin's memory", ptr, uint64(ptr)+uint64(n))
	}
	return abi.DecodeManifest(b)
}

func instanceFrom(ctx context.Context) *instance {
	inst, _ := ctx.Value(instanceKey{}).(*instance)
	return inst
}

// explainPanic puts the panic message the guest wrote before it trapped first in err.
func explainPanic(err error, stderr *lineWriter) error {
	if stderr == nil || stderr.panicked == "" {
		return err
	}
	stderr.flush()
	return fmt.Errorf("the plugin panicked: %s (%w)", stderr.panicked, err)
}

// trap ends the guest's call with an error.
func trap(format string, args ...any) { panic(fmt.Errorf(format, args...)) }

// instantiateHostModule links the wasmrec host functions into r.
func instantiateHostModule(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(abi.ImportModule)
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostRead), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export(abi.ImportRead)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostLog), []api.ValueType{i32, i32, i32}, nil).Export(abi.ImportLog)
	for _, name := range []string{abi.ImportGet, abi.ImportList, abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus, abi.ImportPatch, abi.ImportDelete, abi.ImportEvent} {
		b.NewFunctionBuilder().WithGoModuleFunction(hostCall(name), []api.ValueType{i32, i32}, []api.ValueType{i64}).Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// read(ptr, len) -> i32
func hostRead(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceFrom(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	var p []byte
	if inst != nil {
		p = inst.pending
	}
	if uint64(len(p)) > uint64(n) {
		stack[0] = api.EncodeI32(-int32(abi.StatusTooLarge))
		return
	}
	if !mod.Memory().Write(ptr, p) {
		trap("read: [%d, %d) is outside the plugin's memory", ptr, uint64(ptr)+uint64(len(p)))
	}
	if inst != nil {
		inst.pending = nil
	}
	stack[0] = api.EncodeI32(int32(len(p)))
}

// log(level, ptr, len)
func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := api.DecodeI32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	n = min(n, maxLogLine)
	msg, ok := mod.Memory().Read(ptr, n)
	if !ok {
		trap("log: [%d, %d) is outside the plugin's memory", ptr, uint64(ptr)+uint64(n))
	}
	inst := instanceFrom(ctx)
	if inst == nil || !inst.admit(len(msg)) {
		return
	}
	text, kv := splitLog(msg)
	logLevel(inst.logger(), level, text, kv)
}

// hostKeys are the keys the host puts on a plugin's log lines; a plugin's own key of the same
// name is written "plugin.<key>", so that no line has a key twice.
var hostKeys = map[string]bool{"plugin": true, "request": true, "reconcileID": true, "digest": true, "logger": true,
	"stream": true, "severity": true, "msg": true, "level": true, "time": true, "controller": true, "err": true}

// splitLog reads a log call's message: the text, then optionally a NUL byte and a JSON array of
// alternating keys (strings) and values. What is not such an array stays part of the text.
func splitLog(b []byte) (string, []any) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	var pairs []any
	dec := json.NewDecoder(bytes.NewReader(b[i+1:]))
	dec.UseNumber()
	if err := dec.Decode(&pairs); err != nil || dec.More() {
		return string(bytes.ReplaceAll(b, []byte{0}, []byte(" "))), nil
	}
	kv := make([]any, 0, len(pairs)+len(pairs)%2)
	for j := 0; j < len(pairs); j += 2 {
		key, ok := pairs[j].(string)
		if !ok {
			key = fmt.Sprint(pairs[j])
		}
		if hostKeys[key] {
			key = "plugin." + key
		}
		var v any = "(MISSING)"
		if j+1 < len(pairs) {
			v = pairs[j+1]
		}
		if n, ok := v.(json.Number); ok { // a number stays one in JSON logs
			if i, err := n.Int64(); err == nil {
				v = i
			} else if f, err := n.Float64(); err == nil {
				v = f
			}
		}
		kv = append(kv, key, v)
	}
	return string(b[:i]), kv
}

func logLevel(log logr.Logger, level int32, msg string, kv []any) {
	switch {
	case level >= abi.LogError:
		var err error
		for j := 0; j+1 < len(kv); j += 2 {
			if kv[j] == "error" {
				err = errors.New(fmt.Sprint(kv[j+1]))
				kv = append(kv[:j:j], kv[j+2:]...)
				break
			}
		}
		log.Error(err, msg, kv...)
	case level == abi.LogWarn:
		log.Info(msg, append(kv, "severity", "warn")...) // logr has no warn level; "level" would clash with the handler's
	case level == abi.LogInfo:
		log.Info(msg, kv...)
	default:
		log.V(1).Info(msg, kv...)
	}
}

// hostCall serves get, list, create... : (ptr, len) -> status<<32 | response length.
func hostCall(name string) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		inst := instanceFrom(ctx)
		ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
		var (
			status abi.Status
			resp   []byte
		)
		switch {
		case inst == nil || inst.cur == nil:
			status, resp = abi.StatusBadRequest, []byte(name+": calls to the host are only allowed during reconcile")
		case inst.cur.Host == nil:
			status, resp = abi.StatusForbidden, []byte(name+": this plugin may not call the host")
		case n > maxRequest:
			status, resp = abi.StatusTooLarge, fmt.Appendf(nil, "%s: request of %d bytes exceeds %d", name, n, maxRequest)
		default:
			req, ok := mod.Memory().Read(ptr, n)
			if !ok {
				trap("%s: request at [%d, %d) is outside the plugin's memory", name, ptr, uint64(ptr)+uint64(n))
			}
			status, resp = inst.serve(ctx, name, req)
			if len(resp) > maxRequest {
				status, resp = abi.StatusTooLarge, fmt.Appendf(nil, "%s: response of %d bytes exceeds %d", name, len(resp), maxRequest)
			}
		}
		if inst != nil {
			inst.pending = resp
		}
		stack[0] = abi.PackStatusLen(status, uint32(len(resp)))
	}
}

// serve hands a call to the reconcile's Host. A panic there is the host's bug, not the guest's:
// it is logged with its stack, and the guest gets StatusInternal, as for any failure it cannot
// fix; the instance stays good.
func (inst *instance) serve(ctx context.Context, name string, req []byte) (status abi.Status, resp []byte) {
	defer func() {
		if r := recover(); r != nil {
			p := &PanicError{Value: r, Stack: debug.Stack()}
			inst.logger().Error(p, "recovered a panic serving a host call", "call", name, "stack", string(p.Stack))
			status, resp = abi.StatusInternal, []byte(name+": "+p.Error())
		}
	}()
	return inst.cur.Host.Call(ctx, name, req)
}

// lineWriter turns a guest's stdout or stderr into log lines.
type lineWriter struct {
	inst   *instance
	stream string
	buf    []byte
	// panicked is the first "panic: ..." line written, kept for the error of a call that
	// traps: a Go guest's panic message says what went wrong better than "unreachable".
	panicked string
	// panicking holds, during a reconcile, a "panic: ..." line on stderr and what followed it
	// (a Go guest's goroutine stack), held back from the log: the call's error says it, if the
	// call traps (see GuestPanic), and the lines are logged as they are if it does not.
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
	if w.stream == "stderr" && w.inst.cur != nil && (len(w.panicking) > 0 || bytes.HasPrefix(line, []byte("panic: "))) {
		if len(w.panicking) < maxPanicLines && w.panickingLen+len(line) <= maxPanicBytes {
			w.panicking = append(w.panicking, string(bytes.TrimRight(line, "\r")))
			w.panickingLen += len(line)
		}
		return
	}
	if w.panicked == "" && bytes.HasPrefix(line, []byte("panic: ")) {
		w.panicked = string(bytes.TrimPrefix(bytes.TrimRight(line, "\r"), []byte("panic: ")))
	}
	w.log(line, end)
}

// log logs one line of output, if the log limit admits it.
func (w *lineWriter) log(line []byte, end int) {
	if w.inst.admit(len(line) + end) {
		w.inst.logger().Info(string(bytes.TrimRight(line, "\r")), "stream", w.stream)
	}
}
