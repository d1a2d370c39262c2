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
