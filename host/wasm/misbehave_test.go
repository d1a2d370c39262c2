package wasm_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/wasm"
)

func call(name string) *wasm.Call {
	return &wasm.Call{Request: abi.Request{Namespace: "ns", Name: name}, Logger: logr.Discard()}
}

// Each misbehaviour is an error naming the plugin, the instance is thrown away, and the next
// reconcile runs on a fresh instance.
func TestMisbehavingGuest(t *testing.T) {
	e := engine(t)
	m := compile(t, e, module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", MemoryLimit: 4 << 20})
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    string
		counter func(wasm.Stats) int64
		isBad   bool
	}{
		{name: "trap", want: "reconcile trapped", counter: func(s wasm.Stats) int64 { return s.Traps }},
		{name: "loop", timeout: 200 * time.Millisecond, want: "interrupted at its deadline", counter: func(s wasm.Stats) int64 { return s.Timeouts }},
		{name: "bomb", want: "reconcile trapped", counter: func(s wasm.Stats) int64 { return s.Traps }},
		{name: "garbage", want: "outside the plugin's", counter: func(s wasm.Stats) int64 { return s.BadResults }, isBad: true},
		{name: "badflags", want: "unknown flags", counter: func(s wasm.Stats) int64 { return s.BadResults }, isBad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, discarded := tc.counter(m.Stats()), m.Stats().Discarded
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			_, err := m.Reconcile(ctx, call(tc.name))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `plugin "misbehave"`) {
				t.Fatalf("err = %v, want one naming the plugin and containing %q", err, tc.want)
			}
			if tc.isBad && !errors.Is(err, abi.ErrMalformedResult) {
				t.Fatalf("err = %v, want ErrMalformedResult", err)
			}
			if tc.counter(m.Stats()) != before+1 || m.Stats().Discarded != discarded+1 {
				t.Fatalf("the fault was not counted, or the instance not thrown away: %+v", m.Stats())
			}
			// The plugin still works.
			if res, err := m.Reconcile(context.Background(), call("fine")); err != nil || res != (abi.Result{}) {
				t.Fatalf("after %s: %+v, %v", tc.name, res, err)
			}
		})
	}
}

// The memory bomb is held at the cap: no instance grows past it.
func TestMemoryCap(t *testing.T) {
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", MemoryLimit: 4 << 20})
	if _, err := m.Reconcile(context.Background(), call("bomb")); err == nil {
		t.Fatal("the bomb succeeded")
	}
	if _, err := m.Reconcile(context.Background(), call("fine")); err != nil {
		t.Fatal(err)
	}
	if _, mem := m.Instances(); mem > 4<<20 {
		t.Fatalf("an instance holds %d bytes, over the 4 MiB cap", mem)
	}
}

// An instance whose memory grew past the recycle bound is replaced after its reconcile.
func TestRecycleGrownInstance(t *testing.T) {
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", MemoryLimit: 8 << 20, RecycleAbove: 1})
	before := m.Stats().Recycled // Compile's smoke instance counts too
	if _, err := m.Reconcile(context.Background(), call("fine")); err != nil {
		t.Fatal(err)
	}
	if got := m.Stats().Recycled; got != before+1 {
		t.Fatalf("recycled %d instances in the reconcile, want 1", got-before)
	}
	if idle, _ := m.Instances(); idle != 0 {
		t.Fatalf("%d instances kept after recycling, want 0", idle)
	}
}

// Without interruption a looping guest cannot be stopped; a slow one finishes past its deadline.
func TestNotInterruptible(t *testing.T) {
	no := false
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", Interruptible: &no})
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := m.Reconcile(ctx, call("slow")); err != nil {
		t.Fatalf("a non-interruptible guest was interrupted: %v", err)
	}
}

// A guest that spins without interruption still yields to the Go runtime: with such guests
// on every processor, the process collects garbage before any of them is done. (The yield
// points of the loop checks stay in non-interruptible modules; without them the collection
// would wait for the guests, and so would every goroutine of the host.)
func TestNotInterruptibleLoopsYield(t *testing.T) {
	no := false
	n := runtime.GOMAXPROCS(0)
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", Interruptible: &no, MaxInstances: n})
	spinning := make(chan struct{}, n)
	log := funcr.New(func(_, args string) {
		if strings.Contains(args, `"spinning"`) {
			spinning <- struct{}{}
		}
	}, funcr.Options{})
	// What earlier tests left is collected first: with the processors taken by guests, the
	// collector gets a quarter of one, and marking a large heap would take as long as the spin.
	runtime.GC()
	done := make(chan error, n)
	for range n {
		go func() {
			c := call("spin")
			c.Logger = log
			_, err := m.Reconcile(context.Background(), c)
			done <- err
		}()
	}
	for range n {
		<-spinning
	}
	runtime.GC()
	select {
	case <-done:
		t.Fatal("a spinning guest finished before the garbage collection did: the collection waited for it")
	default:
	}
	for range n {
		if err := <-done; err != nil {
			t.Errorf("a non-interruptible guest failed: %v", err)
		}
	}
}

func TestModulesRefusedAtLoad(t *testing.T) {
	e := engine(t)
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"abi v7", module(t, "testguests", "abi7"), "plugin speaks ABI v7, host speaks v1"},
		{"bad import", module(t, "testguests", "badimport"), `invalid import["env"."launch_missiles"]`},
		{"no version marker", []byte("\x00asm\x01\x00\x00\x00"), "not a wasmrec plugin: no wasmrec_abi_v<N> export"},
		{"not wasm", []byte("#!/bin/sh\necho hi\n"), "not a WebAssembly module: the file is not WebAssembly"},
		{"native executable", []byte("\x7fELF\x02\x01\x01\x00"), "an ELF executable, built for this machine: GOOS=wasip1 GOARCH=wasm is missing"},
		{"empty", nil, "not a WebAssembly module: the file is empty"},
		{"truncated", module(t, "testguests", "noop")[:100], "the module is cut short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Compile(context.Background(), tc.wasm, wasm.Options{Name: "bad"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `plugin "bad"`) {
				t.Fatalf("err = %v, want one naming the plugin and containing %q", err, tc.want)
			}
		})
	}
}

// Guests spinning on every processor at once, while the process collects garbage: each is still
// interrupted at its deadline. (Guest machine code cannot be preempted by the Go scheduler; a
// guest that never left it would hold up the collector's stop-the-world, and with it the timer
// that interrupts it. The instrumented loops yield to Go now and then.)
func TestLoopsOnEveryProcessorAreInterrupted(t *testing.T) {
	n := runtime.GOMAXPROCS(0) + 1
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", MaxInstances: n})
	stop := make(chan struct{})
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				runtime.GC()
			}
		}
	}()
	errs := make(chan error, n)
	for range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err := m.Reconcile(ctx, call("loop"))
			errs <- err
		}()
	}
	for range n {
		select {
		case err := <-errs:
			if err == nil || !strings.Contains(err.Error(), "interrupted at its deadline") {
				t.Errorf("err = %v, want an interruption", err)
			}
		case <-time.After(time.Minute): // a hang, not a slow machine
			t.Fatal("a looping guest was not interrupted")
		}
	}
	close(stop)
	<-gcDone
}

// A guest that prints far more than its log limit leaves at most what the limit allows in the
// host log; the rest is counted, and said once.
func TestGuestOutputIsBounded(t *testing.T) {
	log, logs := logSink(t)
	const rate = 50 // lines/s, burst 100
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", Logger: log,
		LogLimit: wasm.LogLimit{LinesPerSecond: rate}})
	began := time.Now()
	for range 3 {
		if _, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "chatty"}, Logger: log}); err != nil {
			t.Fatal(err)
		}
	}
	allowed := 2*rate + int(rate*time.Since(began).Seconds()) + 1
	out := logs()
	logged := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "chatter chatter") {
			logged++
		}
	}
	if logged == 0 || logged > allowed {
		t.Fatalf("%d lines of chatter in the log, want some and at most %d", logged, allowed)
	}
	s := m.Stats()
	if got, want := s.LogDroppedLines, int64(3*100_000-logged); got != want {
		t.Fatalf("dropped %d lines, want %d", got, want)
	}
	if got, want := s.LogDroppedBytes, int64((3*100_000-logged)*128); got != want { // each line and its newline
		t.Fatalf("dropped %d bytes, want %d", got, want)
	}
	if n := strings.Count(out, "dropped the plugin's output past its log limit"); n != 1 {
		t.Fatalf("the drop is said %d times, want once", n)
	}
	if !strings.Contains(out, `"limitsMet"="linesPerSecond"`) {
		t.Fatalf("the drop does not name the line rate:\n%s", tail(out))
	}
}

// With rates that do not bind, each reconcile logs up to its own cap.
func TestGuestOutputPerReconcileCap(t *testing.T) {
	log, logs := logSink(t)
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", Logger: log,
		LogLimit: wasm.LogLimit{LinesPerSecond: 1e7, BytesPerSecond: 1e10, PerReconcile: 128 * 50}}) // 50 lines and their newlines
	for range 2 {
		if _, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "chatty"}, Logger: log}); err != nil {
			t.Fatal(err)
		}
	}
	out := logs()
	if n := strings.Count(out, "chatter chatter chatter chatter chatter chatter chatter chatter\""); n != 2*50 {
		t.Fatalf("%d lines logged, want 50 per reconcile", n)
	}
	if !strings.Contains(out, `"limitsMet"="perReconcile"`) || !strings.Contains(out, `"droppedLines"=99950`) {
		t.Fatalf("the drop is not said with the first reconcile's count and the per-reconcile cap:\n%s", tail(out))
	}
}

// tail is the last lines of a log, for failure messages.
func tail(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}

// A closed module's instances' memory goes back to the OS as they close: each is a mapping of
// its own, outside the Go heap, unmapped then. Left to the Go runtime, a host kept 1 GiB of a
// deleted plugin's 20 s after.
func TestClosedModuleMemoryIsUnmapped(t *testing.T) {
	e := engine(t)
	m := compile(t, e, module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", MemoryLimit: 64 << 20})
	if _, err := m.Reconcile(context.Background(), call("hog-16")); err != nil {
		t.Fatal(err)
	}
	addr, size := wasm.IdleMemory(m)
	if size < 16<<20 {
		t.Fatalf("an idle instance of %d bytes, want one that grew by 16 MiB", size)
	}
	if rss, ok := mappingRSS(t, addr); !ok || rss < 16<<20 {
		t.Fatalf("the instance's memory at %#x: mapped %v, %d bytes resident; want a mapping of its own holding the 16 MiB the guest wrote", addr, ok, rss)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := mappingRSS(t, addr); ok {
		t.Fatalf("the closed instance's memory at %#x is still mapped", addr)
	}
}

// mappingRSS finds the mapping of the process that holds addr in /proc/self/smaps, and says how
// much of it is resident.
func mappingRSS(t *testing.T, addr uintptr) (rss uint64, ok bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps")
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= start && uint64(addr) < end
			continue
		}
		if in && len(f) == 3 && f[0] == "Rss:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10, true
		}
	}
	return 0, false
}

// A guest asleep when the host begins to stop wakes at once, interruptible or not, and goes on
// as if its sleep had ended: the reconcile finishes without error, and the host's graceful
// shutdown does not wait out a 2 s sleep.
//
// A Go guest's runtime sleeps again while its timer is not due: its clock moves on by what it
// did not sleep, or it would call the host's sleep again and again, spinning a core until the
// sleep's end.
func TestSleepEndsWhenTheHostStops(t *testing.T) {
	no := false
	for _, guest := range []string{"misbehave", "panic-go"} {
		for _, opts := range []wasm.Options{{Name: guest}, {Name: guest, Interruptible: &no}} {
			m := compile(t, engine(t), module(t, "testguests", guest), opts)
			stop := make(chan struct{})
			time.AfterFunc(200*time.Millisecond, func() { close(stop) })
			start := time.Now()
			if _, err := m.Reconcile(reconcile.WithStopping(context.Background(), stop), call("sleep")); err != nil {
				t.Fatalf("%s, interruptible %v: %v", guest, opts.Interruptible == nil, err)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("%s, interruptible %v: a 2 s sleep with the host stopping 200 ms in took %v", guest, opts.Interruptible == nil, took)
			}
		}
	}
}

// A guest asleep in WASI (poll_oneoff on a clock) wakes at its reconcile's deadline: a 2 s sleep
// under a 200 ms timeout holds its worker about 200 ms, not 2 s. Without a deadline it sleeps
// all of it.
func TestSleepEndsAtTheDeadline(t *testing.T) {
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave"})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	// It may return before its next loop check, or be interrupted there: a timeout either way.
	if _, err := m.Reconcile(ctx, call("sleep")); !errors.Is(err, wasm.ErrTimedOut) {
		t.Fatalf("a 2 s sleep under a 200 ms timeout: %v, want ErrTimedOut", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a 2 s sleep under a 200 ms timeout took %v", took)
	}
	if n := m.Stats().Timeouts; n != 1 {
		t.Fatalf("the timeout counted %d times, want once", n)
	}
	start = time.Now()
	if _, err := m.Reconcile(context.Background(), call("sleep")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("a 2 s sleep with no deadline took %v", took)
	}
}
