package client

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime"
)

// IndexerFunc gives the values of an indexed field of an object: what MatchingFields compares.
type IndexerFunc func(obj Object) []string

// indexes are the fields registered with IndexField, by kind ("apps/v1/Deployment") and field.
type indexes struct {
	mu  sync.RWMutex
	byK map[string]map[string]IndexerFunc
	// seen are the values the indexes gave, by object version: a List decodes only the items
	// whose values it does not know or that match (fieldMatcher.prefilter).
	seen map[seenKey][]string
}

// IndexField registers an index of obj's kind: List with MatchingFields{field: value} then
// keeps the objects for which extract gives value, as with controller-runtime's
// mgr.GetFieldIndexer().IndexField (same arguments). The index is computed in the plugin, on the
// objects a List reads from the host's cache, once per object version (uid and resourceVersion),
// as controller-runtime's cache computes it once per version: a later List decodes only the items
// whose values match or are not known yet. So extract must depend on the object alone. Register
// it once, in init or where the Client is made. metadata.name and metadata.namespace need no
// index.
func (c *Client) IndexField(_ context.Context, obj Object, field string, extract IndexerFunc) error {
	if field == "" || extract == nil {
		return fmt.Errorf("IndexField: a field name and an extract function are needed")
	}
	apiVersion, kind := obj.APIVersionKind()
	key := apiVersion + "/" + kind
	c.idx.mu.Lock()
	defer c.idx.mu.Unlock()
	if c.idx.byK == nil {
		c.idx.byK = map[string]map[string]IndexerFunc{}
	}
	if c.idx.byK[key] == nil {
		c.idx.byK[key] = map[string]IndexerFunc{}
	}
	if _, ok := c.idx.byK[key][field]; ok {
		return fmt.Errorf("IndexField: %s already has an index %q", kind, field)
	}
	c.idx.byK[key][field] = extract
	return nil
}

// maxSeen bounds the index values kept between Lists; past it they are all forgotten.
const maxSeen = 1 << 14

// seenKey names the index values of one version of one object.
type seenKey struct{ kind, field, uid, resourceVersion string }

// fieldMatcher is the test a List's MatchingFields make of each item.
type fieldMatcher struct {
	idx   *indexes
	kind  string // apiVersion/kind
	tests []fieldTest
}

type fieldTest struct {
	field, value string
	extract      IndexerFunc
	cached       bool // its values are kept between Lists, by object version
}

// matcher is the test a List's MatchingFields make of each item, nil for none, or an error
// naming a field without an index.
func (c *Client) matcher(apiVersion, kind string, fields map[string]string) (*fieldMatcher, error) {
	if len(fields) == 0 {
		return nil, nil
	}
	c.idx.mu.RLock()
	defer c.idx.mu.RUnlock()
	m := &fieldMatcher{idx: &c.idx, kind: apiVersion + "/" + kind}
	for field, value := range fields {
		switch field {
		case "metadata.name":
			m.tests = append(m.tests, fieldTest{field, value, func(o Object) []string { return []string{o.GetName()} }, false})
		case "metadata.namespace":
			m.tests = append(m.tests, fieldTest{field, value, func(o Object) []string { return []string{o.GetNamespace()} }, false})
		default:
			f, ok := c.idx.byK[m.kind][field]
			if !ok {
				return nil, fmt.Errorf("list %s with field %q: no index of it; register one with Client.IndexField (metadata.name and metadata.namespace need none)", kind, field)
			}
			m.tests = append(m.tests, fieldTest{field, value, f, true})
		}
	}
	return m, nil
}

// match reports whether o passes every test, and keeps the index values it computed for the
// next List of the same object version.
func (m *fieldMatcher) match(o runtime.Object) bool {
	obj, ok := o.(Object)
	if !ok {
		return false
	}
	ok = true
	for _, t := range m.tests {
		values := t.extract(obj)
		if t.cached && obj.GetUID() != "" && obj.GetResourceVersion() != "" {
			m.idx.remember(seenKey{m.kind, t.field, string(obj.GetUID()), obj.GetResourceVersion()}, values)
		}
		ok = ok && slices.Contains(values, t.value)
	}
	return ok
}

func (x *indexes) remember(k seenKey, values []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.seen == nil || len(x.seen) >= maxSeen {
		x.seen = map[seenKey][]string{}
	}
	x.seen[k] = values
}

// decided reports whether the object version uid/resourceVersion passes the tests, if the
// index values of an earlier List decide it: an index is a function of the object, as
// controller-runtime's are (computed once per version, in its cache).
func (m *fieldMatcher) decided(uid, resourceVersion string) (pass, known bool) {
	if uid == "" || resourceVersion == "" {
		return false, false
	}
	m.idx.mu.RLock()
	defer m.idx.mu.RUnlock()
	pass = true
	for _, t := range m.tests {
		if !t.cached {
			return false, false // metadata.name and .namespace: read by decoding
		}
		values, ok := m.idx.seen[seenKey{m.kind, t.field, uid, resourceVersion}]
		if !ok {
			return false, false
		}
		if !slices.Contains(values, t.value) {
			pass = false
		}
	}
	return pass, true
}

// prefilter is a List's answer without the items that earlier Lists' index values show do not
// match: only the rest are decoded. The answer is returned as it is if it cannot be read so.
func (m *fieldMatcher) prefilter(resp []byte) []byte {
	d := codec.NewDecoder(resp)
	if !d.Object() {
		return resp
	}
	var e codec.Encoder
	e.BeginObject()
	dropped := false
	for i := 0; ; i++ {
		k, ok := d.Member(i)
		if !ok {
			break
		}
		e.KeyString(k)
		if k != "items" {
			e.Raw(d.Raw())
			continue
		}
		if !d.Array() {
			e.Null()
			continue
		}
		e.BeginArray()
		for j := 0; d.Elem(j); j++ {
			item := d.Raw()
			if pass, known := m.decided(versionOf(item)); known && !pass {
				dropped = true
				continue
			}
			e.Raw(item)
		}
		e.EndArray()
	}
	e.EndObject()
	out, err := e.Bytes()
	if d.Err() != nil || err != nil || !dropped {
		return resp
	}
	return out
}

// versionOf reads an object's metadata.uid and metadata.resourceVersion, and nothing after its
// metadata.
func versionOf(obj []byte) (uid, resourceVersion string) {
	d := codec.NewDecoder(obj)
	if !d.Object() {
		return "", ""
	}
	for i := 0; ; i++ {
		k, ok := d.Member(i)
		if !ok {
			return uid, resourceVersion
		}
		if k != "metadata" {
			d.Skip()
			continue
		}
		if !d.Object() {
			return "", ""
		}
		for j := 0; ; j++ {
			k, ok := d.Member(j)
			if !ok {
				return uid, resourceVersion
			}
			switch k {
			case "uid":
				codec.ReadString(&uid, d)
			case "resourceVersion":
				codec.ReadString(&resourceVersion, d)
			default:
				d.Skip()
			}
		}
	}
}
