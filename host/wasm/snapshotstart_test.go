package wasm_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// A plugin's instances after the first start from its snapshot and reconcile as the first did:
// here a Go guest decodes a Deployment many times in each (its heap, goroutines and collector
// all come from the copy).
func TestInstancesStartFromTheSnapshot(t *testing.T) {
	ctx := context.Background()
	m := compile(t, engine(t), module(t, "testguests", "bench-go"), wasm.Options{Name: "bench-go", MaxInstances: 2})
	call := &wasm.Call{Request: abi.Request{Namespace: "bench", Name: "deployment"}, Host: cannedHost{}, Logger: logr.Discard()}
	for round := range 3 {
		// Two at once, so that a second instance is made from the snapshot.
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				for range 100 {
					if res, err := m.Reconcile(ctx, call); err != nil || res.Failed {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		_ = m.Retire(ctx) // closes them: the next round makes new ones
		m.Reactivate()
	}
	if got := m.Stats().FromSnapshot; got < 5 {
		t.Errorf("%d instances started from the snapshot, want at least 5 (of %d)", got, m.Stats().Instantiated)
	}
}
