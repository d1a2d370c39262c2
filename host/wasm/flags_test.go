package wasm_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// A reconcile's request tells the guest the host drops its debug lines when the host's logger
// keeps no V(1) lines and the module does not record (a recording keeps every line); the
// caller's Request has no say.
func TestARequestSaysWhetherTheHostDropsDebugLines(t *testing.T) {
	e := engine(t)
	code := module(t, "testguests", "flags")
	for _, c := range []struct {
		name      string
		verbosity int
		record    bool
		want      string
	}{
		{"info level", 0, false, "flags=1"},
		{"debug level", 1, false, "flags=0"},
		{"info level, recording", 0, true, "flags=0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var b strings.Builder
			log := funcr.New(func(prefix, args string) {
				mu.Lock()
				defer mu.Unlock()
				b.WriteString(args + "\n")
			}, funcr.Options{Verbosity: c.verbosity})
			m := compile(t, e, code, wasm.Options{Name: "flags", Logger: log, Record: c.record})
			call := &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "a", DropsDebug: !strings.HasSuffix(c.want, "1")}, Logger: log}
			if _, err := m.Reconcile(context.Background(), call); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(b.String(), c.want) {
				t.Errorf("the guest logged %q, want %s", b.String(), c.want)
			}
		})
	}
}

// The C SDK reads the flag: while the host drops debug lines it makes none
// (wasmrec_log_enabled says so); at debug level they all reach the host's logger.
func TestTheCSDKMakesNoDebugLinesTheHostDrops(t *testing.T) {
	e := engine(t)
	code := module(t, "testguests", "logc")
	for _, c := range []struct {
		name      string
		verbosity int
		want      []string
		wantNot   []string
	}{
		{"info level", 0, []string{`"debug lines not made"`}, []string{"debug line\"", "plain debug line", `"debug lines made"`}},
		{"debug level", 1, []string{`"debug lines made"`, `"plain debug line"`, `"debug line"`, `"name"="a"`}, []string{"not made"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var b strings.Builder
			log := funcr.New(func(prefix, args string) {
				mu.Lock()
				defer mu.Unlock()
				b.WriteString(args + "\n")
			}, funcr.Options{Verbosity: c.verbosity})
			m := compile(t, e, code, wasm.Options{Name: "log-c", Logger: log})
			call := &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "a"}, Logger: log}
			if _, err := m.Reconcile(context.Background(), call); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("the log lacks %s:\n%s", w, b.String())
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(b.String(), w) {
					t.Errorf("the log holds %s:\n%s", w, b.String())
				}
			}
		})
	}
}
