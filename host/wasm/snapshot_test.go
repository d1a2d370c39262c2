package wasm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

// testguest reads bin/testguests/<name>.wasm.
func testguest(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "bin", "testguests", name+".wasm"))
	if err != nil {
		testenv.Missing(t, err, "testguests")
	}
	return b
}

// An instance started from a snapshot holds, before anything runs in it, exactly the memory and
// mutable globals the snapshot's instance held right after its _initialize.
func TestSnapshotRestoresTheInitialisedState(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(EngineOptions{CacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	for _, guest := range []string{"hash-go", "benchc"} {
		t.Run(guest, func(t *testing.T) {
			off := false // instances run _initialize and take no snapshot: the test takes it
			m, err := e.Compile(ctx, testguest(t, guest), Options{Name: guest, Snapshots: &off})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			c := m.code
			if c.snapshots.Why != "" {
				t.Fatalf("%s cannot be snapshotted: %s", guest, c.snapshots.Why)
			}
			<-m.tokens
			source, err := m.newInstance(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.put(source, false)
			var snap *snapshot
			if err := m.withBaseMemory(ctx, c, func(base []byte) (err error) {
				snap, err = takeSnapshot(source, c.snapshots, base, 1, nil)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			want, _ := source.mem.Read(0, source.mem.Size())

			copied, err := e.instantiate(ctx, c.runtime, c.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
			if err != nil {
				t.Fatal(err)
			}
			defer copied.Close(ctx)
			if got, _ := copied.Memory().Read(0, copied.Memory().Size()); bytes.Equal(got, want) && guest == "hash-go" {
				t.Fatal("a Go guest's memory is the same before and after _initialize: the test shows nothing")
			}
			if err := snap.restore(copied, c.snapshots); err != nil {
				t.Fatal(err)
			}
			if got, _ := copied.Memory().Read(0, copied.Memory().Size()); !bytes.Equal(got, want) {
				t.Errorf("restored memory (%d bytes) differs from the initialised instance's (%d bytes)", len(got), len(want))
			}
			for _, name := range c.snapshots.Globals {
				if got, want := copied.ExportedGlobal(name).Get(), source.mod.ExportedGlobal(name).Get(); got != want {
					t.Errorf("global %s = %d, want %d", name, got, want)
				}
			}
			t.Logf("%s: memory %d KiB, snapshot %d KiB in %d runs, %d globals", guest, len(want)>>10, snap.size>>10, len(snap.runs), len(snap.globals))

			// A second instance's snapshot shares the first's equal blocks, and restores as
			// exactly.
			other, err := m.newInstance(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.mod.Close(ctx) // made without a token of the pool
			var second *snapshot
			if err := m.withBaseMemory(ctx, c, func(base []byte) (err error) {
				second, err = takeSnapshot(other, c.snapshots, base, 1, snap)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			into, err := e.instantiate(ctx, c.runtime, c.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
			if err != nil {
				t.Fatal(err)
			}
			defer into.Close(ctx)
			if err := second.restore(into, c.snapshots); err != nil {
				t.Fatal(err)
			}
			wantOther, _ := other.mem.Read(0, other.mem.Size())
			if got, _ := into.Memory().Read(0, into.Memory().Size()); !bytes.Equal(got, wantOther) {
				t.Errorf("memory restored from a snapshot sharing another's blocks differs from its instance's")
			}
			if snap.size > 0 && second.size > snap.size/2 {
				t.Errorf("a second snapshot holds %d KiB of its own, the first %d KiB: it shares too little", second.size>>10, snap.size>>10)
			}
			t.Logf("%s: a second snapshot holds %d KiB of its own", guest, second.size>>10)
		})
	}
}
