package plugintest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// logBook keeps the plugin's log lines as text: "info marked object=default/sample". The engine
// hands its logSink the guest's log calls (key/values decoded), its stdout and stderr lines
// (stream=stdout), and its own notes on the instances.
type logBook struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBook) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = nil
}

func (b *logBook) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string{}, b.lines...)
}

func (b *logBook) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
}

func (b *logBook) logger() logr.Logger { return logr.New(&logSink{book: b}) }

type logSink struct {
	book *logBook
	kv   []any // WithValues
}

var _ logr.LogSink = (*logSink)(nil)

func (s *logSink) Init(logr.RuntimeInfo)  {}
func (s *logSink) Enabled(level int) bool { return true }

func (s *logSink) Info(level int, msg string, kv ...any) {
	severity := "info"
	if level > 0 {
		severity = "debug"
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "severity" { // the engine's warn level
			severity = fmt.Sprint(kv[i+1])
			kv = append(kv[:i:i], kv[i+2:]...)
			break
		}
	}
	s.book.add(format(severity, msg, append(append([]any{}, s.kv...), kv...)))
}

func (s *logSink) Error(err error, msg string, kv ...any) {
	kv = append(append([]any{}, s.kv...), kv...)
	if err != nil {
		kv = append(kv, "error", err.Error())
	}
	s.book.add(format("error", msg, kv))
}

func (s *logSink) WithValues(kv ...any) logr.LogSink {
	return &logSink{book: s.book, kv: append(append([]any{}, s.kv...), kv...)}
}

func (s *logSink) WithName(string) logr.LogSink { return s }

func format(severity, msg string, kv []any) string {
	var b strings.Builder
	b.WriteString(severity + " " + msg)
	for i := 0; i < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=", kv[i])
		if i+1 < len(kv) {
			b.WriteString(value(kv[i+1]))
		}
	}
	return b.String()
}

func value(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
