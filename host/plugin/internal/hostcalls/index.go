package hostcalls

import (
	"slices"
	"sync"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/object"
)

// maxIndexBytes bounds what an Index is told between two times it forgets (about 150 bytes an
// object version for a short value): past it, it forgets everything and learns again from the
// guest's next lists.
const maxIndexBytes = 8 << 20

// maxIndexedPerList bounds the values one list request may tell.
const maxIndexedPerList = 1 << 14

// indexChunk is the step in which an Index charges its Budget: one charge per MiB kept, not one
// per object.
const indexChunk = 1 << 20

// Budget is what an Index's values are charged to: the plugin's share of the host's memory
// (plugin.Config.Code, which a plugin object's memory budget implements).
type Budget interface {
	Charge(n int64) error
	Release(n int64)
}

// Index keeps the values of one module version's field indexes (client.IndexField in the Go
// SDK), which the guest computes and tells in list requests (abi.ListRequest.Indexed), by
// object version. A list with Fields then leaves out the items known not to match, and the
// guest neither copies nor decodes them: each list of a namespace's Jobs by their owner would
// otherwise hand the guest every Job. One per module version, since another version's index
// functions may give other values; its guests share it.
//
// What it keeps is charged to Budget, if set, a MiB at a time, and given back by Close. A charge
// refused (the plugin's budget is full) makes it forget everything: a list then hands the guest
// every item, which it tests itself, as it would with no Index at all.
type Index struct {
	Budget Budget
	// OnRefused, if set, is told when Refused changes: Budget's error when it refuses a charge
	// after one it took (not at each list while it has no room), nil when it takes one again.
	// It is called with the Index's lock held: it must not call the Index, nor block.
	OnRefused func(refusal error)

	mu      sync.RWMutex
	byUID   map[string]indexEntry
	bytes   int
	charged int64
	closed  bool
	refused error // Budget's refusal of the last charge, or nil
}

// Bytes is about what the Index keeps, as it counts for its charge.
func (x *Index) Bytes() int {
	if x == nil {
		return 0
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.bytes
}

// Refused is Budget's refusal of the last charge, or nil: the Index keeps nothing until a
// later list's values are charged.
func (x *Index) Refused() error {
	if x == nil {
		return nil
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.refused
}

// NewIndex is an Index charged to budget (nil for none).
func NewIndex(budget Budget) *Index { return &Index{Budget: budget} }

// Close forgets everything and gives back what was charged; the Index learns nothing after.
func (x *Index) Close() {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed, x.byUID, x.bytes = true, nil, 0
	x.release()
}

// release gives back all that was charged. x.mu is held.
func (x *Index) release() {
	if x.charged > 0 && x.Budget != nil {
		x.Budget.Release(x.charged)
	}
	x.charged = 0
}

// charge makes what is charged cover want bytes. x.mu is held.
func (x *Index) charge(want int) bool {
	if int64(want) <= x.charged || x.Budget == nil {
		return true
	}
	n := (int64(want) - x.charged + indexChunk - 1) / indexChunk * indexChunk
	if err := x.Budget.Charge(n); err != nil {
		x.setRefused(err)
		return false
	}
	x.charged += n
	x.setRefused(nil)
	return true
}

// setRefused records the last charge's refusal (nil: none), telling OnRefused when it starts
// or ends. x.mu is held.
func (x *Index) setRefused(refusal error) {
	was := x.refused != nil
	x.refused = refusal
	if was != (refusal != nil) && x.OnRefused != nil {
		x.OnRefused(refusal)
	}
}

// indexEntry is what the guest told of the latest version of one object that it told of.
type indexEntry struct {
	resourceVersion string
	fields          map[string][]string
}

// learn keeps told, values of object versions the guest computed. Values of an object version
// newer than the one kept replace them: an object's versions are told in no set order by
// concurrent guests, but a guest tells only the versions it read from the host's cache, so an
// older one costs at most a list that returns the object.
func (x *Index) learn(told []abi.IndexValues) {
	if x == nil || len(told) == 0 {
		return
	}
	if len(told) > maxIndexedPerList {
		told = told[:maxIndexedPerList]
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	for _, t := range told {
		if t.UID == "" || t.ResourceVersion == "" || t.Field == "" {
			continue
		}
		size := len(t.UID) + len(t.ResourceVersion) + len(t.Field) + 64
		for _, v := range t.Values {
			size += len(v) + 16
		}
		if x.byUID == nil || x.bytes+size > maxIndexBytes {
			x.byUID, x.bytes = map[string]indexEntry{}, 0
		}
		if !x.charge(x.bytes + size) {
			// The plugin's budget has no room: keep nothing, and hold no charge.
			x.byUID, x.bytes = map[string]indexEntry{}, 0
			x.release()
			return
		}
		e, ok := x.byUID[t.UID]
		if !ok || e.resourceVersion != t.ResourceVersion {
			e = indexEntry{resourceVersion: t.ResourceVersion, fields: map[string][]string{}}
			x.byUID[t.UID] = e
		}
		e.fields[t.Field] = slices.Clone(t.Values)
		x.bytes += size
	}
}

// A fieldFilter is a list's fields, sorted once for all its items: metadata.name and
// metadata.namespace, tested on the object, and the index fields, tested on the values told.
type fieldFilter struct {
	name, namespace     string
	byName, byNamespace bool
	indexed             []fieldValue
}

type fieldValue struct{ field, value string }

func newFieldFilter(fields map[string]string) *fieldFilter {
	f := &fieldFilter{}
	for field, value := range fields {
		switch field {
		case "metadata.name":
			f.name, f.byName = value, true
		case "metadata.namespace":
			f.namespace, f.byNamespace = value, true
		default:
			f.indexed = append(f.indexed, fieldValue{field, value})
		}
	}
	return f
}

// excludes reports whether o lacks one of f's values: metadata.name and metadata.namespace are
// tested on o, an index field on the values told of o's version. An index field whose values
// for this version were not told excludes nothing: the guest tests the object itself.
func (x *Index) excludes(o *object.Object, f *fieldFilter) bool {
	if f.byName && o.Name != f.name || f.byNamespace && o.Namespace != f.namespace {
		return true
	}
	if len(f.indexed) == 0 || x == nil {
		return false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.byUID[string(o.UID)]
	if !ok || e.resourceVersion != o.ResourceVersion {
		return false
	}
	for _, fv := range f.indexed {
		if values, told := e.fields[fv.field]; told && !slices.Contains(values, fv.value) {
			return true
		}
	}
	return false
}
