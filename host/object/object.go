package object

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// LastApplied is the annotation `kubectl apply` keeps a copy of the object in. Handlers and
// predicates never read it, so the decoded metadata goes without it; the JSON keeps it, because
// a guest that reads an object and updates it would otherwise delete it from the server.
const LastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Object is an API object: its decoded metadata (without managedFields and the last-applied
// annotation) and its JSON.
//
// Objects from the cache are shared: read them, never modify them. DeepCopyObject copies the
// metadata and shares Raw (and its protobuf encoding, if made), which nothing modifies.
type Object struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// Raw is the object's JSON as the API server sent it, without metadata.managedFields (an
	// update that leaves them out keeps them). Never modify it.
	Raw []byte

	// protobuf is Raw in the Kubernetes protobuf envelope, made on the first Protobuf call:
	// empty if it cannot be.
	protobuf atomic.Pointer[[]byte]
}

var (
	_ runtime.Object   = (*Object)(nil)
	_ metav1.Object    = (*Object)(nil)
	_ json.Unmarshaler = (*Object)(nil)
	_ json.Marshaler   = (*Object)(nil)
)

// Decode reads an object from its JSON. It keeps its own copy of what it needs: data may be
// reused once it returns.
func Decode(data []byte) (*Object, error) {
	o := &Object{}
	if err := o.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return o, nil
}

// UnmarshalJSON decodes apiVersion, kind and metadata and keeps the JSON, less managedFields. It
// does not decode the rest of the object, and it cuts managedFields out of the bytes rather than
// decoding and encoding the metadata again.
func (o *Object) UnmarshalJSON(data []byte) error {
	*o = Object{}
	raw, meta, err := withoutManagedFields(data, func(m member) error {
		switch string(m.key) {
		case "apiVersion":
			return m.decode(data, &o.APIVersion)
		case "kind":
			return m.decode(data, &o.Kind)
		}
		return nil
	})
	if err != nil {
		return err
	}
	o.Raw = raw
	if meta.start < 0 {
		return nil
	}
	if err := json.Unmarshal(raw[meta.start:meta.end], &o.ObjectMeta); err != nil {
		return fmt.Errorf("object metadata: %w", err)
	}
	o.ManagedFields = nil // a duplicate key would have escaped the cut
	delete(o.Annotations, LastApplied)
	if len(o.Annotations) == 0 {
		o.Annotations = nil
	}
	return nil
}

// Answer is the JSON of an object the API server answered a write with, less
// metadata.managedFields: what a get of it from the cache gives. It decodes none of it, where
// Decode reads the metadata: the answer goes on to the plugin that wrote, and the host reads
// nothing of it.
func Answer(data []byte) ([]byte, error) {
	raw, _, err := withoutManagedFields(data, nil)
	return raw, err
}

// withoutManagedFields returns a copy of the object JSON data less metadata.managedFields, and
// where the metadata's value sits in that copy (start < 0 if it has none). It calls each, if not
// nil, with each member of the object, offsets in data.
func withoutManagedFields(data []byte, each func(member) error) ([]byte, span, error) {
	var meta member
	err := members(data, func(m member) error {
		if string(m.key) == "metadata" {
			meta = m
		}
		if each != nil {
			return each(m)
		}
		return nil
	})
	if err != nil {
		return nil, span{}, err
	}
	if !meta.found() {
		return bytes.Clone(data), span{-1, -1}, nil
	}
	// What to cut: metadata.managedFields, with a comma.
	var cuts []span
	var prev member
	err = members(data[meta.val.start:meta.val.end], func(m member) error {
		m = m.shift(meta.val.start)
		if string(m.key) == "managedFields" {
			cuts = append(cuts, m.span(prev))
		}
		prev = m
		return nil
	})
	if err != nil {
		return nil, span{}, fmt.Errorf("object metadata: %w", err)
	}
	// In document order; a repeated key's cuts may overlap: merge them.
	merged := cuts[:0]
	for _, c := range cuts {
		if n := len(merged); n > 0 && c.start <= merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, c.end)
			continue
		}
		merged = append(merged, c)
	}
	cuts = merged
	size := len(data)
	for _, c := range cuts {
		size -= c.end - c.start
	}
	raw := make([]byte, 0, size)
	at, metaEnd := 0, meta.val.end
	for _, c := range cuts {
		raw = append(raw, data[at:c.start]...)
		at = c.end
		metaEnd -= c.end - c.start
	}
	raw = append(raw, data[at:]...)
	return raw, span{meta.val.start, metaEnd}, nil
}

// MarshalJSON returns Raw.
func (o *Object) MarshalJSON() ([]byte, error) {
	if o.Raw == nil {
		return nil, errors.New("object: no JSON")
	}
	return o.Raw, nil
}

// DeepCopyObject copies the metadata; Raw is shared.
func (o *Object) DeepCopyObject() runtime.Object {
	if o == nil {
		return nil
	}
	out := &Object{TypeMeta: o.TypeMeta, ObjectMeta: *o.ObjectMeta.DeepCopy(), Raw: o.Raw}
	if p := o.protobuf.Load(); p != nil {
		out.protobuf.Store(p)
	}
	return out
}

// Unstructured decodes the whole object, for the few places in the host that read past its
// metadata.
func (o *Object) Unstructured() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(o.Raw); err != nil {
		return nil, fmt.Errorf("object %s/%s: %w", o.Namespace, o.Name, err)
	}
	return u, nil
}

// List is a list of objects, as a list call returns it.
type List struct {
	metav1.TypeMeta
	metav1.ListMeta `json:"metadata"`
	Items           []Object `json:"items"`
}

var _ runtime.Object = (*List)(nil)

// DeepCopyObject copies the list's metadata and each item's; their Raw is shared.
func (l *List) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &List{TypeMeta: l.TypeMeta, ListMeta: *l.ListMeta.DeepCopy(), Items: slices.Clone(l.Items)}
	for i := range out.Items {
		out.Items[i].ObjectMeta = *l.Items[i].ObjectMeta.DeepCopy()
	}
	return out
}

// span is a range of bytes in an object's JSON; start < 0 when there is none.
type span struct{ start, end int }

// member is one key and value of a JSON object.
type member struct {
	key      []byte // unquoted
	keyStart int    // where its quoted key starts
	val      span
	next     int  // where the next member's key starts
	last     bool // no member follows it
}

func (m member) found() bool { return m.val.start > 0 }

// shift moves m's offsets by off, from a slice of the JSON to the whole.
func (m member) shift(off int) member {
	m.keyStart += off
	m.val.start += off
	m.val.end += off
	m.next += off
	return m
}

// decode decodes m's value.
func (m member) decode(data []byte, v any) error {
	if err := json.Unmarshal(data[m.val.start:m.val.end], v); err != nil {
		return fmt.Errorf("object %s: %w", m.key, err)
	}
	return nil
}

// span is what to cut to remove m from its object and leave valid JSON: from its key to the next
// member, or, for the last member, from the end of the one before it (prev; none if not found).
func (m member) span(prev member) span {
	switch {
	case !m.last:
		return span{m.keyStart, m.next}
	case prev.found():
		return span{prev.val.end, m.val.end}
	default:
		return span{m.keyStart, m.val.end}
	}
}

// members calls fn for each member of the JSON object data, in order, without decoding the
// values. encoding/json has no way to find where a value sits short of copying every value out.
func members(data []byte, fn func(member) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return errors.New("object: the JSON is not an object")
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return fmt.Errorf("object: want a key at offset %d", i)
		}
		kEnd, err := skipString(data, i)
		if err != nil {
			return err
		}
		m := member{key: data[i+1 : kEnd-1], keyStart: i}
		if bytes.IndexByte(m.key, '\\') >= 0 {
			var k string
			if err := json.Unmarshal(data[i:kEnd], &k); err != nil {
				return fmt.Errorf("object: key at offset %d: %w", i, err)
			}
			m.key = []byte(k)
		}
		i = skipSpace(data, kEnd)
		if i >= len(data) || data[i] != ':' {
			return fmt.Errorf("object: want ':' at offset %d", i)
		}
		m.val.start = skipSpace(data, i+1)
		if m.val.end, err = skipValue(data, m.val.start); err != nil {
			return err
		}
		i = skipSpace(data, m.val.end)
		if i >= len(data) {
			return errors.New("object: the JSON ends inside the object")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
			m.next = i
		case '}':
			m.last = true
		default:
			return fmt.Errorf("object: want ',' or '}' at offset %d", i)
		}
		if err := fn(m); err != nil {
			return err
		}
		if m.last {
			return nil
		}
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset just past the string that starts at data[i] ('"'). It jumps
// from quote to quote: a quote preceded by an odd number of backslashes is escaped.
func skipString(data []byte, i int) (int, error) {
	j := i + 1
	for {
		q := bytes.IndexByte(data[j:], '"')
		if q < 0 {
			return 0, fmt.Errorf("object: unterminated string at offset %d", i)
		}
		j += q
		n := 0
		for k := j - 1; k > i && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

// skipValue returns the offset just past the value that starts at data[i]. It checks the
// nesting, not the literals: the value is decoded, or was validated, elsewhere.
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, errors.New("object: the JSON ends where a value should be")
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("object: unterminated value at offset %d", i)
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, nil
			}
			j++
		}
		return j, nil
	}
}
