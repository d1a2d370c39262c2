package wasm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// Many plugins built from one module, loaded side by side on a warm compilation cache, as a
// host with one plugin per team does at start: wazero v1.12.0 could hand a module read from
// its file cache to a concurrent load before it was complete, and the instantiation panicked
// (wazero issue #2547). Every load must succeed, every module reconcile.
func TestConcurrentLoadsOfOneModuleFromAWarmCache(t *testing.T) {
	dir := t.TempDir()
	code := module(t, "testguests", "benchc")
	warm, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: dir})
	must(t, err)
	m, err := warm.Compile(context.Background(), code, wasm.Options{Name: "warm"})
	must(t, err)
	must(t, m.Close(context.Background()))
	must(t, warm.Close(context.Background()))

	// Without the engine's per-module lock, this failed in about one run of three (in rounds 5
	// to 26) with benchc, a C plugin built with the C SDK; the smallest modules compile their
	// preambles too fast to be caught.
	const plugins, rounds = 100, 30
	for round := range rounds {
		e, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: dir}) // a new process: nothing in memory
		must(t, err)
		var (
			wg     sync.WaitGroup
			failed atomic.Int32
			start  = make(chan struct{})
		)
		mods := make([]*wasm.Module, plugins)
		for i := range plugins {
			wg.Go(func() {
				<-start
				name := fmt.Sprintf("copy-%03d", i)
				// A memory cap of its own gives each plugin a runtime of its own: plugins with
				// the same settings share one, and compile once.
				m, err := e.Compile(context.Background(), code, wasm.Options{Name: name, MemoryLimit: uint64(64+i) << 20})
				if err != nil {
					failed.Add(1)
					t.Errorf("round %d: %v", round, err)
					return
				}
				mods[i] = m
				if _, err := m.Reconcile(context.Background(), call(name)); err != nil {
					failed.Add(1)
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		close(start)
		wg.Wait()
		for _, m := range mods {
			if m != nil {
				must(t, m.Close(context.Background()))
			}
		}
		must(t, e.Close(context.Background()))
		if failed.Load() > 0 {
			t.Fatalf("round %d: %d of %d plugins failed to load or reconcile", round, failed.Load(), plugins)
		}
	}
}

// A panic while one plugin's module loads is that plugin's error, logged with its stack; its
// neighbours keep reconciling, and the same module loads on the next attempt.
func TestPanicWhileLoadingIsThatPluginsError(t *testing.T) {
	e := engine(t)
	code := module(t, "testguests", "noop")
	neighbour := compile(t, e, code, wasm.Options{Name: "neighbour"})

	var inject atomic.Bool
	wasm.SetInstantiate(e, func(ctx context.Context, r wazero.Runtime, cm wazero.CompiledModule, cfg wazero.ModuleConfig) (api.Module, error) {
		if inject.CompareAndSwap(true, false) {
			var preambles []uintptr
			_ = preambles[1] // what wazero #2547 did: index out of range [1] with length 0
		}
		return wasm.Instantiate(ctx, r, cm, cfg)
	})

	// The neighbour reconciles all along.
	stop := make(chan struct{})
	var reconciles atomic.Int64
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := neighbour.Reconcile(context.Background(), call("neighbour")); err != nil {
				done <- err
				return
			}
			reconciles.Add(1)
		}
	}()

	log, logs := logSink(t)
	inject.Store(true)
	_, err := e.Compile(context.Background(), code, wasm.Options{Name: "bad", Logger: log})
	var p *wasm.PanicError
	if !errors.As(err, &p) {
		t.Fatalf("load error = %v, want a *wasm.PanicError", err)
	}
	for _, s := range []string{`plugin "bad"`, "panic in the host", "index out of range [1] with length 0"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("load error %q does not say %q", err, s)
		}
	}
	if l := logs(); !strings.Contains(l, "recovered a panic while loading") || !strings.Contains(l, "panic_test.go") {
		t.Errorf("the panic's stack was not logged:\n%s", l)
	}

	// Tried again, it loads.
	again := compile(t, e, code, wasm.Options{Name: "bad"})
	if _, err := again.Reconcile(context.Background(), call("bad")); err != nil {
		t.Fatal(err)
	}
	before := reconciles.Load()
	deadline := time.Now().Add(10 * time.Second)
	for reconciles.Load() < before+100 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("the neighbour failed: %v", err)
	}
	if n := reconciles.Load(); n < before+100 {
		t.Fatalf("the neighbour reconciled %d times, then stalled", n)
	}
}

// A panic while a pool grows during a reconcile fails that reconcile and loses no instance: the
// pool (one instance here) serves the next one.
func TestPanicWhileGrowingThePoolLosesNoInstance(t *testing.T) {
	e := engine(t)
	m := compile(t, e, module(t, "testguests", "noop"), wasm.Options{Name: "noop", MaxInstances: 1})
	must(t, m.Retire(context.Background())) // the idle instance goes: the next reconcile makes one
	m.Reactivate()
	var inject atomic.Bool
	inject.Store(true)
	wasm.SetInstantiate(e, func(ctx context.Context, r wazero.Runtime, cm wazero.CompiledModule, cfg wazero.ModuleConfig) (api.Module, error) {
		if inject.CompareAndSwap(true, false) {
			panic("injected")
		}
		return wasm.Instantiate(ctx, r, cm, cfg)
	})
	var p *wasm.PanicError
	if _, err := m.Reconcile(context.Background(), call("noop")); !errors.As(err, &p) || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("reconcile error = %v, want the injected panic", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := m.Reconcile(ctx, call("noop")); err != nil {
		t.Fatalf("the next reconcile: %v", err)
	}
}

// panickingAPI is a Host with a bug.
type panickingAPI struct{}

func (panickingAPI) Call(context.Context, string, []byte) (abi.Status, []byte) {
	var m map[string]int
	m["x"]++ // assignment to entry in nil map
	return abi.StatusOK, nil
}

// A panic in the host while it serves a guest's call is logged with its stack and answered
// with StatusInternal; the guest handles it as any failed call, and the instance stays good.
func TestPanicServingAHostCall(t *testing.T) {
	e := engine(t)
	log, logs := logSink(t)
	m := compile(t, e, module(t, "testguests", "benchc"), wasm.Options{Name: "bench-c", Logger: log})
	res, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "bench", Name: "deployment-fields"}, Host: panickingAPI{}, Logger: log})
	if err != nil {
		t.Fatalf("reconcile: %v, want the guest's own failure", err)
	}
	if !res.Failed || res.Err != "get failed" {
		t.Fatalf("result = %+v, want the guest's \"get failed\"", res)
	}
	if l := logs(); !strings.Contains(l, "recovered a panic serving a host call") || !strings.Contains(l, "assignment to entry in nil map") || !strings.Contains(l, "panic_test.go") {
		t.Errorf("the panic and its stack were not logged:\n%s", l)
	}
	api := &fakeAPI{objects: map[string]string{
		"Deployment/bench/deployment": `{"spec":{"replicas":3,"template":{"spec":{"containers":[{"image":"nginx"}]}}}}`,
	}}
	if res, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "bench", Name: "deployment-fields"}, Host: api, Logger: log}); err != nil || res.Failed {
		t.Fatalf("after the panic: %+v, %v", res, err)
	}
	if s := m.Stats(); s.Discarded != 0 || s.Instantiated != 1 {
		t.Fatalf("instances discarded %d, made %d; want 0 and 1", s.Discarded, s.Instantiated)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
