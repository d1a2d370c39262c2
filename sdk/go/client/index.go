package client

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime"
)

// IndexerFunc gives the values of an indexed field of an object: what MatchingFields compares.
type IndexerFunc func(obj Object) []string

// indexes are the fields registered with IndexField, by kind ("apps/v1/Deployment") and field.
type indexes struct {
	mu  sync.RWMutex
	byK map[string]map[string]IndexerFunc
}

// IndexField registers an index of obj's kind: List with MatchingFields{field: value} then
// keeps the objects for which extract gives value, as with controller-runtime's
// mgr.GetFieldIndexer().IndexField (same arguments). The index is computed in the plugin, on the objects a
// List reads from the host's cache: register it once, in init or where the Client is made.
// metadata.name and metadata.namespace need no index.
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

// matcher is the test a List's MatchingFields make of each item, or an error naming a field
// without an index.
func (c *Client) matcher(apiVersion, kind string, fields map[string]string) (func(runtime.Object) bool, error) {
	if len(fields) == 0 {
		return nil, nil
	}
	c.idx.mu.RLock()
	defer c.idx.mu.RUnlock()
	type test struct {
		value   string
		extract IndexerFunc
	}
	var tests []test
	for field, value := range fields {
		switch field {
		case "metadata.name":
			tests = append(tests, test{value, func(o Object) []string { return []string{o.GetName()} }})
		case "metadata.namespace":
			tests = append(tests, test{value, func(o Object) []string { return []string{o.GetNamespace()} }})
		default:
			f, ok := c.idx.byK[apiVersion+"/"+kind][field]
			if !ok {
				return nil, fmt.Errorf("list %s with field %q: no index of it; register one with Client.IndexField (metadata.name and metadata.namespace need none)", kind, field)
			}
			tests = append(tests, test{value, f})
		}
	}
	return func(o runtime.Object) bool {
		obj, ok := o.(Object)
		if !ok {
			return false
		}
		for _, t := range tests {
			if !slices.Contains(t.extract(obj), t.value) {
				return false
			}
		}
		return true
	}, nil
}
