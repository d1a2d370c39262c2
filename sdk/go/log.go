package wasmrec

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/wasmrec/wasmrec/abi"
)

// Logger writes to the host's log, tagged with the plugin, the request and the reconcile ID.
//
// Key/values are sent structured: the host gets the message, a NUL byte and a JSON array of the
// keys and values (`reconciled\x00["app","demo/web","generation",3]`), and logs them as its own
// key/values. Keys are strings (another key is written with fmt's %v). A value is what
// json.Marshal makes of it, or, if json.Marshal fails (a channel, a func, NaN...), its %v
// string; but an error is its Error() string and a fmt.Stringer its String() (unless the
// value is a json.Marshaler). A key without a value gets the value Missing, "(MISSING)". A NUL in the message becomes U+FFFD. A line longer than the host keeps (64 KiB)
// is sent unstructured instead, as "msg key=value ..." cut to that size, so that its JSON is
// never cut in the middle.
//
// V and WithValues take logr's arguments, so code written for controller-runtime's logger
// (log.V(1).Info(...)) keeps its calls: V(n) for n > 0 logs Info at debug level.
type Logger struct {
	v      int
	values []any // WithValues' key/values, before each call's
}

// Log is the plugin's logger.
var Log Logger

// Missing is the value logged for a key without one (an odd number of key/values).
const Missing = "(MISSING)"

// maxLogLine is what the host keeps of a log message.
const maxLogLine = 64 << 10

// debugKept says debug lines reach the host's log: false while a reconcile runs whose request
// says the host drops them (abi.Request.DropsDebug), and so for the maps after it.
var debugKept atomic.Bool

func init() { debugKept.Store(true) }

// Enabled reports whether l's Info lines are kept: false for a V(n) logger (n > 0) while the
// host drops debug lines, as logr's Enabled. Check it before working out costly values.
func (l Logger) Enabled() bool { return l.v == 0 || debugKept.Load() }

// logTo, if set, receives the Logger's lines instead of the host.
var logTo atomic.Pointer[Transport]

// SetLogTransport sends the Logger's lines (wasmrec.Log's) to t instead of the wasmrec host, or
// back to the host if t is nil, and returns a function that restores the previous destination.
// It is for tests (fake.Cluster.Reconcile uses it), and it is global: not per goroutine, not
// per Client.
func SetLogTransport(t Transport) (restore func()) {
	var p *Transport
	if t != nil {
		p = &t
	}
	old := logTo.Swap(p)
	return func() { logTo.Store(old) }
}

func (l Logger) log(level int32, msg string, kv []any) {
	if level == abi.LogDebug && !debugKept.Load() {
		return // the host would drop it: encoding its values is most of its cost
	}
	if len(l.values) > 0 {
		kv = append(l.values[:len(l.values):len(l.values)], kv...)
	}
	line := appendLogLine(nil, msg, kv)
	if t := logTo.Load(); t != nil {
		(*t).Log(level, line)
		return
	}
	hostLog(level, line)
}

// appendLogLine encodes a log line as the log import takes it: msg, then, with key/values, a
// NUL and a JSON array of them.
func appendLogLine(b []byte, msg string, kv []any) []byte {
	msg = strings.ReplaceAll(msg, "\x00", "\uFFFD")
	b = append(b, msg...)
	if len(kv) == 0 {
		return b
	}
	start := len(b)
	b = append(b, 0, '[')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		b = appendJSON(b, key)
		b = append(b, ',')
		if i+1 < len(kv) {
			b = appendJSON(b, kv[i+1])
		} else {
			b = appendJSON(b, Missing)
		}
	}
	b = append(b, ']')
	if len(b) <= maxLogLine {
		return b
	}
	return appendFlat(b[:start], kv)
}

// appendJSON appends v as JSON: an error's message or a fmt.Stringer's string (unless v is a
// json.Marshaler), else json.Marshal's encoding, or v's %v string when json.Marshal fails.
func appendJSON(b []byte, v any) []byte {
	if _, isMarshaler := v.(json.Marshaler); !isMarshaler {
		if s, ok := text(v); ok {
			v = s
		}
	}
	j, err := json.Marshal(v)
	if err != nil {
		j, _ = json.Marshal(fmt.Sprintf("%v", v))
	}
	return append(b, j...)
}

// text is an error's message or a fmt.Stringer's string (most errors would marshal as {}, and
// a Stringer says how its type wants to be shown); false for other values, and for a method
// that panics (a nil pointer, say).
func text(v any) (s string, ok bool) {
	defer func() {
		if recover() != nil {
			s, ok = "", false
		}
	}()
	switch v := v.(type) {
	case error:
		return v.Error(), true
	case fmt.Stringer:
		return v.String(), true
	}
	return "", false
}

// appendFlat appends the key/values as " key=value" text, cutting the line at maxLogLine.
func appendFlat(b []byte, kv []any) []byte {
	for i := 0; i < len(kv) && len(b) < maxLogLine; i += 2 {
		b = fmt.Appendf(b, " %v=", kv[i])
		if i+1 < len(kv) {
			b = fmt.Appendf(b, "%v", kv[i+1])
		} else {
			b = append(b, Missing...)
		}
	}
	b = []byte(strings.ReplaceAll(string(b), "\x00", "\uFFFD"))
	if len(b) > maxLogLine {
		b = b[:maxLogLine]
	}
	return b
}

// Debug logs at debug level, with key-value pairs.
func (l Logger) Debug(msg string, kv ...any) { l.log(abi.LogDebug, msg, kv) }

// Info logs at info level, with key-value pairs; at debug level on a logger of V(1) or more.
func (l Logger) Info(msg string, kv ...any) {
	if l.v > 0 {
		l.log(abi.LogDebug, msg, kv)
		return
	}
	l.log(abi.LogInfo, msg, kv)
}

// V is a logger whose Info lines are of verbosity level more: debug lines for a level above
// 0, as logr's V(1) lines are hidden by default. Error lines stay errors.
func (l Logger) V(level int) Logger {
	if level > 0 {
		l.v += level
	}
	return l
}

// WithValues is a logger that adds kv to every line.
func (l Logger) WithValues(kv ...any) Logger {
	if len(kv)%2 == 1 {
		kv = append(kv, Missing)
	}
	l.values = append(l.values[:len(l.values):len(l.values)], kv...)
	return l
}

// Warn logs at warn level, with key-value pairs.
func (l Logger) Warn(msg string, kv ...any) { l.log(abi.LogWarn, msg, kv) }

// Error logs err at error level, with key-value pairs.
func (l Logger) Error(err error, msg string, kv ...any) {
	if len(kv)%2 == 1 {
		kv = append(kv, Missing)
	}
	l.log(abi.LogError, msg, append(kv, "error", err))
}
