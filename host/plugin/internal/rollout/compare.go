package rollout

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
)

// Write is one write a reconcile asked for: the host call and its request, as the guest sent it.
type Write struct {
	Call string // abi.ImportCreate, abi.ImportPatch, ...
	Body []byte
}

// Record collects one reconcile's writes, from the goroutine that runs it.
type Record struct {
	Writes  []Write
	Refused int
}

// Add records a write call that ended with status.
func (r *Record) Add(call string, body []byte, status abi.Status) {
	r.Writes = append(r.Writes, Write{Call: call, Body: bytes.Clone(body)})
	if RefusedStatus(status) {
		r.Refused++
	}
}

// Result is what a reconcile returned, as compared: whether it failed, and how it asked to be
// requeued.
type Result struct {
	Failed       bool
	Requeue      bool
	RequeueAfter time.Duration
}

// Compare compares the live version's reconcile of a key with the new version's shadow of it:
// whether their writes differ (in number, call, or request, JSON compared as values), whether
// their results do, and, if the writes differ, a short diff that names the first difference.
func Compare(live, cand *Record, liveRes, candRes Result) (writesDiffer, resultDiffers bool, diff string) {
	resultDiffers = liveRes != candRes
	n := max(len(live.Writes), len(cand.Writes))
	for i := range n {
		switch {
		case i >= len(cand.Writes):
			return true, resultDiffers, fmt.Sprintf("write %d of %d: the live version made %s, the new version did not", i+1, len(live.Writes), describe(live.Writes[i]))
		case i >= len(live.Writes):
			return true, resultDiffers, fmt.Sprintf("write %d of %d: the new version made %s, the live version did not", i+1, len(cand.Writes), describe(cand.Writes[i]))
		}
		l, c := live.Writes[i], cand.Writes[i]
		if l.Call != c.Call {
			return true, resultDiffers, fmt.Sprintf("write %d: the live version made %s, the new version %s", i+1, describe(l), describe(c))
		}
		if d := jsonDiff(l.Body, c.Body); d != "" {
			return true, resultDiffers, fmt.Sprintf("write %d, %s: %s", i+1, describe(l), d)
		}
	}
	return false, resultDiffers, ""
}

// describe names a write: "patch v1 ConfigMap ns/name".
func describe(w Write) string {
	return strings.TrimSpace(w.Call + " " + recording.ObjectOf(w.Call, w.Body))
}

// maxDiffs bounds the differences one diff lists.
const maxDiffs = 5

// jsonDiff lists where two JSON documents differ, as "path: live X, new Y", at most maxDiffs;
// "" if they are equal as values. Bodies that are not JSON are compared as bytes.
func jsonDiff(a, b []byte) string {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		if bytes.Equal(a, b) {
			return ""
		}
		return "the requests differ (not JSON)"
	}
	var out []string
	walk("", va, vb, &out)
	if len(out) == 0 {
		return ""
	}
	more := ""
	if len(out) > maxDiffs {
		more = fmt.Sprintf("; and %d more", len(out)-maxDiffs)
		out = out[:maxDiffs]
	}
	return strings.Join(out, "; ") + more
}

func walk(path string, a, b any, out *[]string) {
	if len(*out) > maxDiffs {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			walk(join(path, k), am[k], bm[k], out)
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			walk(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i], out)
		}
		return
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		*out = append(*out, fmt.Sprintf("%s: live %s, new %s", cmp.Or(path, "."), short(ja, a), short(jb, b)))
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func short(j []byte, v any) string {
	if v == nil {
		return "(none)"
	}
	if len(j) > 80 {
		return string(j[:77]) + "..."
	}
	return string(j)
}
