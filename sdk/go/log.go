package wasmrec

import (
	"fmt"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
)

// Logger writes to the host's log, tagged with the plugin, the request and the reconcile ID.
type Logger struct{}

// Log is the plugin's logger.
var Log Logger

func (Logger) log(level int32, msg string, kv []any) {
	if len(kv) > 0 {
		var b strings.Builder
		b.WriteString(msg)
		for i := 0; i < len(kv); i += 2 {
			b.WriteByte(' ')
			fmt.Fprint(&b, kv[i])
			b.WriteByte('=')
			if i+1 < len(kv) {
				fmt.Fprintf(&b, "%v", kv[i+1])
			}
		}
		msg = b.String()
	}
	hostLog(level, msg)
}

// Debug logs at debug level, with key-value pairs.
func (l Logger) Debug(msg string, kv ...any) { l.log(abi.LogDebug, msg, kv) }

// Info logs at info level, with key-value pairs.
func (l Logger) Info(msg string, kv ...any) { l.log(abi.LogInfo, msg, kv) }

// Warn logs at warn level, with key-value pairs.
func (l Logger) Warn(msg string, kv ...any) { l.log(abi.LogWarn, msg, kv) }

// Error logs err at error level, with key-value pairs.
func (l Logger) Error(err error, msg string, kv ...any) {
	l.log(abi.LogError, msg, append(kv, "error", err))
}
