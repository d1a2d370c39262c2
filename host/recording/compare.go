package recording

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
)

// Write is one write a reconcile made: its function, the object, what it sent (the object,
// the patch, or the delete's or event's request) and its write options.
type Write struct {
	Fn      string
	Object  string // "v1 ConfigMap ns/name"
	Body    any    // its JSON, decoded
	Options abi.WriteOptions
	Status  abi.Status
}

// Writes are the writes of a step, in order: creates, updates, patches, deletes and events.
func (s *Step) Writes() []Write {
	var out []Write
	for _, e := range s.Events {
		if e.Type != EventCall || e.Fn == abi.ImportGet || e.Fn == abi.ImportList {
			continue
		}
		in, wo := e.In, abi.WriteOptions{}
		switch e.Fn {
		case abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus:
			if obj, opts, err := abi.SplitWrite(e.In); err == nil {
				in, wo = obj, opts
			}
		case abi.ImportPatch, abi.ImportDelete:
			_ = json.Unmarshal(e.In, &wo)
		}
		var body any
		_ = json.Unmarshal(in, &body)
		w := Write{Fn: e.Fn, Object: ObjectOf(e.Fn, e.In), Body: body, Options: wo, Status: abi.Status(e.Status)}
		if e.Fn == abi.ImportPatch { // the patch itself is what was written
			if m, ok := body.(map[string]any); ok {
				w.Body = m["patch"]
			}
		}
		out = append(out, w)
	}
	return out
}

// ObjectOf names the object a host call's request in is about, "v1 ConfigMap ns/name": its
// ref, a created or updated object's metadata, or an event's object.
func ObjectOf(fn string, in []byte) string {
	var r struct {
		abi.ObjectRef
		Object   *abi.ObjectRef `json:"object"`
		Metadata struct{ Namespace, Name string }
	}
	switch fn {
	case abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus:
		in, _, _ = abi.SplitWrite(in)
	}
	_ = json.Unmarshal(in, &r)
	if fn == abi.ImportEvent {
		if r.Object == nil {
			return "the reconciled object"
		}
		r.ObjectRef = *r.Object
	}
	if r.Name == "" {
		r.Name, r.Namespace = r.Metadata.Name, r.Metadata.Namespace
	}
	name := r.Name
	if r.Namespace != "" {
		name = r.Namespace + "/" + name
	}
	return strings.TrimSpace(r.APIVersion + " " + r.Kind + " " + name)
}

// Compare says how reconcile got differs from reconcile want (its recording, or the same
// recording run on another build): each write one made and the other did not, or made with
// other contents (field by field), the Events, and the outcome and result. None: the same.
func Compare(want, got *Step) []string {
	var out []string
	key := func(w Write) string { return w.Fn + " " + w.Object }
	group := func(ws []Write) (map[string][]Write, []string) {
		m := map[string][]Write{}
		var order []string
		for _, w := range ws {
			if w.Fn == abi.ImportEvent {
				continue
			}
			k := key(w)
			if m[k] == nil {
				order = append(order, k)
			}
			m[k] = append(m[k], w)
		}
		return m, order
	}
	wm, worder := group(want.Writes())
	gm, gorder := group(got.Writes())
	for _, k := range worder {
		ws, gs := wm[k], gm[k]
		for i := range max(len(ws), len(gs)) {
			switch {
			case i >= len(gs):
				out = append(out, fmt.Sprintf("%s: recorded, not made", k))
			case i >= len(ws):
				out = append(out, fmt.Sprintf("%s: made, not recorded", k))
			default:
				for _, d := range diffJSON("", ws[i].Body, gs[i].Body) {
					out = append(out, fmt.Sprintf("%s: %s", k, d))
				}
				if ws[i].Options != gs[i].Options {
					out = append(out, fmt.Sprintf("%s: write options: recorded %s, made %s", k, ws[i].Options, gs[i].Options))
				}
			}
		}
	}
	for _, k := range gorder {
		if wm[k] == nil {
			for range gm[k] {
				out = append(out, fmt.Sprintf("%s: made, not recorded", k))
			}
		}
	}
	events := func(s *Step) []string {
		var evs []string
		for _, w := range s.Writes() {
			if w.Fn == abi.ImportEvent {
				m, _ := w.Body.(map[string]any)
				evs = append(evs, fmt.Sprintf("%v %v %q about %s", m["type"], m["reason"], m["message"], w.Object))
			}
		}
		return evs
	}
	if we, ge := events(want), events(got); !slices.Equal(we, ge) {
		out = append(out, fmt.Sprintf("events: recorded %s, made %s", listOf(we), listOf(ge)))
	}
	if want.Outcome != got.Outcome || string(want.Result) != string(got.Result) {
		out = append(out, fmt.Sprintf("result: recorded %s, made %s", want.Describe(), got.Describe()))
	}
	return out
}

func listOf(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return "[" + strings.Join(s, "; ") + "]"
}

// DiffJSON lists where two decoded JSON values differ, a line per field: "data.b: "1" -> "2"",
// "data.c: added "3"", "data.d: removed (was "4")".
func DiffJSON(a, b any) []string { return diffJSON("", a, b) }

// diffJSON lists where two JSON values differ, a line per field: "path: a -> b".
func diffJSON(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			p := k
			if path != "" {
				p = path + "." + k
			}
			av, ain := am[k]
			bv, bin := bm[k]
			switch {
			case !ain:
				out = append(out, fmt.Sprintf("%s: added %s", p, show(bv)))
			case !bin:
				out = append(out, fmt.Sprintf("%s: removed (was %s)", p, show(av)))
			default:
				out = append(out, diffJSON(p, av, bv)...)
			}
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	if path == "" {
		path = "(the whole)"
	}
	return []string{fmt.Sprintf("%s: %s -> %s", path, show(a), show(b))}
}

func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}
