package cache

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// refreshingMapper is a discovery-backed RESTMapper that refetches discovery when asked about a
// kind it does not know, so a CRD installed after start is found. client-go's deferred mapper
// refetches only while its cache is empty.
type refreshingMapper struct {
	mu sync.Mutex // serialises refreshes so a burst of misses costs one discovery round
	*restmapper.DeferredDiscoveryRESTMapper
}

func newRefreshingMapper(dc discovery.DiscoveryInterface) *refreshingMapper {
	return &refreshingMapper{DeferredDiscoveryRESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// RESTMapping maps gk, refreshing discovery once if gk is unknown.
func (m *refreshingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	mapping, err := m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	if err == nil || !meta.IsNoMatchError(err) {
		return mapping, err
	}
	m.mu.Lock()
	m.Reset()
	m.mu.Unlock()
	return m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
}
