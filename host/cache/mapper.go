package cache

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Mapper resolves kinds to resources through controller-runtime's dynamic RESTMapper, which
// discovers one API group (or version) at a time as kinds are asked for, with two things in
// front of it:
//
//   - Kinds found are answered from a map read under a read lock that is never held while the
//     API server is asked: a lookup of a known kind never waits on another's discovery.
//     (controller-runtime's mapper holds its lock through discovery requests.)
//   - Kinds not found are remembered for MissTTL, or until Reset, and concurrent lookups of one
//     kind share one discovery round: asking again and again about a kind that does not exist
//     costs the API server nothing more.
//
// Reset, which the CRD watcher calls when served kinds change, starts over from discovery.
type Mapper struct {
	cfg    *rest.Config
	client *http.Client

	mu     sync.RWMutex
	next   meta.RESTMapper // controller-runtime's; replaced by Reset
	known  map[mappingKey]*meta.RESTMapping
	missed map[mappingKey]time.Time

	lookups  singleflight.Group
	requests atomic.Uint64
}

// MissTTL is how long a kind not found is answered as not found without asking again.
const MissTTL = 10 * time.Second

type mappingKey struct {
	schema.GroupKind
	version string
}

var _ meta.RESTMapper = (*Mapper)(nil)

// NewMapper returns a Mapper for the API server cfg points at. It asks nothing until used.
func NewMapper(cfg *rest.Config) (*Mapper, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("cache: HTTP client for %s: %w", cfg.Host, err)
	}
	m := &Mapper{cfg: cfg}
	// Count discovery requests: an operator (and a test) can see what lookups cost.
	next := client.Transport
	if next == nil { // a plain-HTTP server without auth: net/http's default, as the client would use
		next = http.DefaultTransport
	}
	m.client = &http.Client{Transport: countingTransport{next: next, n: &m.requests}, Timeout: client.Timeout, Jar: client.Jar}
	if m.next, err = apiutil.NewDynamicRESTMapper(cfg, m.client); err != nil {
		return nil, fmt.Errorf("cache: RESTMapper for %s: %w", cfg.Host, err)
	}
	m.known, m.missed = map[mappingKey]*meta.RESTMapping{}, map[mappingKey]time.Time{}
	return m, nil
}

type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Uint64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(r)
}

// DiscoveryRequests is how many requests the mapper has sent to the API server.
func (m *Mapper) DiscoveryRequests() uint64 { return m.requests.Load() }

// Reset forgets every kind, found or not: the next lookups discover again.
func (m *Mapper) Reset() {
	// It only fails to build its discovery client, which NewMapper built from the same config.
	next, err := apiutil.NewDynamicRESTMapper(m.cfg, m.client)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.next = next
	}
	m.known, m.missed = map[mappingKey]*meta.RESTMapping{}, map[mappingKey]time.Time{}
}

// Known reports whether a lookup of gk in version would be answered without asking the API
// server: the kind was found, or found missing less than MissTTL ago.
func (m *Mapper) Known(gk schema.GroupKind, version string) bool {
	k := mappingKey{gk, version}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if _, ok := m.known[k]; ok {
		return true
	}
	t, ok := m.missed[k]
	return ok && time.Since(t) < MissTTL
}

// RESTMapping maps gk in the first of versions (all versions if none).
func (m *Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 {
		return m.current().RESTMapping(gk, versions...)
	}
	k := mappingKey{gk, versions[0]}
	m.mu.RLock()
	mapping, found := m.known[k]
	missedAt, missed := m.missed[k]
	next := m.next
	m.mu.RUnlock()
	switch {
	case found:
		return mapping, nil
	case missed && time.Since(missedAt) < MissTTL:
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	v, err, _ := m.lookups.Do(fmt.Sprintf("%s/%s/%s", gk.Group, k.version, gk.Kind), func() (any, error) {
		return next.RESTMapping(gk, versions...)
	})
	if err != nil {
		m.mu.Lock()
		if m.next == next && meta.IsNoMatchError(err) { // after a reset, remember nothing from before it
			m.missed[k] = time.Now()
		}
		m.mu.Unlock()
		return nil, err
	}
	mapping = v.(*meta.RESTMapping)
	m.mu.Lock()
	if m.next == next {
		m.known[k] = mapping
		delete(m.missed, k)
	}
	m.mu.Unlock()
	return mapping, nil
}

func (m *Mapper) current() meta.RESTMapper {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.next
}

// KindFor, KindsFor, ResourceFor, ResourcesFor, RESTMappings and ResourceSingularizer ask
// controller-runtime's mapper directly.

func (m *Mapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return m.current().KindFor(r)
}

func (m *Mapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return m.current().KindsFor(r)
}

func (m *Mapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return m.current().ResourceFor(r)
}

func (m *Mapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return m.current().ResourcesFor(r)
}

func (m *Mapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return m.current().RESTMappings(gk, versions...)
}

func (m *Mapper) ResourceSingularizer(resource string) (string, error) {
	return m.current().ResourceSingularizer(resource)
}
