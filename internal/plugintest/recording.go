package plugintest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/internal/kubeanswer"
)

// FromRecording makes a case of a recorded reconcile: before are the objects it read (each as
// it first read it), the request its request, and what the recorded version did is expected:
// its result, after the objects it wrote (the fields it sent: a created or updated object, a
// merge, strategic or apply patch), gone those it deleted, and its Events. notes say what the
// case cannot hold, or where it may differ from the recording when run (on a new instance,
// where the recorded one had served reconciles before).
func FromRecording(name string, rec *recording.Recording) (Case, []string, error) {
	step := rec.Step
	if step == nil || step.Request == nil {
		return Case{}, nil, fmt.Errorf("the recording holds no reconcile")
	}
	c := Case{Name: name, Request: &Request{Namespace: step.Request.Namespace, Name: step.Request.Name, Retries: step.Request.Retries}}
	var notes []string
	if n := reconcilesBefore(rec); n > 0 {
		notes = append(notes, fmt.Sprintf("the recorded reconcile was its instance's %d%s: the case runs it on a new instance, so what the plugin kept from the reconciles before (a cache, a count) is not there", n+1, ordinal(n+1)))
	}
	// seen: read, or written, by the reconcile: an object it reads after it wrote it is not
	// what was there before it.
	seen := map[string]bool{}
	before := func(o map[string]any) {
		k := RefOf(o).String()
		if !seen[k] {
			seen[k] = true
			c.Before = append(c.Before, o)
		}
	}
	after := map[string]map[string]any{}
	var afterOrder []string
	gone := map[string]Ref{}
	// wrote takes o, what a create, update or patch sent, as what the object must hold after.
	wrote := func(o map[string]any) {
		k := RefOf(o).String()
		seen[k] = true
		delete(gone, k)
		if after[k] == nil {
			afterOrder = append(afterOrder, k)
		}
		after[k] = mergeInto(after[k], o)
	}
	var events []Event
	for i, e := range step.Events {
		if e.Type != recording.EventCall || abi.Status(e.Status) != abi.StatusOK {
			continue
		}
		switch e.Fn {
		case abi.ImportGet:
			o, err := kubeanswer.Object(e.Out)
			if err != nil {
				return Case{}, nil, fmt.Errorf("event %d, the answer of get: %w", i, err)
			}
			before(o)
		case abi.ImportList:
			items, err := kubeanswer.Items(e.Out)
			if err != nil {
				return Case{}, nil, fmt.Errorf("event %d, the answer of list: %w", i, err)
			}
			for _, o := range items {
				before(o)
			}
		case abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus:
			in, wo, err := abi.SplitWrite(e.In)
			if err != nil {
				return Case{}, nil, fmt.Errorf("event %d, the object of %s: %w", i, e.Fn, err)
			}
			if wo.DryRun { // it stored nothing
				continue
			}
			var o map[string]any
			if err := json.Unmarshal(in, &o); err != nil {
				return Case{}, nil, fmt.Errorf("event %d, the object of %s: %w", i, e.Fn, err)
			}
			if md, ok := o["metadata"].(map[string]any); ok {
				delete(md, "resourceVersion") // the fake cluster's differ
			}
			if e.Fn == abi.ImportCreate { // a generated name is the cluster's: take the answer's
				if created, err := kubeanswer.Object(e.Out); err == nil {
					if md, ok := o["metadata"].(map[string]any); ok {
						md["name"] = RefOf(created).Name
						delete(md, "generateName")
					}
				}
			}
			wrote(o)
		case abi.ImportPatch:
			var p abi.PatchRequest
			if err := json.Unmarshal(e.In, &p); err != nil {
				return Case{}, nil, fmt.Errorf("event %d, the patch: %w", i, err)
			}
			if p.DryRun {
				continue
			}
			var doc map[string]any
			if p.Type == abi.PatchJSON || json.Unmarshal(p.Patch, &doc) != nil || strings.Contains(string(p.Patch), `"$`) {
				notes = append(notes, fmt.Sprintf("a %s patch of %s is not in after: write what it must leave", p.Type, p.ObjectRef.Name))
				continue
			}
			doc["apiVersion"], doc["kind"] = p.APIVersion, p.Kind
			md, _ := doc["metadata"].(map[string]any)
			if md == nil {
				md = map[string]any{}
				doc["metadata"] = md
			}
			md["name"] = p.Name
			if p.Namespace != "" {
				md["namespace"] = p.Namespace
			}
			wrote(doc)
		case abi.ImportDelete:
			var d abi.DeleteRequest
			if err := json.Unmarshal(e.In, &d); err != nil {
				return Case{}, nil, fmt.Errorf("event %d, the delete: %w", i, err)
			}
			if d.DryRun {
				continue
			}
			r := Ref{APIVersion: d.APIVersion, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
			if !seen[r.String()] {
				// Deleted without being read: it was there, as far as the case goes.
				c.Before = append(c.Before, map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "metadata": map[string]any{"name": r.Name, "namespace": r.Namespace}})
				seen[r.String()] = true
			}
			gone[r.String()] = r
			delete(after, r.String())
		case abi.ImportEvent:
			var ev abi.EventRequest
			if err := json.Unmarshal(e.In, &ev); err != nil {
				return Case{}, nil, fmt.Errorf("event %d, the event: %w", i, err)
			}
			events = append(events, Event{Type: ev.Type, Reason: ev.Reason, Message: ev.Message})
		}
	}
	for _, k := range afterOrder {
		if o := after[k]; o != nil {
			c.After = append(c.After, o)
		}
	}
	for _, r := range gone {
		c.Gone = append(c.Gone, r)
	}
	slices.SortFunc(c.Gone, func(a, b Ref) int { return strings.Compare(a.String(), b.String()) })
	if events == nil {
		events = []Event{}
	}
	c.Events = &events
	if len(step.Result) > 0 {
		res, err := abi.DecodeResult(step.Result)
		if err != nil {
			return Case{}, nil, fmt.Errorf("the recorded result: %w", err)
		}
		c.Result = Result{Requeue: res.Requeue, Terminal: res.Terminal && res.Failed}
		if res.RequeueAfter > 0 {
			c.Result.RequeueAfter = &metav1.Duration{Duration: res.RequeueAfter}
		}
		if res.Failed {
			msg := res.Err
			c.Result.Error = &msg
		}
	}
	if step.Outcome != recording.Returned {
		notes = append(notes, fmt.Sprintf("the recorded reconcile %s (%s): a case expects what a reconcile returns; this one expects what it did up to then", step.Outcome, step.Error))
		msg := ""
		c.Result = Result{Error: &msg}
	}
	return c, notes, nil
}

func reconcilesBefore(rec *recording.Recording) int {
	// The steps before: its _initialize, maybe its manifest, then reconciles.
	return max(rec.Before-2, 0)
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// mergeInto merges src into dst, maps key by key, the rest replaced.
func mergeInto(dst, src map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = mergeInto(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}
