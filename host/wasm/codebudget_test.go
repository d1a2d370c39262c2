package wasm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/wasmrec/wasmrec/host/wasm"
)

// budget is a CodeBudget of a fixed number of bytes that records what it was asked.
type budget struct {
	mu          sync.Mutex
	limit, used int64
	peak        int64
}

func (b *budget) Charge(n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return fmt.Errorf("%d bytes asked, %d of %d used", n, b.used, b.limit)
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return nil
}

func (b *budget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

func (b *budget) figures() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// A module is charged what compiling it costs while it compiles, what its code holds after,
// and nothing once closed; one that does not fit is refused before it is compiled, with the
// budget's own words, and leaves the budget as it was.
func TestCodeBudgetIsChargedForTheModulesLife(t *testing.T) {
	e := engine(t)
	wasmBytes := module(t, "testguests", "misbehave")
	size := int64(len(wasmBytes))
	b := &budget{limit: size * wasm.CompilePeak}
	m := compile(t, e, wasmBytes, wasm.Options{Name: "team-a.one", Code: b})
	if used, peak := b.figures(); peak != size*wasm.CompilePeak || used != size*wasm.CodeHeld {
		t.Fatalf("charged %d at the peak and %d after, want %d and %d", peak, used, size*wasm.CompilePeak, size*wasm.CodeHeld)
	}

	// Another memory cap: the code is not shared, and compiling it does not fit.
	_, err := e.Compile(context.Background(), wasmBytes, wasm.Options{Name: "team-a.two", Code: b, MemoryLimit: 64 << 20})
	var over *wasm.BudgetError
	if !errors.As(err, &over) || !errors.Is(err, over.Err) {
		t.Fatalf("a second module past the budget: %v, want a *BudgetError", err)
	}
	if want := fmt.Sprintf(`%d bytes asked, %d of %d used`, size*wasm.CompilePeak, size*wasm.CodeHeld, b.limit); err.Error() != want {
		t.Fatalf("refused with %q, want %q", err, want)
	}
	if used, _ := b.figures(); used != size*wasm.CodeHeld {
		t.Fatalf("after the refusal %d bytes are charged, want the first module's %d", used, size*wasm.CodeHeld)
	}

	// The same bytes and settings share the code the engine holds: no compile, nor its peak.
	shared := compile(t, e, wasmBytes, wasm.Options{Name: "team-a.shared", Code: b})
	if used, peak := b.figures(); used != 2*size*wasm.CodeHeld || peak != size*wasm.CompilePeak {
		t.Fatalf("a module sharing compiled code: %d charged, peak %d; want %d and %d", used, peak, 2*size*wasm.CodeHeld, size*wasm.CompilePeak)
	}
	if err := shared.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if used, _ := b.figures(); used != 0 {
		t.Fatalf("after Close (twice) %d bytes are charged, want 0", used)
	}
	m = compile(t, e, wasmBytes, wasm.Options{Name: "team-a.two", Code: b, MemoryLimit: 64 << 20})
	if used, _ := b.figures(); used != size*wasm.CodeHeld {
		t.Fatalf("the second module, once the first closed: %d charged, want %d", used, size*wasm.CodeHeld)
	}
	_ = m.Close(context.Background())
}
