package versions

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

// modules compiles the hot-swap guest's versions as `make testguests` built them.
func modules(t *testing.T, versions ...string) []*wasm.Module {
	t.Helper()
	e, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	var out []*wasm.Module
	for _, v := range versions {
		b, err := os.ReadFile("../../../../bin/testguests/swap-v" + v + ".wasm")
		if err != nil {
			testenv.Missing(t, err, "testguests")
		}
		m, err := e.Compile(context.Background(), b, wasm.Options{Name: "swap"})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func closed(m *wasm.Module) bool {
	_, err := m.Reconcile(context.Background(), &wasm.Call{})
	return errors.Is(err, wasm.ErrClosed)
}

func TestKeepEvictsTheOldestAndTakeHandsOver(t *testing.T) {
	mods := modules(t, "1", "2", "3")
	k := &Kept{Max: 2}
	for _, m := range mods {
		_ = m.Retire(context.Background())
		k.Keep(m)
	}
	if got, want := k.Digests(), []string{mods[1].Digest(), mods[2].Digest()}; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want the two newest %v", got, want)
	}
	m, err := k.Take(mods[1].Digest())
	if err != nil || m != mods[1] {
		t.Fatalf("Take(v2) = %v, %v; want v2", m, err)
	}
	if m, _ := k.Take(mods[1].Digest()); m != nil {
		t.Error("v2 taken twice")
	}
	if m, _ := k.Take(mods[0].Digest()); m != nil {
		t.Error("v1 was evicted, and taken")
	}
}

func TestARefusedDigestIsRefusedBeforeItIsTaken(t *testing.T) {
	k := &Kept{}
	k.refused.Max = 2
	first := errors.New("asks for secrets")
	k.Refuse("sha256:a", first)
	var before *RefusedBeforeError
	if _, err := k.Take("sha256:a"); !errors.As(err, &before) || !errors.Is(err, first) || before.Digest != "sha256:a" {
		t.Fatalf("Take of a refused digest: %v; want a RefusedBeforeError wrapping the first refusal", err)
	}
	k.Refuse("sha256:b", first)
	k.Refuse("sha256:c", first) // past the Max remembered: forgotten, at the cost of a compile
	if _, err := k.Take("sha256:c"); err == nil {
		t.Error("the newest refusal was forgotten")
	}
}

func TestCloseClosesWhatIsKeptAndWhatComesBackLater(t *testing.T) {
	mods := modules(t, "1", "2")
	k := &Kept{}
	_ = mods[0].Retire(context.Background())
	k.Keep(mods[0])
	if first, err := k.Close(context.Background()); !first || err != nil {
		t.Fatalf("Close = %v, %v; want the first, no error", first, err)
	}
	if first, _ := k.Close(context.Background()); first {
		t.Error("a second Close said it was the first")
	}
	k.Keep(mods[1]) // a retirement that ends after the plugin closed
	if len(k.Digests()) != 0 || !k.Closed() {
		t.Errorf("kept %v after Close", k.Digests())
	}
	if !closed(mods[1]) {
		t.Error("a module kept after Close is still in service")
	}
}
