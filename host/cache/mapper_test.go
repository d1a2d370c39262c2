package cache

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// A plain-HTTP server with no auth gives a client whose Transport is nil: the mapper's request
// counter must wrap net/http's default, not a nil RoundTripper (it panicked).
func TestMapperOverPlainHTTP(t *testing.T) {
	m, err := NewMapper(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1"); err == nil {
		t.Fatal("RESTMapping against a closed port succeeded")
	}
	if m.DiscoveryRequests() == 0 {
		t.Error("the request was not counted")
	}
}
