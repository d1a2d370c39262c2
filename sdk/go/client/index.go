package client

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime"
)

// IndexerFunc gives the values of an indexed field of an object: what MatchingFields compares.
type IndexerFunc func(obj Object) []string

// indexes are the fields registered with IndexField, by kind ("apps/v1/Deployment") and field.
type indexes struct {
	mu  sync.RWMutex
	byK map[string]map[string]IndexerFunc
	// seen are the values the indexes gave, by object version: an object a List reads again is
	// not evaluated again.
	seen map[seenKey][]string
	// told are values computed since the last List, which the next List tells the host
	// (abi.ListRequest.Indexed): it leaves out, from then on, the items they show do not match.
	told []abi.IndexValues
}

// IndexField registers an index of obj's kind: List with MatchingFields{field: value} then
// keeps the objects for which extract gives value, as with controller-runtime's
// mgr.GetFieldIndexer().IndexField (same arguments). The index is computed in the plugin, on the
// objects a List reads from the host's cache, once per object version (uid and resourceVersion),
// as controller-runtime's cache computes it once per version. The plugin tells the host the
// values, and a later List is handed only the items whose values match or are not known yet.
// So extract must depend on the object alone. Register it once, in init or where the Client is
// made. metadata.name and metadata.namespace need no index.
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

// maxTold bounds the values one List tells the host; the rest are not told (the host hands
// those objects back, and they are tested here).
const maxTold = 1 << 12

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
	cached       bool // its values are kept between Lists, by object version, and told the host
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

// match reports whether o passes every test. An index's values are computed once per object
// version, kept, and told the host with the next List; an object known not to match is handed
// back only by a host that forgot its values (or predates being told): they are told again.
func (m *fieldMatcher) match(o runtime.Object) bool {
	obj, ok := o.(Object)
	if !ok {
		return false
	}
	uid, rv := string(obj.GetUID()), obj.GetResourceVersion()
	ok = true
	for _, t := range m.tests {
		if !t.cached || uid == "" || rv == "" {
			ok = ok && slices.Contains(t.extract(obj), t.value)
			continue
		}
		k := seenKey{m.kind, t.field, uid, rv}
		m.idx.mu.RLock()
		values, seen := m.idx.seen[k]
		m.idx.mu.RUnlock()
		if !seen {
			values = t.extract(obj)
		}
		pass := slices.Contains(values, t.value)
		if !seen || !pass {
			m.idx.remember(k, values)
		}
		ok = ok && pass
	}
	return ok
}

// remember keeps the values of k for later Lists, and to tell the host.
func (x *indexes) remember(k seenKey, values []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.seen == nil || len(x.seen) >= maxSeen {
		x.seen = map[seenKey][]string{}
	}
	x.seen[k] = values
	if len(x.told) < maxTold {
		x.told = append(x.told, abi.IndexValues{UID: k.uid, ResourceVersion: k.resourceVersion, Field: k.field, Values: values})
	}
}

// takeTold returns the values to tell the host, and forgets them.
func (x *indexes) takeTold() []abi.IndexValues {
	x.mu.Lock()
	defer x.mu.Unlock()
	told := x.told
	x.told = nil
	return told
}
