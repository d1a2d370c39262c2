package cache

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

var widgets = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// refusingServer serves Widgets in namespace prod: it answers 403 to every list and watch
// until allow is set, then an empty list and watches that stay open.
func refusingServer(t *testing.T, allow *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case !allow.Load():
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
				`"message":"widgets.example.com is forbidden: User \"host\" cannot list resource \"widgets\" in API group \"example.com\" in the namespace \"prod\""}`))
		case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			w.WriteHeader(http.StatusBadRequest) // no streamed lists here: the reflector lists instead
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`))
		case q.Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			_, _ = w.Write([]byte(`{"kind":"WidgetList","apiVersion":"example.com/v1","metadata":{"resourceVersion":"1"},"items":[]}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An informer whose list the API server refuses the host is said once in the log, naming the
// resource and what to grant; a read that must not wait fails at once, the cache counts as
// synced for the host's start, and the cache's watchers are told when it starts and stops
// failing.
func TestRefusedInformer(t *testing.T) {
	var allow atomic.Bool
	srv := refusingServer(t, &allow)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(widgets, meta.RESTScopeNamespace)
	var (
		logMu sync.Mutex
		logs  []string
	)
	log := funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, prefix+" "+args)
	}, funcr.Options{})
	count := func(s string) int {
		logMu.Lock()
		defer logMu.Unlock()
		n := 0
		for _, l := range logs {
			if strings.Contains(l, s) {
				n++
			}
		}
		return n
	}
	c, err := New(&rest.Config{Host: srv.URL}, Options{Mapper: mapper, Logger: log, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	told := make(chan Key, 10)
	c.OnHealthChange(func(k Key) { told <- k })
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- c.Start(ctx) }()
	defer func() {
		cancel()
		<-stopped
	}()
	key := Key{GroupVersionKind: widgets, Namespace: "prod"}
	inf, err := c.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	defer inf.Release()

	start := time.Now()
	err = inf.WaitForSyncUnlessRefused(context.Background())
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("waiting for a refused informer: %v, want a *RefusedError", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the refusal came after %s, want at once", took)
	}
	const missing = "the host cannot list example.com/widgets in prod: grant its ServiceAccount list and watch on them"
	if !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), `User "host" cannot list`) {
		t.Errorf("the error does not say what is missing and who was refused: %v", err)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("the error does not unwrap to the API server's 403: %v", err)
	}
	if f := c.Failures(); len(f) != 1 || !f[0].Refused() || f[0].Verb != "list" || f[0].Key != key {
		t.Errorf("failures: %+v, want one refused list of %s", f, key)
	}
	syncCtx, cancelSync := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelSync()
	if !c.WaitForCacheSync(syncCtx) {
		t.Error("WaitForCacheSync waits for an informer whose list is refused")
	}
	select {
	case k := <-told:
		if k != key {
			t.Errorf("told of %s, want %s", k, key)
		}
	case <-time.After(5 * time.Second):
		t.Error("the cache's watchers were not told of the refusal")
	}

	// The reflector retries (0.8 s, 1.6 s...): the log says it once.
	time.Sleep(3 * time.Second)
	if n := count(missing); n != 1 {
		t.Errorf("%d log lines say what is missing, want 1 over the retries:\n%s", n, strings.Join(logs, "\n"))
	}

	allow.Store(true)
	if err := inf.WaitForSync(context.Background()); err != nil {
		t.Fatalf("once the list is allowed: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for inf.Refused() != nil || len(c.Failures()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still failing once the list is allowed: %+v", c.Failures())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := inf.WaitForSyncUnlessRefused(context.Background()); err != nil {
		t.Errorf("a read once the list is allowed: %v", err)
	}
	select {
	case <-told:
	case <-time.After(5 * time.Second):
		t.Error("the cache's watchers were not told that the informer works again")
	}
	if count("list/watch works again") != 1 {
		t.Error("the log does not say the informer works again")
	}
}

// What a refused informer lacks is said with the verb, the resource and where, and what to do:
// RBAC for a 403, the credentials for a 401.
func TestFailureMissing(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	for _, c := range []struct {
		f    Failure
		want string
	}{
		{Failure{Key: Key{Namespace: "prod"}, Resource: secrets, Verb: "list", Err: apierrors.NewForbidden(secrets.GroupResource(), "", errors.New("no"))},
			"the host cannot list core/secrets in prod: grant its ServiceAccount list and watch on them"},
		{Failure{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Verb: "watch", Err: apierrors.NewForbidden(secrets.GroupResource(), "", errors.New("no"))},
			"the host cannot watch apps/deployments cluster-wide: grant its ServiceAccount list and watch on them"},
		{Failure{Key: Key{Namespace: "prod"}, Resource: secrets, Verb: "list", Err: apierrors.NewUnauthorized("expired")},
			"the API server does not take the host's credentials to list core/secrets in prod: check its kubeconfig, token or certificate"},
	} {
		if !c.f.Refused() {
			t.Errorf("%v: not refused", c.f.Err)
		}
		if got := c.f.Missing(); got != c.want {
			t.Errorf("Missing() = %q, want %q", got, c.want)
		}
	}
	if (Failure{Err: apierrors.NewServiceUnavailable("down")}).Refused() {
		t.Error("a 503 counts as refused")
	}
}
