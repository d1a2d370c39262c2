package pluginobjects

import (
	"errors"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/host/plugin"
)

// A move to a module that failed waits its backoff, and is said once per distinct failure; a
// move to another module starts afresh; a refusal (told by the plugin's OnSwap) is counted,
// and cleared by the module serving again or by a good swap.
func TestAnObjectsRunKeepsItsMovesAndSwaps(t *testing.T) {
	l := &objectRun{}
	if !l.announce() || l.announce() {
		t.Fatal("the load is news once")
	}
	if wait := l.moveTo("v2"); wait > 0 {
		t.Fatalf("a first move waits %s", wait)
	}
	unreachable := errors.New("registry down")
	delay, news := l.moveFailed(unreachable, plugin.ReasonFetchFailed)
	if delay <= 0 || !news {
		t.Fatalf("a first fetch failure: delay %s, news %v", delay, news)
	}
	if wait := l.moveTo("v2"); wait <= 0 {
		t.Fatal("a move that just failed is tried again at once")
	}
	if _, news := l.moveFailed(unreachable, plugin.ReasonFetchFailed); news {
		t.Error("the same failure is said again")
	}
	if s := l.serving(); s.lastErr != "registry down" || s.lastWhy != plugin.ReasonFetchFailed {
		t.Errorf("status after a fetch failure: %+v", s)
	}
	if wait := l.moveTo("v3"); wait > 0 {
		t.Errorf("a move to another module waits %s", wait)
	}
	l.moveFailed(errors.New("refused"), "") // a refusal: OnSwap records it
	l.swapped(plugin.SwapEvent{From: "a", Err: errors.New("refused")})
	if s := l.serving(); s.refusals != 1 || s.lastWhy != "SwapRefused" {
		t.Errorf("after a refusal: %+v", s)
	}
	l.swapped(plugin.SwapEvent{From: "a", To: "a", Unchanged: true})
	if s := l.serving(); s.lastErr != "" {
		t.Errorf("back on the serving module, the refusal still shows: %+v", s)
	}
	// A new module of the tag that does not fit now: shown, not a refusal, and gone once it swaps.
	l.swapped(plugin.SwapEvent{From: "a", Err: errors.New("its module needs 68Mi more to compile"), NotNow: true})
	if s := l.serving(); s.refusals != 1 || s.lastWhy != "SwapWaiting" || !strings.Contains(s.lastErr, "tried again at each poll") {
		t.Errorf("after a swap that did not fit: %+v", s)
	}
	l.swapped(plugin.SwapEvent{From: "a", To: "b"})
	l.moveDone()
	if s := l.serving(); s.swaps != 1 || s.lastErr != "" {
		t.Errorf("after a good swap: %+v", s)
	}
	f, news := l.notLoaded(plugin.ReasonRefused, "not ABI v1")
	if !news || f.refusals != 2 {
		t.Errorf("a new load refusal: news %v, %+v", news, f)
	}
	if f, news := l.notLoaded(plugin.ReasonRefused, "not ABI v1"); news || f.refusals != 2 {
		t.Errorf("the same load refusal again: news %v, %+v", news, f)
	}
}
