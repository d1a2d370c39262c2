package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/go-logr/logr"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
)

func instanceFrom(ctx context.Context) *instance {
	inst, _ := ctx.Value(instanceKey{}).(*instance)
	return inst
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
	if inst == nil {
		return
	}
	inst.recordOutput(recording.Event{Type: recording.EventLog, N: int64(level), In: msg})
	if inst.replay != nil || !inst.admit(len(msg)) {
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
// alternating keys (strings) and values. What is not such an array stays part of the text. An
// object or array value stays JSON (jsonValue), as the plugin sent it.
func splitLog(b []byte) (string, []any) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	var pairs []json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b[i+1:]))
	if err := dec.Decode(&pairs); err != nil || dec.More() {
		return string(bytes.ReplaceAll(b, []byte{0}, []byte(" "))), nil
	}
	kv := make([]any, 0, len(pairs)+len(pairs)%2)
	for j := 0; j < len(pairs); j += 2 {
		var key string
		if json.Unmarshal(pairs[j], &key) != nil {
			key = string(pairs[j])
		}
		if hostKeys[key] {
			key = "plugin." + key
		}
		var v any = "(MISSING)"
		if j+1 < len(pairs) {
			v = logValue(pairs[j+1])
		}
		kv = append(kv, key, v)
	}
	return string(b[:i]), kv
}

// logValue is a value of a log line's key/values: a string, bool or nil as such, a number as an
// int64 or float64 (a number stays one in JSON logs), an object or array as its JSON.
func logValue(raw json.RawMessage) any {
	if raw[0] == '{' || raw[0] == '[' {
		return jsonValue(raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	_ = dec.Decode(&v) // raw is one JSON value: the array decoded
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return i
		} else if f, err := n.Float64(); err == nil {
			return f
		}
	}
	return v
}

// jsonValue is an object or array a plugin logged: the host's JSON log embeds it as JSON, its
// text log writes it as JSON text (not as a Go map).
type jsonValue []byte

func (v jsonValue) MarshalJSON() ([]byte, error) { return v, nil }
func (v jsonValue) MarshalText() ([]byte, error) { return v, nil }
func (v jsonValue) String() string               { return string(v) }

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
		if inst == nil || inst.cur == nil {
			status, resp = abi.StatusBadRequest, []byte(name+": calls to the host are only allowed during reconcile")
		} else {
			var req []byte
			if n <= maxRequest {
				var ok bool
				if req, ok = mod.Memory().Read(ptr, n); !ok {
					trap("%s: request at [%d, %d) is outside the plugin's memory", name, ptr, uint64(ptr)+uint64(n))
				}
			}
			status, resp = inst.call(ctx, name, req, n)
		}
		if inst != nil {
			inst.pending = resp
		}
		stack[0] = abi.PackStatusLen(status, uint32(len(resp)))
	}
}

// call answers a host call of the reconcile in progress, req its n bytes (nil if too large to
// read). A replay answers what the recording says, if the guest asks what it asked.
func (inst *instance) call(ctx context.Context, name string, req []byte, n uint32) (abi.Status, []byte) {
	if inst.step == nil {
		return inst.answer(ctx, name, req, n)
	}
	e := recording.Event{Type: recording.EventCall, Fn: name, In: bytes.Clone(req)}
	if req == nil {
		e.N = int64(n)
	}
	var (
		status abi.Status
		resp   []byte
	)
	if want := inst.expect(e); want != nil {
		status, resp = abi.Status(want.Status), want.Out
	} else {
		status, resp = inst.answer(ctx, name, req, n)
	}
	e.Status, e.Out = uint32(status), bytes.Clone(resp)
	inst.record(e)
	return status, resp
}

func (inst *instance) answer(ctx context.Context, name string, req []byte, n uint32) (status abi.Status, resp []byte) {
	switch {
	case inst.cur.Host == nil:
		return abi.StatusForbidden, []byte(name + ": this plugin may not call the host")
	case n > maxRequest:
		return abi.StatusTooLarge, fmt.Appendf(nil, "%s: request of %d bytes exceeds %d", name, n, maxRequest)
	}
	status, resp = inst.serve(ctx, name, req)
	if len(resp) > maxRequest {
		status, resp = abi.StatusTooLarge, fmt.Appendf(nil, "%s: response of %d bytes exceeds %d", name, len(resp), maxRequest)
	}
	return status, resp
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
