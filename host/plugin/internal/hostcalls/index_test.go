package hostcalls

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/object"
)

func indexedObject(name, uid, rv string) *object.Object {
	return &object.Object{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, UID: types.UID(uid), ResourceVersion: rv}}
}

// An Index excludes an object only by values told of its version: another version, a field not
// told, or an object not told of are left to the guest. metadata.name and .namespace need
// nothing told.
func TestIndexExcludesOnlyWhatItWasToldOf(t *testing.T) {
	x := &Index{}
	x.learn([]abi.IndexValues{
		{UID: "u1", ResourceVersion: "5", Field: "owner", Values: []string{"web"}},
		{UID: "u2", ResourceVersion: "7", Field: "owner", Values: []string{"db", "cache"}},
		{UID: "u2", ResourceVersion: "7", Field: "node", Values: nil},
		{UID: "", ResourceVersion: "1", Field: "owner", Values: []string{"x"}}, // not kept
	})
	for _, c := range []struct {
		obj      *object.Object
		fields   map[string]string
		excluded bool
	}{
		{indexedObject("a", "u1", "5"), map[string]string{"owner": "web"}, false},
		{indexedObject("a", "u1", "5"), map[string]string{"owner": "db"}, true},
		{indexedObject("a", "u1", "6"), map[string]string{"owner": "db"}, false}, // a version not told of
		{indexedObject("b", "u2", "7"), map[string]string{"owner": "cache"}, false},
		{indexedObject("b", "u2", "7"), map[string]string{"owner": "cache", "node": "n1"}, true},
		{indexedObject("b", "u2", "7"), map[string]string{"owner": "cache", "zone": "z"}, false}, // zone not told
		{indexedObject("c", "u3", "1"), map[string]string{"owner": "web"}, false},
		{indexedObject("c", "u3", "1"), map[string]string{"owner": "web", "metadata.name": "d"}, true},
		{indexedObject("c", "u3", "1"), map[string]string{"metadata.namespace": "demo", "metadata.name": "c"}, false},
		{indexedObject("c", "u3", "1"), map[string]string{"metadata.namespace": "other"}, true},
	} {
		if got := x.excludes(c.obj, newFieldFilter(c.fields)); got != c.excluded {
			t.Errorf("%s (uid %s, resourceVersion %s) with %v: excluded %v, want %v", c.obj.Name, c.obj.UID, c.obj.ResourceVersion, c.fields, got, c.excluded)
		}
	}
	// A newer version told replaces what was told of the older.
	x.learn([]abi.IndexValues{{UID: "u1", ResourceVersion: "6", Field: "owner", Values: []string{"db"}}})
	if x.excludes(indexedObject("a", "u1", "6"), newFieldFilter(map[string]string{"owner": "db"})) || !x.excludes(indexedObject("a", "u1", "6"), newFieldFilter(map[string]string{"owner": "web"})) {
		t.Error("values told of a new version did not replace the old")
	}
	var none *Index // a Calls without one: metadata fields only
	none.learn([]abi.IndexValues{{UID: "u1", ResourceVersion: "6", Field: "owner"}})
	if none.excludes(indexedObject("a", "u1", "6"), newFieldFilter(map[string]string{"owner": "db"})) || !none.excludes(indexedObject("a", "u1", "6"), newFieldFilter(map[string]string{"metadata.name": "b"})) {
		t.Error("a nil Index")
	}
}

// An Index told more than its bound forgets everything and starts again: its memory is bounded
// whatever a guest tells it, and what it forgot is left to the guest.
func TestIndexIsBounded(t *testing.T) {
	x := &Index{}
	big := make([]string, 64)
	for i := range big {
		big[i] = fmt.Sprintf("value-%0100d", i)
	}
	for i := 0; i < 2000; i++ {
		x.learn([]abi.IndexValues{{UID: fmt.Sprintf("u%d", i), ResourceVersion: "1", Field: "f", Values: big}})
		if x.bytes > maxIndexBytes {
			t.Fatalf("after %d objects the index holds %d bytes, more than %d", i+1, x.bytes, maxIndexBytes)
		}
	}
	if x.excludes(indexedObject("a", "u0", "1"), newFieldFilter(map[string]string{"f": "other"})) {
		t.Error("the first object's values were not forgotten")
	}
	if !x.excludes(indexedObject("a", "u1999", "1"), newFieldFilter(map[string]string{"f": "other"})) {
		t.Error("the last object's values were forgotten")
	}
	told := make([]abi.IndexValues, maxIndexedPerList+10)
	for i := range told {
		told[i] = abi.IndexValues{UID: fmt.Sprintf("v%d", i), ResourceVersion: "1", Field: "f", Values: []string{"x"}}
	}
	x = &Index{}
	x.learn(told)
	if len(x.byUID) != maxIndexedPerList {
		t.Errorf("one list told %d values and %d were kept, want %d", len(told), len(x.byUID), maxIndexedPerList)
	}
}

// Lists of concurrent guests tell and read one Index (run with -race).
func TestIndexConcurrent(t *testing.T) {
	x := &Index{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				uid := fmt.Sprintf("u%d", i%50)
				x.learn([]abi.IndexValues{{UID: uid, ResourceVersion: fmt.Sprint(i % 3), Field: fmt.Sprint("f", g%2), Values: []string{"v"}}})
				x.excludes(indexedObject("a", uid, fmt.Sprint(i%3)), newFieldFilter(map[string]string{"f0": "v", "f1": "w"}))
			}
		}()
	}
	wg.Wait()
}

// budget is a Budget with a limit, as a plugin object's memory budget is.
type budget struct {
	mu          sync.Mutex
	used, limit int64
}

func (b *budget) Charge(n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return fmt.Errorf("%d more would pass the limit of %d", n, b.limit)
	}
	b.used += n
	return nil
}

func (b *budget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// What an Index keeps is charged to its budget a MiB at a time; a charge refused makes it keep
// nothing and hold nothing (a list then hands the guest every item), and says so once, and
// again once a charge is taken; Close gives back all.
func TestIndexIsChargedToItsBudget(t *testing.T) {
	b := &budget{limit: 3 * indexChunk}
	x := NewIndex(b)
	var told []bool // whether OnRefused was told a refusal, in order
	x.OnRefused = func(refusal error) { told = append(told, refusal != nil) }
	x.learn([]abi.IndexValues{{UID: "u0", ResourceVersion: "1", Field: "f", Values: []string{"a"}}})
	if got := b.inUse(); got != indexChunk {
		t.Fatalf("one object's values: %d charged, want %d", got, indexChunk)
	}
	if !x.excludes(indexedObject("a", "u0", "1"), newFieldFilter(map[string]string{"f": "other"})) {
		t.Fatal("the values told were not kept")
	}
	big := make([]string, 64)
	for i := range big {
		big[i] = fmt.Sprintf("value-%0100d", i)
	}
	// About 8 KiB an object: the third MiB is charged near 260 objects, the fourth refused
	// near 400.
	for i := 1; i < 300; i++ {
		x.learn([]abi.IndexValues{{UID: fmt.Sprintf("u%d", i), ResourceVersion: "1", Field: "f", Values: big}})
	}
	if got := b.inUse(); got != 3*indexChunk || int64(x.bytes) > x.charged || x.Bytes() < 299*7000 {
		t.Fatalf("300 objects: %d charged, the index holds %d bytes; want %d charged, covering it", got, x.Bytes(), 3*indexChunk)
	}
	if x.Refused() != nil || len(told) != 0 {
		t.Fatalf("no charge refused yet, but Refused says %v and OnRefused was told %v", x.Refused(), told)
	}
	next := 300
	for ; next < 500 && x.Refused() == nil; next++ {
		x.learn([]abi.IndexValues{{UID: fmt.Sprintf("u%d", next), ResourceVersion: "1", Field: "f", Values: big}})
	}
	if next < 380 || next > 410 || !slices.Equal(told, []bool{true}) {
		t.Fatalf("the charge of the fourth MiB: refused at object %d (want near 400), OnRefused was told %v (want [true])", next, told)
	}
	if err := x.Refused(); err == nil || !strings.Contains(err.Error(), "would pass the limit") {
		t.Errorf("Refused %v; want the budget's refusal", err)
	}
	for i := next; i < 500; i++ {
		x.learn([]abi.IndexValues{{UID: fmt.Sprintf("u%d", i), ResourceVersion: "1", Field: "f", Values: big}})
	}
	if x.Refused() != nil || !slices.Equal(told, []bool{true, false}) {
		t.Errorf("one refusal, then charges taken from empty: Refused says %v, OnRefused was told %v (want [true false])", x.Refused(), told)
	}
	// The refusal emptied it; what it learnt after the refusal is charged again.
	if x.excludes(indexedObject("a", "u0", "1"), newFieldFilter(map[string]string{"f": "other"})) {
		t.Error("values kept from before the budget refused a charge")
	}
	if got := b.inUse(); got > 3*indexChunk || int64(x.bytes) > x.charged || x.charged != got {
		t.Errorf("after a refusal: %d charged to the budget, the index holds %d bytes and says it charged %d", got, x.bytes, x.charged)
	}
	x.Close()
	if got := b.inUse(); got != 0 {
		t.Errorf("closed: %d still charged", got)
	}
	x.learn([]abi.IndexValues{{UID: "u0", ResourceVersion: "1", Field: "f", Values: []string{"a"}}})
	if got := b.inUse(); got != 0 || x.excludes(indexedObject("a", "u0", "1"), newFieldFilter(map[string]string{"f": "other"})) {
		t.Errorf("a closed index learnt again (%d charged)", got)
	}

	// No room at all: each list is refused, and that is said once.
	b.limit = 0
	x = NewIndex(b)
	told = nil
	x.OnRefused = func(refusal error) { told = append(told, refusal != nil) }
	for i := range 5 {
		x.learn([]abi.IndexValues{{UID: fmt.Sprintf("w%d", i), ResourceVersion: "1", Field: "f", Values: []string{"a"}}})
	}
	if !slices.Equal(told, []bool{true}) || x.Refused() == nil || x.Bytes() != 0 || b.inUse() != 0 {
		t.Errorf("five lists with no room: OnRefused told %v (want [true]), %d bytes kept, %d charged", told, x.Bytes(), b.inUse())
	}
}

// BenchmarkIndexExcludes is what a list through an index costs the host per item: the CronJob
// tutorial lists its Jobs by their owner on each reconcile.
func BenchmarkIndexExcludes(b *testing.B) {
	x := NewIndex(nil)
	objs := make([]*object.Object, 200)
	for i := range objs {
		uid := fmt.Sprintf("0d9e4c1a-7b3f-4e59-9a0c-%012d", i)
		objs[i] = indexedObject(fmt.Sprintf("job-%d", i), uid, "17")
		x.learn([]abi.IndexValues{{UID: uid, ResourceVersion: "17", Field: ".metadata.controller", Values: []string{fmt.Sprintf("cronjob-%d", i%50)}}})
	}
	fields := map[string]string{".metadata.controller": "cronjob-7"}
	kept := 0
	for b.Loop() {
		f := newFieldFilter(fields)
		for _, o := range objs {
			if !x.excludes(o, f) {
				kept++
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(objs)), "ns/item")
}
