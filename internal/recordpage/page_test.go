package recordpage_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/internal/recordpage"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

// hostile is what a tenant may put in an object the plugin reads: markup that would run if the
// page did not escape it.
const hostile = `<img src=x onerror="document.title='pwned'"><script>document.title='pwned'</script>`

func call(fn string, in, out any, status abi.Status) recording.Event {
	i, _ := json.Marshal(in)
	var o []byte
	if out != nil {
		o, _ = json.Marshal(out)
	}
	return recording.Event{Type: recording.EventCall, Fn: fn, In: i, Out: o, Status: uint32(status)}
}

func configMap(rv string, data map[string]any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "team-a", "name": "web", "resourceVersion": rv}, "data": data}
}

// A reconcile that reads a ConfigMap holding markup, updates it, records an Event and prints a
// line; and the same reconcile on another build that writes another value.
func pageOf(t *testing.T) (recordpage.Page, int) {
	ref := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "team-a", "name": "web"}
	step := &recording.Step{Kind: recording.StepReconcile, Request: &recording.Request{Namespace: "team-a", Name: "web"}, Outcome: recording.Returned}
	for _, e := range []recording.Event{
		call(abi.ImportGet, ref, configMap("7", map[string]any{"note": hostile}), abi.StatusOK),
		{Type: recording.EventWalltime, N: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC).UnixNano()},
		{Type: recording.EventRandom, Out: []byte{1, 2, 3, 4}},
		call(abi.ImportUpdate, map[string]any{"object": configMap("7", map[string]any{"note": hostile, "hash": "v1"}), "fieldOwner": "hasher"},
			configMap("8", map[string]any{"note": hostile, "hash": "v1"}), abi.StatusOK),
		call(abi.ImportCreate, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "team-a", "generateName": "web-"}},
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "team-a", "name": "web-x7k2p", "generateName": "web-"}}, abi.StatusOK),
		call(abi.ImportEvent, map[string]any{"type": "Normal", "reason": "Hashed", "message": hostile}, nil, abi.StatusOK),
		{Type: recording.EventWrite, Fn: "stdout", In: []byte("done " + hostile)},
		{Type: recording.EventLog, N: abi.LogInfo, In: []byte("hashed\x00[\"object\",\"team-a/web\",\"hash\",\"v1\"]")},
	} {
		step.Add(e)
	}
	other := &recording.Step{Kind: recording.StepReconcile, Request: step.Request, Outcome: recording.Returned}
	for _, e := range step.Events {
		if e.Fn == abi.ImportUpdate {
			e = call(abi.ImportUpdate, configMap("7", map[string]any{"note": hostile, "hash": "v2"}), nil, abi.StatusOK)
		}
		other.Add(e)
	}
	rec := &recording.Recording{Format: recording.Format, Plugin: "hash", Module: "sha256:" + strings.Repeat("ab", 32),
		Time: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), Duration: "1.2ms", Request: *step.Request,
		Outcome: step.Outcome, Instance: "i-0123", Before: 3, Step: step}
	return recordpage.Page{Title: "hash: 1 recording", Sections: []recordpage.Section{{
		Digest: "sha256:" + strings.Repeat("cd", 32), Recording: rec, Replay: "the same, replayed offline",
		Other: &recordpage.Other{Module: "hash-v2.wasm", Step: other, Differences: recording.Compare(step, other)},
	}}}, len(step.Events)
}

// The page, loaded in Chromium: the markup a tenant put in an object shows as text and runs
// nowhere; each event is a row of the timeline; an answer opens on a click; the update shows as
// the field it changed; the two builds' writes stand side by side.
func TestPageInABrowser(t *testing.T) {
	p, events := pageOf(t)
	var b bytes.Buffer
	if err := recordpage.Write(&b, p); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path), chromedp.WaitVisible(chromedp.CSS("section.recording"))); err != nil {
		t.Fatal(err)
	}
	title := testenv.Eval[string](t, ctx, `document.title`)
	rows := testenv.Eval[int](t, ctx, `document.querySelectorAll("table.timeline tbody tr").length`)
	images := testenv.Eval[int](t, ctx, `document.querySelectorAll("img").length`)
	scripts := testenv.Eval[int](t, ctx, `document.querySelectorAll("script").length`)
	const answerShown = `document.querySelector("details.answer pre").checkVisibility()`
	closedShown := testenv.Eval[bool](t, ctx, answerShown)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("details.answer summary"))); err != nil {
		t.Fatal(err)
	}
	openShown := testenv.Eval[bool](t, ctx, answerShown)
	answer := testenv.Eval[string](t, ctx, `document.querySelector("details.answer pre").textContent`)
	changes := testenv.Eval[string](t, ctx, `document.querySelector("ul.changes").textContent`)
	sameLevel := testenv.Eval[string](t, ctx, `(() => {
		const r = document.querySelector(".pair.differs .recorded").getBoundingClientRect();
		const m = document.querySelector(".pair.differs .made").getBoundingClientRect();
		return (r.top === m.top && r.right <= m.left && r.width > 100 && m.width > 100) ? "side by side" : JSON.stringify([r, m]);
	})()`)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if title != p.Title || images != 0 || scripts != 0 {
		t.Errorf("the recorded markup ran or was parsed: title %q, %d img, %d script elements", title, images, scripts)
	}
	if rows != events {
		t.Errorf("the timeline has %d rows, want one per event, %d", rows, events)
	}
	if closedShown || !openShown || !strings.Contains(answer, `<script>document.title='pwned'</script>`) { // shown as text
		t.Errorf("the answer: shown %v before a click, %v after; its text %q", closedShown, openShown, answer)
	}
	if line := testenv.Eval[string](t, ctx, `document.querySelector("tr.event-log").textContent`); !strings.Contains(line, "info") || !strings.Contains(line, "hashed object=team-a/web hash=v1") {
		t.Errorf("the log line reads %q", line)
	}
	if writes := testenv.Eval[string](t, ctx, `[...document.querySelectorAll("div.write p")].map(e => e.textContent).join("\n")`); !strings.Contains(writes, "create v1 ConfigMap team-a/web-x7k2p: ok") || !strings.Contains(writes, `update v1 ConfigMap team-a/web (fieldOwner "hasher"): ok`) {
		t.Errorf("the writes, with a generated name:\n%s", writes)
	}
	if !strings.Contains(changes, `data.hash: added "v1"`) {
		t.Errorf("the update's changes: %q", changes)
	}
	if sameLevel != "side by side" {
		t.Errorf("the two builds' writes are not side by side: %s", sameLevel)
	}
	if dir := os.Getenv("WASMREC_PAGE_SHOT"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "page.png"), shot, 0o644)
	}
	if len(shot) < 1000 {
		t.Errorf("a screenshot of %d bytes", len(shot))
	}
}
