package wasmrec

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/abi"
)

type recorder struct {
	levels []int32
	lines  []string
	calls  []string
}

func (r *recorder) Call(_ context.Context, fn string, req []byte) (abi.Status, []byte) {
	r.calls = append(r.calls, fn+" "+string(req))
	return abi.StatusNotFound, []byte("nope")
}

func (r *recorder) Log(level int32, line []byte) {
	r.levels = append(r.levels, level)
	r.lines = append(r.lines, string(line))
}

type stringer struct{ n int }

func (s stringer) String() string { return strings.Repeat("*", s.n) }

func TestLogLineEncoding(t *testing.T) {
	var nilStringer *time.Location // a Stringer whose String works on nil
	for _, c := range []struct {
		name string
		msg  string
		kv   []any
		want string
	}{
		{"no key/values", "hello", nil, "hello"},
		{"strings and numbers", "scaled", []any{"deployment", "web", "replicas", 3, "ratio", 0.5, "ok", true},
			`scaled` + "\x00" + `["deployment","web","replicas",3,"ratio",0.5,"ok",true]`},
		{"nil, maps and slices", "m", []any{"n", nil, "m", map[string]int{"a": 1}, "s", []string{"x"}},
			"m\x00" + `["n",null,"m",{"a":1},"s",["x"]]`},
		{"an odd key gets (MISSING)", "odd", []any{"a", 1, "b"}, "odd\x00" + `["a",1,"b","(MISSING)"]`},
		{"a key that is not a string", "k", []any{42, "v"}, "k\x00" + `["42","v"]`},
		{"what json.Marshal refuses is its %v", "bad", []any{"nan", math.NaN(), "ch", make(chan int)},
			"bad\x00" + `["nan","NaN","ch","` + "0x" /* checked by prefix below */},
		{"an error is its message", "failed", []any{"error", errors.New("boom")}, "failed\x00" + `["error","boom"]`},
		{"a Stringer is its string", "s", []any{"stars", stringer{3}, "d", 1500 * time.Millisecond},
			"s\x00" + `["stars","***","d","1.5s"]`},
		{"a json.Marshaler is marshalled", "t", []any{"at", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			"t\x00" + `["at","2026-01-02T03:04:05Z"]`},
		{"a Stringer on nil still works", "l", []any{"loc", nilStringer}, "l\x00" + `["loc","UTC"]`},
		{"a NUL in the message is replaced", "a\x00b", []any{"k", "v"}, "a\uFFFDb\x00" + `["k","v"]`},
		{"a NUL in a value is escaped JSON", "v", []any{"k", "a\x00b"}, "v\x00" + `["k","a\u0000b"]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := string(appendLogLine(nil, c.msg, c.kv))
			if strings.HasSuffix(c.want, "0x") {
				if !strings.HasPrefix(got, c.want) {
					t.Errorf("got %q, want it to start with %q", got, c.want)
				}
				return
			}
			if got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
			if strings.Count(got, "\x00") > 1 {
				t.Errorf("%q has more than one NUL", got)
			}
		})
	}
}

func TestLogLineTooLongIsSentFlat(t *testing.T) {
	big := strings.Repeat("x", maxLogLine)
	got := appendLogLine(nil, "big", []any{"k", big, "n", 1})
	if len(got) > maxLogLine {
		t.Errorf("a line of %d bytes, more than the host keeps (%d)", len(got), maxLogLine)
	}
	if strings.Contains(string(got), "\x00") {
		t.Error("an oversized line was sent structured: its JSON would be cut")
	}
	if !strings.HasPrefix(string(got), "big k=xxx") {
		t.Errorf("got %.40q..., want the flat form", got)
	}
	if small := appendLogLine(nil, "small", []any{"k", strings.Repeat("x", 100)}); !strings.Contains(string(small), "\x00") {
		t.Error("a short line was not sent structured")
	}
}

func TestLoggerGoesToTheLogTransport(t *testing.T) {
	r := &recorder{}
	restore := SetLogTransport(r)
	Log.Info("hello", "a", 1)
	Log.Warn("careful")
	Log.Debug("detail", "x", "y")
	Log.Error(errors.New("boom"), "failed", "odd")
	restore()
	Log.Info("dropped") // back to the (absent) host
	want := []string{"hello\x00[\"a\",1]", "careful", "detail\x00[\"x\",\"y\"]", "failed\x00[\"odd\",\"(MISSING)\",\"error\",\"boom\"]"}
	if strings.Join(r.lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines = %q, want %q", r.lines, want)
	}
	wantLevels := []int32{abi.LogInfo, abi.LogWarn, abi.LogDebug, abi.LogError}
	for i, l := range wantLevels {
		if i >= len(r.levels) || r.levels[i] != l {
			t.Fatalf("levels = %v, want %v", r.levels, wantLevels)
		}
	}
}

func TestClientCallsItsTransport(t *testing.T) {
	r := &recorder{}
	c := NewClientWith(r)
	_, err := c.Get(context.Background(), "v1", "ConfigMap", "demo", "web")
	if !IsNotFound(err) {
		t.Fatalf("Get = %v, want the transport's not found", err)
	}
	if want := `get {"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"web"}`; len(r.calls) != 1 || r.calls[0] != want {
		t.Errorf("calls = %q, want %q", r.calls, want)
	}
	var se *StatusError
	if !errors.As(err, &se) || se.Message != "nope" || se.Call != abi.ImportGet {
		t.Errorf("error = %#v, want the transport's status and message", err)
	}
	if _, err := NewClient().Get(context.Background(), "v1", "ConfigMap", "demo", "web"); err == nil || IsNotFound(err) {
		t.Errorf("NewClient outside wasm = %v, want the no-host error", err)
	}
}

// V(1).Info is a debug line, V(0) an info line; WithValues' key/values come first, and do not
// leak into the logger they were added to.
func TestLoggerVAndWithValues(t *testing.T) {
	var r recorder
	defer SetLogTransport(&r)()
	l := Log.WithValues("cronjob", "ns/a")
	l.V(1).Info("job count", "active", 2)
	l.V(0).Info("plain")
	Log.V(2).Error(errors.New("boom"), "failed")
	Log.Info("bare")
	want := []string{
		"job count\x00" + `["cronjob","ns/a","active",2]`,
		"plain\x00" + `["cronjob","ns/a"]`,
		"failed\x00" + `["error","boom"]`,
		"bare",
	}
	if strings.Join(r.lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", r.lines, want)
	}
	if wantLevels := []int32{abi.LogDebug, abi.LogInfo, abi.LogError, abi.LogInfo}; len(r.levels) != 4 || r.levels[0] != wantLevels[0] || r.levels[1] != wantLevels[1] || r.levels[2] != wantLevels[2] || r.levels[3] != wantLevels[3] {
		t.Errorf("levels %v, want %v", r.levels, wantLevels)
	}
}

// While the host drops debug lines (the request said so), the Logger does not make them: a
// value that would cost a json.Marshal is never encoded. Info, warn and error lines go on.
func TestDebugLinesTheHostDropsAreNotMade(t *testing.T) {
	var r recorder
	defer SetLogTransport(&r)()
	defer debugKept.Store(true)
	debugKept.Store(false)
	marshalled := 0
	costly := marshalCounter{&marshalled}
	Log.V(1).Info("job created", "job", costly)
	Log.Debug("detail", "job", costly)
	if Log.V(1).Enabled() || !Log.Enabled() {
		t.Errorf("Enabled while debug lines are dropped: V(1) %v, V(0) %v; want false, true", Log.V(1).Enabled(), Log.Enabled())
	}
	Log.Info("plain", "n", 1)
	Log.Warn("careful")
	Log.V(1).Error(errors.New("boom"), "failed")
	if marshalled != 0 {
		t.Errorf("a dropped debug line marshalled its value %d times", marshalled)
	}
	want := []string{"plain\x00[\"n\",1]", "careful", "failed\x00[\"error\",\"boom\"]"}
	if strings.Join(r.lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines = %q, want %q", r.lines, want)
	}
	debugKept.Store(true)
	r.lines = nil
	Log.V(1).Info("job created", "job", costly)
	if marshalled != 1 || len(r.lines) != 1 || !Log.V(1).Enabled() {
		t.Errorf("with debug lines kept: %d marshals, lines %q", marshalled, r.lines)
	}
}

type marshalCounter struct{ n *int }

func (m marshalCounter) MarshalJSON() ([]byte, error) { *m.n++; return []byte(`{}`), nil }
