package wasm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

// module reads bin/<dir>/<name>.wasm, built by `make plugins` (and `make testguests`).
func module(t testing.TB, dir, name string) []byte {
	t.Helper()
	wd, _ := os.Getwd()
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "bin", dir, name+".wasm")); err == nil {
			return b
		}
		if filepath.Dir(d) == d {
			testenv.Missing(t, fmt.Errorf("bin/%s/%s.wasm not found above %s", dir, name, wd), dir)
		}
	}
}

// cacheDir is the compilation cache directory engine's engines share, as a host's restarts do:
// a module one test compiled, the next reads from it (a Go guest takes tens of seconds to
// compile under the race detector). Each engine still compiles or loads every module itself;
// tests of the cache and of what a compile costs make engines of their own directory.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasmrec-wasm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func engine(t testing.TB) *wasm.Engine {
	t.Helper()
	e, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func compile(t testing.TB, e *wasm.Engine, wasmBytes []byte, opts wasm.Options) *wasm.Module {
	t.Helper()
	m, err := e.Compile(context.Background(), wasmBytes, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// fakeAPI answers host calls from a map of objects and records what the guest asked.
type fakeAPI struct {
	mu      sync.Mutex
	objects map[string]string // "kind/ns/name" -> JSON
	calls   []string
	bodies  []string
}

func (f *fakeAPI) Call(_ context.Context, fn string, req []byte) (abi.Status, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fn)
	f.bodies = append(f.bodies, string(req))
	if fn == abi.ImportGet {
		var ref abi.ObjectRef
		if err := json.Unmarshal(req, &ref); err != nil {
			return abi.StatusBadRequest, []byte(err.Error())
		}
		if o, ok := f.objects[ref.Kind+"/"+ref.Namespace+"/"+ref.Name]; ok {
			return abi.StatusOK, []byte(o)
		}
		return abi.StatusNotFound, []byte("not found")
	}
	return abi.StatusOK, req // writes echo the object back
}

func logSink(t testing.TB) (logr.Logger, func() string) {
	var mu sync.Mutex
	var b strings.Builder
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		b.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 1}), func() string { mu.Lock(); defer mu.Unlock(); return b.String() }
}

func TestAppPluginReconciles(t *testing.T) {
	e := engine(t)
	log, logs := logSink(t)
	m := compile(t, e, module(t, "plugins", "app"), wasm.Options{Name: "app", Logger: log})
	if got := m.Manifest(); got.For.Kind != "App" || len(got.Owns) != 2 {
		t.Fatalf("manifest = %+v", got)
	}
	api := &fakeAPI{objects: map[string]string{
		"App/ns/web": `{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","metadata":{"name":"web","namespace":"ns","uid":"u1","generation":3},"spec":{"message":"hi","port":8080}}`,
	}}
	res, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "web"}, Host: api, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if res != (abi.Result{}) {
		t.Fatalf("result = %+v, want zero", res)
	}
	want := []string{"get", "patch", "patch", "patch"}
	if strings.Join(api.calls, ",") != strings.Join(want, ",") {
		t.Fatalf("calls = %v, want %v", api.calls, want)
	}
	for _, s := range []string{`"kind":"ConfigMap"`, `"message":"hi"`, `"uid":"u1"`, `"port":8080`, `"observedGeneration":3`, `"subresource":"status"`} {
		if !strings.Contains(strings.Join(api.bodies, "\n"), s) {
			t.Errorf("no call carried %s:\n%s", s, strings.Join(api.bodies, "\n"))
		}
	}
	if !strings.Contains(logs(), `"msg"="reconciled" "app"="ns/web" "generation"=3 "port"=8080`) {
		t.Errorf("the guest's log line is missing:\n%s", logs())
	}

	// A missing App is not an error; an invalid port is a terminal one.
	if res, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "gone"}, Host: api, Logger: log}); err != nil || res != (abi.Result{}) {
		t.Fatalf("missing app: %+v, %v", res, err)
	}
	api.objects["App/ns/bad"] = `{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","metadata":{"name":"bad","namespace":"ns"},"spec":{"port":70000}}`
	res, err = m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "bad"}, Host: api, Logger: log})
	if err != nil || !res.Failed || !res.Terminal || !strings.Contains(res.Err, "70000") {
		t.Fatalf("invalid port: %+v, %v; want a terminal error naming the port", res, err)
	}
}

func TestFailingPluginFails(t *testing.T) {
	m := compile(t, engine(t), module(t, "plugins", "failing"), wasm.Options{Name: "failing"})
	res, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "x", Retries: 4}, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed || res.Terminal || res.Err != "failing on purpose (attempt 5 for ns/x)" {
		t.Fatalf("result = %+v", res)
	}
}

// Plugins loaded from the same bytes with the same memory cap and interruption share one
// compiled module and runtime, and each keeps its own instances; other settings get their own.
// The code stays until the last of them is closed.
func TestModulesShareCompiledCode(t *testing.T) {
	e := engine(t)
	code := module(t, "testguests", "benchc")
	a, err := e.Compile(context.Background(), code, wasm.Options{Name: "a"})
	must(t, err)
	b := compile(t, e, code, wasm.Options{Name: "b", MaxInstances: 2})
	capped := compile(t, e, code, wasm.Options{Name: "capped", MemoryLimit: 32 << 20})
	plain := compile(t, e, code, wasm.Options{Name: "plain", Interruptible: new(false)})
	if !wasm.SharesCode(a, b) {
		t.Error("two plugins of the same bytes and settings compiled twice")
	}
	if wasm.SharesCode(a, capped) || wasm.SharesCode(a, plain) {
		t.Error("plugins with another memory cap or interruption share a runtime")
	}
	must(t, a.Close(context.Background()))
	must(t, a.Close(context.Background())) // twice releases once
	for _, m := range []*wasm.Module{b, capped, plain} {
		if _, err := m.Reconcile(context.Background(), call(m.Name())); err != nil {
			t.Fatalf("%s after a's close: %v", m.Name(), err)
		}
	}
	if _, err := a.Reconcile(context.Background(), call("a")); !errors.Is(err, wasm.ErrClosed) {
		t.Fatalf("a after its close: %v, want ErrClosed", err)
	}
	if s := b.Stats(); s.Instantiated != 1 {
		t.Fatalf("b made %d instances, want its own 1", s.Instantiated)
	}
}

// Every proper prefix of a real module reads as truncated but those that end where a section
// ends (modules in their own right, one per section), the whole module does not, and bytes that
// are not WebAssembly are not truncated (they are refused for what they are).
func TestTruncated(t *testing.T) {
	b := module(t, "testguests", "noop")
	var whole []int
	for n := 1; n < len(b); n++ {
		if !wasm.Truncated(b[:n]) {
			whole = append(whole, n)
		}
	}
	if len(whole) > 20 {
		t.Fatalf("%d of the %d proper prefixes of a module read as whole: %v", len(whole), len(b)-1, whole)
	}
	for _, whole := range [][]byte{b, []byte("\x00asm\x01\x00\x00\x00")} {
		if wasm.Truncated(whole) {
			t.Fatalf("a whole module of %d bytes reads as truncated", len(whole))
		}
	}
	for _, other := range []string{"", "v2", "\x7fELF\x02\x01\x01", "\x00asm\x02\x00\x00\x00\x00\x05"} {
		if wasm.Truncated([]byte(other)) {
			t.Errorf("%q reads as a truncated module", other)
		}
	}
	e := engine(t)
	if _, err := e.Compile(context.Background(), b[:len(b)/2], wasm.Options{Name: "half"}); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("compiling half a module: %v; want it said to be cut short", err)
	}
}
