package hostcalls

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/plugin/internal/policy"
	"github.com/wasmrec/wasmrec/host/reconcile"
)

// countingMapper is a RESTMapper that counts the lookups reaching it: each would cost the host
// a discovery round for a kind it does not know.
type countingMapper struct {
	meta.RESTMapper
	lookups int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.lookups++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

var (
	cmGVK   = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	nodeGVK = schema.GroupVersionKind{Version: "v1", Kind: "Node"}
)

// calls returns the host calls of a plugin that asked for and was granted perms, in namespaces.
func calls(t *testing.T, perms []abi.Permission, namespaces ...string) (*Calls, *countingMapper) {
	t.Helper()
	dm := meta.NewDefaultRESTMapper(nil)
	dm.Add(cmGVK, meta.RESTScopeNamespace)
	dm.Add(nodeGVK, meta.RESTScopeRoot)
	m := &countingMapper{RESTMapper: dm}
	pol, err := policy.New("p", perms, perms, namespaces, false)
	if err != nil {
		t.Fatal(err)
	}
	api := (&API{Name: "p", For: cmGVK, Mapper: m, Log: logr.Discard(),
		Reads: NewLimit("reads", 1000, 1000, nil, nil), Writes: NewLimit("writes", 1000, 1000, nil, nil)}).Init()
	return &Calls{API: api, Policy: pol, Req: reconcile.Request{}}, m
}

func call(t *testing.T, c *Calls, fn string, req any) (abi.Status, string) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	s, resp := c.Call(context.Background(), fn, body)
	return s, string(resp)
}

func TestACallOutsideTheManifestNeverReachesTheMapper(t *testing.T) {
	c, m := calls(t, []abi.Permission{{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}, "team-a")
	for _, tc := range []struct {
		fn   string
		req  any
		want string
	}{
		{abi.ImportGet, abi.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: "x"}, "may get nothing in API group apps"},
		{abi.ImportDelete, abi.DeleteRequest{ObjectRef: abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "x"}}, "may delete nothing"},
		{abi.ImportGet, abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-b", Name: "x"}, `namespace "team-b" is outside`},
		{abi.ImportPatch, abi.PatchRequest{ObjectRef: abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "x"}, Type: abi.PatchMerge, Patch: json.RawMessage(`{}`)}, "may patch nothing"},
	} {
		s, msg := call(t, c, tc.fn, tc.req)
		if s != abi.StatusForbidden || !strings.Contains(msg, tc.want) {
			t.Errorf("%s %+v: %s %q; want forbidden, saying %q", tc.fn, tc.req, s, msg, tc.want)
		}
	}
	if m.lookups != 0 {
		t.Errorf("%d kind lookups for calls the policy refuses; want 0", m.lookups)
	}
}

func TestKindsTheHostDoesNotKnowAreLookedUpAFewAtATime(t *testing.T) {
	c, m := calls(t, []abi.Permission{{Group: "example.com", Resources: []string{"*"}, Verbs: []string{"get"}}})
	c.API.KnownKind = func(schema.GroupKind, string) bool { return false }
	unavailable := 0
	for i := range 100 {
		s, msg := call(t, c, abi.ImportGet, abi.ObjectRef{APIVersion: "example.com/v1", Kind: "Unknown" + string(rune('A'+i%26)), Namespace: "ns", Name: "x"})
		switch {
		case s == abi.StatusUnavailable && strings.Contains(msg, "retry later"):
			unavailable++
		case s != abi.StatusBadRequest: // looked up: no resource serves it
			t.Fatalf("get of an unknown kind: %s %q", s, msg)
		}
	}
	if m.lookups > lookupBurst+1 {
		t.Errorf("100 gets of unknown kinds made %d lookups; want at most the burst (%d) and what refilled", m.lookups, lookupBurst)
	}
	if unavailable < 90 {
		t.Errorf("%d of 100 lookups were told to retry later; want the rest of the burst", unavailable)
	}
}

func TestEventsNeedTheRuleAndAPlaceInTheNamespaces(t *testing.T) {
	events := abi.Permission{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}}
	none, _ := calls(t, nil, "team-a")
	if s, msg := call(t, none, abi.ImportEvent, abi.EventRequest{Type: "Normal", Reason: "R"}); s != abi.StatusForbidden || !strings.Contains(msg, "events") {
		t.Errorf("an event without the rule: %s %q; want forbidden naming events", s, msg)
	}
	c, _ := calls(t, []abi.Permission{events}, "team-a")
	for _, tc := range []struct {
		req    abi.EventRequest
		status abi.Status
		want   string
	}{
		{abi.EventRequest{Type: "Info", Reason: "R"}, abi.StatusBadRequest, "use Normal or Warning"},
		{abi.EventRequest{Type: "Normal"}, abi.StatusBadRequest, "needs a reason"},
		{abi.EventRequest{Type: "Normal", Reason: "R", Object: &abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap"}}, abi.StatusBadRequest, "needs apiVersion, kind and name"},
		// A cluster-scoped object's event is recorded in default, outside team-a.
		{abi.EventRequest{Type: "Normal", Reason: "R", Object: &abi.ObjectRef{APIVersion: "v1", Kind: "Node", Name: "n1"}}, abi.StatusForbidden, `namespace "default"`},
		{abi.EventRequest{Type: "Normal", Reason: "R", Object: &abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-b", Name: "x"}}, abi.StatusForbidden, `namespace "team-b"`},
	} {
		if s, msg := call(t, c, abi.ImportEvent, tc.req); s != tc.status || !strings.Contains(msg, tc.want) {
			t.Errorf("event %+v: %s %q; want %s saying %q", tc.req, s, msg, tc.status, tc.want)
		}
	}
}

func TestRequestsTheAPIServerCouldMisreadAreRefused(t *testing.T) {
	c, _ := calls(t, []abi.Permission{{Group: "", Resources: []string{"configmaps", "nodes"}, Verbs: []string{"get", "list", "watch", "delete", "patch"}}})
	for _, tc := range []struct {
		fn   string
		req  any
		want string
	}{
		// Without a name, a delete would be the whole collection's.
		{abi.ImportDelete, abi.DeleteRequest{ObjectRef: abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a"}}, "delete needs the object's name"},
		{abi.ImportPatch, abi.PatchRequest{ObjectRef: abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a"}, Type: abi.PatchMerge}, "patch needs the object's name"},
		{abi.ImportPatch, abi.PatchRequest{ObjectRef: abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "x"}, Type: "xml"}, "patch type"},
		{abi.ImportGet, abi.ObjectRef{APIVersion: "v1", Kind: "Node", Namespace: "a", Name: "n"}, "cluster-scoped"},
		{abi.ImportGet, abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, "namespaced"},
		{abi.ImportGet, abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMaps", Namespace: "a", Name: "x"}, "Kind is singular"},
		{"wasmrec_frobnicate", struct{}{}, "unknown host function"},
	} {
		if s, msg := call(t, c, tc.fn, tc.req); s != abi.StatusBadRequest || !strings.Contains(msg, tc.want) {
			t.Errorf("%s %+v: %s %q; want bad request saying %q", tc.fn, tc.req, s, msg, tc.want)
		}
	}
	if s, _ := c.Call(context.Background(), abi.ImportGet, []byte("{")); s != abi.StatusBadRequest {
		t.Errorf("a body that is not JSON: %s; want bad request", s)
	}
}

func TestStatusesTheGuestSees(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	ctx := context.Background()
	for _, tc := range []struct {
		err  error
		want abi.Status
	}{
		{apierrors.NewNotFound(gr, "x"), abi.StatusNotFound},
		{apierrors.NewAlreadyExists(gr, "x"), abi.StatusAlreadyExists},
		{apierrors.NewConflict(gr, "x", errors.New("changed")), abi.StatusConflict},
		{apierrors.NewForbidden(gr, "x", errors.New("rbac")), abi.StatusForbidden},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x", nil), abi.StatusInvalid},
		{apierrors.NewTooManyRequests("slow down", 1), abi.StatusUnavailable},
		{apierrors.NewRequestEntityTooLargeError("big"), abi.StatusTooLarge},
		{context.DeadlineExceeded, abi.StatusTimeout},
		{errors.New("something else"), abi.StatusInternal},
	} {
		if got := statusOf(ctx, tc.err); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestALimitRefusesACallItCouldNotLetThroughInTime(t *testing.T) {
	l := NewLimit("writes", 1, 1, nil, nil)
	if err := l.Wait(context.Background(), logr.Discard()); err != nil {
		t.Fatalf("the burst's token: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.Wait(ctx, logr.Discard())
	if s := statusOf(ctx, err); s != abi.StatusTimeout || !strings.Contains(err.Error(), "write rate limit (1/s, burst 1)") {
		t.Errorf("a token a second away with 100ms left: %v (%s); want a timeout naming the limit", err, s)
	}
	if waited := time.Since(start); waited > 50*time.Millisecond {
		t.Errorf("it waited %v before refusing; a call that cannot make it is refused at once", waited)
	}
}

// A map function's calls may read, as a reconcile's do, and write nothing: each write is bad
// request before it reaches the policy, the limits or the API server.
func TestAMapFunctionMayOnlyRead(t *testing.T) {
	c, m := calls(t, []abi.Permission{{Group: "", Resources: []string{"configmaps", "events"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}})
	c.ReadOnly = true
	ref := abi.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "x"}
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "ns", "name": "x"}}
	for _, tc := range []struct {
		fn  string
		req any
	}{
		{abi.ImportCreate, obj},
		{abi.ImportUpdate, obj},
		{abi.ImportUpdateStatus, obj},
		{abi.ImportPatch, abi.PatchRequest{ObjectRef: ref, Type: abi.PatchMerge, Patch: json.RawMessage(`{}`)}},
		{abi.ImportDelete, abi.DeleteRequest{ObjectRef: ref}},
		{abi.ImportEvent, abi.EventRequest{Type: "Normal", Reason: "R"}},
	} {
		if s, msg := call(t, c, tc.fn, tc.req); s != abi.StatusBadRequest || !strings.Contains(msg, "may only read") {
			t.Errorf("%s from a map function: %s %q; want bad request saying it may only read", tc.fn, s, msg)
		}
	}
	if m.lookups != 0 {
		t.Errorf("%d kind lookups for writes of a map function; want 0", m.lookups)
	}
	// A read goes on to the policy: here to the reader, which this test has not got.
	if s, msg := call(t, c, abi.ImportGet, abi.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "x"}); s != abi.StatusForbidden || !strings.Contains(msg, "may get nothing") {
		t.Errorf("a get outside the grant from a map function: %s %q; want the policy's refusal", s, msg)
	}
}
