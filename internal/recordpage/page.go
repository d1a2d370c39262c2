package recordpage

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/kubeanswer"
)

// Page is the recordings to show, in order.
type Page struct {
	// Title names what the page shows ("plugin app: 3 recordings").
	Title    string
	Sections []Section
}

// Section is one recording, and what another build did on it.
type Section struct {
	Digest    string
	Recording *recording.Recording
	// Replay says how an exact replay went ("the same", or the first difference); empty if
	// none was made.
	Replay string
	// Other is the same reconcile rerun on another build; nil if none.
	Other *Other
}

// Other is a rerun of a recording on another build.
type Other struct {
	// Module names the build (its file).
	Module string
	Step   *recording.Step
	// Differences are recording.Compare's lines; none: the same.
	Differences []string
}

//go:embed page.html.tmpl
var files embed.FS

var tmpl = template.Must(template.New("page.html.tmpl").Funcs(template.FuncMap{
	"short": recording.ShortDigest,
}).ParseFS(files, "page.html.tmpl"))

// Write writes the page.
func Write(w io.Writer, p Page) error {
	var data struct {
		Title    string
		Sections []section
	}
	data.Title = p.Title
	for _, s := range p.Sections {
		data.Sections = append(data.Sections, build(s))
	}
	var b bytes.Buffer // a template error leaves nothing half written
	if err := tmpl.Execute(&b, data); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// section is a Section as the template reads it.
type section struct {
	ID, Digest, Plugin, Module, Request, Time, Duration, Outcome, Instance string
	Failed                                                                 bool
	Before                                                                 int
	Replay                                                                 string
	Events                                                                 []event
	Writes                                                                 []write
	Other                                                                  *other
}

type event struct {
	N                    int
	Type, Fn, Status, At string
	In, Out              string // pretty JSON or text, "" if none, shown on a click
	Inline               string // a short answer, shown as it is
}

type write struct {
	Fn, Object, Status string
	Options            string // its write options, if any: `dryRun, fieldOwner "o"`
	// Changes are the fields it changed in the object as the reconcile last read it; Body is
	// what it sent, when there is no read to compare with.
	Changes []string
	Body    string
}

type other struct {
	Module               string
	Outcome, OtherResult string
	Differences          []string
	Rows                 []pair
}

// pair is a write of the recording beside the other build's (either may be missing).
type pair struct {
	Object, Recorded, Made string
	Differs                bool
}

func build(s Section) section {
	r := s.Recording
	out := section{
		ID: "r-" + recording.ShortDigest(s.Digest), Digest: s.Digest, Plugin: r.Plugin, Module: r.Module,
		Request: r.Request.String(), Time: r.Time.UTC().Format(time.RFC3339Nano), Duration: r.Duration,
		Outcome: r.Step.Describe(), Failed: r.Failed, Instance: r.Instance, Before: r.Before, Replay: s.Replay,
	}
	read := map[string]any{} // each object as the reconcile last read or wrote it, by ObjectOf
	for i, e := range r.Step.Events {
		ev := event{N: i + 1, Type: e.Type, Fn: e.Fn}
		switch e.Type {
		case recording.EventCall:
			ev.Status = abi.Status(e.Status).String()
			ev.In, ev.Out = pretty(e.In), answer(e.Fn, e.Out)
			remember(read, e)
		case recording.EventMonotime:
			ev.At = time.Duration(e.N).String() + " since the instance started"
		case recording.EventWalltime:
			ev.At = time.Unix(0, e.N).UTC().Format(time.RFC3339Nano)
		case recording.EventRandom:
			ev.Inline = fmt.Sprintf("%d bytes: %x", len(e.Out), e.Out)
			if len(e.Out) > 32 {
				ev.Inline, ev.Out = fmt.Sprintf("%d bytes", len(e.Out)), fmt.Sprintf("%x", e.Out)
			}
		case recording.EventSleep:
			ev.At = time.Duration(e.N).String()
		case recording.EventLog:
			ev.Fn = logLevel(e.N)
			ev.Inline = strings.ToValidUTF8(wasm.LogText(e.In), "\uFFFD")
			if len(ev.Inline) > 200 {
				ev.Inline, ev.Out = "", ev.Inline
			}
		default: // write: stdout, stderr
			ev.Inline = strings.ToValidUTF8(string(e.In), "\uFFFD")
			if len(ev.Inline) > 200 {
				ev.Inline, ev.Out = "", ev.Inline
			}
		}
		out.Events = append(out.Events, ev)
	}
	seen := map[string]any{}
	for _, e := range r.Step.Events {
		if e.Type != recording.EventCall {
			continue
		}
		if e.Fn == abi.ImportGet || e.Fn == abi.ImportList {
			remember(seen, e)
			continue
		}
		for _, w := range (&recording.Step{Events: []recording.Event{e}}).Writes() {
			wr := write{Fn: w.Fn, Object: w.Object, Status: w.Status.String()}
			if w.Options != (abi.WriteOptions{}) {
				wr.Options = w.Options.String()
			}
			if w.Fn == abi.ImportCreate && w.Status == abi.StatusOK { // a generated name is in the answer
				if o, err := kubeanswer.Object(e.Out); err == nil {
					b, _ := json.Marshal(o)
					wr.Object = recording.ObjectOf(abi.ImportCreate, b)
				}
			}
			prev, ok := seen[w.Object]
			switch {
			case w.Fn == abi.ImportDelete || w.Fn == abi.ImportEvent:
				wr.Body = prettyValue(w.Body)
			case ok && (w.Fn == abi.ImportUpdate || w.Fn == abi.ImportUpdateStatus):
				wr.Changes = changesOf(prev, w.Body)
			default: // a create, a patch: what it sent
				wr.Body = prettyValue(w.Body)
			}
			out.Writes = append(out.Writes, wr)
			if w.Status == abi.StatusOK && e.Fn != abi.ImportDelete {
				remember(seen, e)
			}
		}
	}
	if s.Other != nil {
		out.Other = buildOther(r.Step, s.Other)
	}
	return out
}

func logLevel(n int64) string {
	switch {
	case n <= abi.LogDebug:
		return "debug"
	case n == abi.LogInfo:
		return "info"
	case n == abi.LogWarn:
		return "warn"
	}
	return "error"
}

// remember keeps the objects a call's answer holds, by name.
func remember(m map[string]any, e recording.Event) {
	if abi.Status(e.Status) != abi.StatusOK {
		return
	}
	var objs []map[string]any
	switch e.Fn {
	case abi.ImportList:
		objs, _ = kubeanswer.Items(e.Out)
	case abi.ImportGet, abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus, abi.ImportPatch:
		if o, err := kubeanswer.Object(e.Out); err == nil {
			objs = []map[string]any{o}
		}
	}
	for _, o := range objs {
		b, _ := json.Marshal(o)
		m[recording.ObjectOf(abi.ImportUpdate, b)] = o
	}
}

// changesOf lists the fields an update changed, metadata the server keeps aside.
func changesOf(before, after any) []string {
	strip := func(v any) any {
		b, _ := json.Marshal(v)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if md, ok := m["metadata"].(map[string]any); ok {
			for _, f := range []string{"resourceVersion", "managedFields", "generation", "uid", "creationTimestamp"} {
				delete(md, f)
			}
		}
		return m
	}
	d := recording.DiffJSON(strip(before), strip(after))
	if len(d) == 0 {
		return []string{"no change"}
	}
	return d
}

func buildOther(recorded *recording.Step, o *Other) *other {
	out := &other{Module: o.Module, Outcome: recorded.Describe(), OtherResult: o.Step.Describe(), Differences: o.Differences}
	mine, theirs := recorded.Writes(), o.Step.Writes()
	used := make([]bool, len(theirs))
	for _, w := range mine {
		p := pair{Object: w.Fn + " " + w.Object, Recorded: prettyValue(w.Body)}
		for j, t := range theirs {
			if !used[j] && t.Fn == w.Fn && t.Object == w.Object {
				used[j] = true
				p.Made = prettyValue(t.Body)
				break
			}
		}
		p.Differs = p.Made != p.Recorded
		out.Rows = append(out.Rows, p)
	}
	for j, t := range theirs {
		if !used[j] {
			out.Rows = append(out.Rows, pair{Object: t.Fn + " " + t.Object, Made: prettyValue(t.Body), Differs: true})
		}
	}
	return out
}

// answer is a call's answer as text: its objects as JSON (protobuf decoded), or its bytes.
func answer(fn string, b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if bytes.HasPrefix(b, []byte("k8s\x00")) {
		var v any
		var err error
		if fn == abi.ImportList {
			v, err = kubeanswer.Items(b)
		} else {
			v, err = kubeanswer.Object(b)
		}
		if err != nil {
			return fmt.Sprintf("protobuf, %d bytes: %v", len(b), err)
		}
		return "(protobuf, " + fmt.Sprint(len(b)) + " bytes, decoded)\n" + prettyValue(v)
	}
	return pretty(b)
}

// pretty indents JSON, its strings as they read (the template escapes them); other bytes are
// shown as text.
func pretty(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return prettyValue(v)
}

func prettyValue(v any) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	_ = e.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}
