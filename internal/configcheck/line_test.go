package configcheck

import "testing"

// Line finds a key's line, or a list item's, down a path; 0 for what the file does not hold.
func TestLine(t *testing.T) {
	data := []byte(`plugins:
  - name: a
    module: a.wasm
  - name: b
    record:
      mode: x
    rollout: {replay: {}}
defaults: &d
  timeout: 3s
other: *d
`)
	for _, tc := range []struct {
		path []any
		want int
	}{
		{[]any{"plugins"}, 1},
		{[]any{"plugins", 0}, 2},
		{[]any{"plugins", 1}, 4},
		{[]any{"plugins", 1, "record", "mode"}, 6},
		{[]any{"plugins", 1, "rollout", "replay"}, 7},
		{[]any{"other", "timeout"}, 9}, // through an alias: where its value is written
		{[]any{"plugins", 2}, 0},
		{[]any{"plugins", 0, "timeout"}, 0},
		{[]any{"plugins", "name"}, 0},
		{[]any{"plugins", 0, 1}, 0},
	} {
		if got := Line(data, tc.path...); got != tc.want {
			t.Errorf("Line(%v) = %d, want %d", tc.path, got, tc.want)
		}
	}
	if got := Line([]byte("a: [b"), "a"); got != 0 {
		t.Errorf("YAML that does not parse: line %d", got)
	}
}
