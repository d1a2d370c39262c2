package wasm_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/host/wasm"
)

// A pool with nothing to do shrinks to zero after its idle timeout, and the next key is
// reconciled on a new instance.
func TestIdlePoolShrinksToZero(t *testing.T) {
	const idle = 100 * time.Millisecond
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", MaxInstances: 3, IdleTimeout: idle})
	// Three reconciles at once: three instances.
	errs := make(chan error, 3)
	for _, name := range []string{"nap-a", "nap-b", "nap-c"} {
		go func() {
			_, err := m.Reconcile(context.Background(), call(name))
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := m.Instances(); n != 3 {
		t.Fatalf("%d idle instances after three reconciles at once, want 3", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, mem := m.Instances()
		if n == 0 && mem == 0 && m.Stats().Live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d instances (%d bytes, %d live) 5s after the pool went idle, want none", n, mem, m.Stats().Live)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := m.Stats().IdleClosed; got != 3 {
		t.Fatalf("closed %d idle instances, want 3", got)
	}
	made := m.Stats().Instantiated
	if _, err := m.Reconcile(context.Background(), call("fine")); err != nil {
		t.Fatalf("the next key after the pool shrank: %v", err)
	}
	if got := m.Stats().Instantiated; got != made+1 {
		t.Fatalf("instantiated %d for the next key, want 1", got-made)
	}
}

// An instance used again before its idle timeout stays; only the ones left idle go.
func TestIdleTimeoutCountsFromLastUse(t *testing.T) {
	const idle = 300 * time.Millisecond
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", IdleTimeout: idle})
	stop := time.Now().Add(3 * idle)
	for time.Now().Before(stop) { // one instance, never idle as long as the timeout
		if _, err := m.Reconcile(context.Background(), call("fine")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(idle / 5)
	}
	if got := m.Stats().IdleClosed; got != 0 {
		t.Fatalf("closed %d instances in use every %s, want none", got, idle/5)
	}
	// Negative: kept for ever.
	never := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", IdleTimeout: -1})
	time.Sleep(2 * idle)
	if n, _ := never.Instances(); n != 1 {
		t.Fatalf("%d idle instances with no idle timeout, want the one", n)
	}
}

// A module with no instance for its code idle timeout lets go of its compiled code, and what it
// held goes back to the OS; the next key loads it again from the on-disk cache and is
// reconciled.
func TestIdleModuleLetsGoOfItsCode(t *testing.T) {
	e := engine(t)
	wasmBytes := module(t, "plugins", "app") // a Go guest of 3.6 MB
	debug.FreeOSMemory()
	before := rss(t)
	m := compile(t, e, wasmBytes, wasm.Options{Name: "app", IdleTimeout: 50 * time.Millisecond, CodeIdleTimeout: 100 * time.Millisecond})
	debug.FreeOSMemory() // what compiling left behind is not the code's
	loaded := rss(t)
	snap := m.Stats().SnapshotBytes
	if snap == 0 {
		t.Error("a Go guest's module holds no snapshot after its first instance")
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.Stats().CodeReleases == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the code was not let go of 10s after the pool went idle: %d live", m.Stats().Live)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// wazero unmaps compiled code in a finalizer: it runs after the collection that finds it
	// garbage, and its memory goes back at the next.
	for range 3 {
		debug.FreeOSMemory()
		time.Sleep(20 * time.Millisecond)
	}
	released := rss(t)
	t.Logf("RSS before the module %d MiB, with its code loaded %d MiB, after letting it go %d MiB", before>>20, loaded>>20, released>>20)
	// Most of what the module added goes: its machine code and decoded module (the wasm bytes,
	// kept to load it again, and the Go runtime's own growth stay).
	if added := loaded - before; !raceDetector && loaded-released < added/2 {
		t.Errorf("RSS went from %d MiB to %d MiB when the code was let go, want at least half of the %d MiB the module added back", loaded>>20, released>>20, added>>20)
	}
	if wasm.HoldsBytes(m) {
		t.Error("the module still holds its bytes with its code let go: they were to wait in the cache directory")
	}
	if got := m.Stats().SnapshotBytes; got != 0 {
		t.Errorf("the module holds a snapshot of %d bytes with its code let go (%d before)", got, snap)
	}
	start := time.Now()
	if _, err := m.Reconcile(context.Background(), call("none")); err != nil {
		t.Fatalf("the next key: %v", err)
	}
	t.Logf("the next key took %s, the code loaded again from the on-disk cache", time.Since(start))
	if got := m.Stats().CodeReloads; got != 1 {
		t.Fatalf("loaded the code %d times again, want 1", got)
	}
}

// The bytes a module keeps on disk while its code is let go are checked when they are read
// back: changed, the next key fails saying where they were and what to do, and the module does
// not run them.
func TestSpilledModuleIsChecked(t *testing.T) {
	dir := t.TempDir()
	e, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	m := compile(t, e, module(t, "testguests", "noop"), wasm.Options{Name: "noop", IdleTimeout: 10 * time.Millisecond, CodeIdleTimeout: 10 * time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for m.Stats().CodeReleases == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the code was not let go")
		}
		time.Sleep(5 * time.Millisecond)
	}
	spilled, _ := filepath.Glob(filepath.Join(dir, "modules", "*.wasm"))
	if len(spilled) != 1 {
		t.Fatalf("%d modules kept in the cache directory, want 1", len(spilled))
	}
	if err := os.WriteFile(spilled[0], module(t, "testguests", "clock"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = m.Reconcile(context.Background(), call("none"))
	if err == nil || !strings.Contains(err.Error(), spilled[0]) || !strings.Contains(err.Error(), "it was changed") || !strings.Contains(err.Error(), "change its module, or restart the host") {
		t.Fatalf("a changed module read back: %v", err)
	}
}

// rss is the process's resident memory.
func rss(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// Letting go of compiled code runs two collections soon after, so that the machine code that
// wazero unmaps in a finalizer goes back to the OS, and none after them.
func TestReleasedCodeIsCollected(t *testing.T) {
	e := engine(t)
	m := compile(t, e, module(t, "testguests", "noop"), wasm.Options{Name: "noop", IdleTimeout: -1})
	before := wasm.Collections(e)
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for wasm.Collections(e) < before+2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d collections after the code was let go, want 2", wasm.Collections(e)-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runs := wasm.Collections(e)
	time.Sleep(500 * time.Millisecond)
	if again := wasm.Collections(e); again != runs || runs-before != 2 {
		t.Fatalf("%d collections, then %d more, want 2 and none", runs-before, again-runs)
	}
}

// A plugin's initialisation runs once each time its code is loaded: instances made at the same
// moment after a reload wait for the first one's snapshot instead of each running it.
func TestInitialisationRunsOncePerLoad(t *testing.T) {
	// A Go guest: its initialisation takes long enough for the others to come while it runs.
	m := compile(t, engine(t), module(t, "testguests", "hash-go"), wasm.Options{Name: "hash-go", MaxInstances: 4, IdleTimeout: 20 * time.Millisecond, CodeIdleTimeout: 20 * time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for m.Stats().CodeReleases == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the code was not let go")
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := m.Stats()
	made, inits := st.Instantiated, st.Instantiated-st.FromSnapshot
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := m.Reconcile(context.Background(), call("none")) // its get is refused: a failed result, not an error
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st = m.Stats()
	if n := st.Instantiated - made; n < 2 {
		t.Fatalf("%d instances made for 4 reconciles at once: the test shows nothing", n)
	}
	if n := st.Instantiated - st.FromSnapshot - inits; n != 1 {
		t.Errorf("_initialize ran %d times for %d instances made at once after a reload, want once", n, st.Instantiated-made)
	}
}

// The code idle timeout counts from the last instance's close: an instance made in between
// starts it again.
func TestCodeIdleTimeoutCountsFromTheLastInstance(t *testing.T) {
	m := compile(t, engine(t), module(t, "testguests", "noop"), wasm.Options{Name: "noop", IdleTimeout: 50 * time.Millisecond, CodeIdleTimeout: time.Second})
	start := time.Now() // the first instance closes at about 50ms: the code would go at 1.05s
	time.Sleep(600 * time.Millisecond)
	if _, err := m.Reconcile(context.Background(), call("none")); err != nil { // a new instance, closed at about 650ms
		t.Fatal(err)
	}
	time.Sleep(time.Until(start.Add(1300 * time.Millisecond)))
	if n := m.Stats().CodeReleases; n != 0 {
		t.Fatalf("the code was let go %s after the first instance closed, though another was made and closed since", time.Since(start))
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.Stats().CodeReleases == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the code was not let go a second after the last instance closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An instance thrown away after a trap that leaves the pool empty starts the code's idle time,
// as an idle instance closed does.
func TestCodeIsLetGoAfterATrapEmptiesThePool(t *testing.T) {
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", IdleTimeout: 20 * time.Millisecond, CodeIdleTimeout: 50 * time.Millisecond})
	wait := func(releases int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for m.Stats().CodeReleases < releases {
			if time.Now().After(deadline) {
				t.Fatalf("the code was let go %d times, want %d", m.Stats().CodeReleases, releases)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(1)
	if _, err := m.Reconcile(context.Background(), call("trap")); err == nil {
		t.Fatal("the trap reconciled")
	}
	wait(2)
}
