package apiready

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// An API server whose etcd goes: the Watcher says it once, with the failing checks, is not
// ready meanwhile, and says when it is back.
func TestWatcherFollowsTheAPIServersReadiness(t *testing.T) {
	var answer atomic.Value
	answer.Store("ok")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		switch a := answer.Load().(string); a {
		case "ok":
			w.Write([]byte("[+]ping ok\n[+]etcd ok\nreadyz check passed\n"))
		case "etcd":
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("[+]ping ok\n[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason withheld\nreadyz check failed\n"))
		case "forbidden":
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	defer srv.Close()
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) { mu.Lock(); lines = append(lines, args); mu.Unlock() }, funcr.Options{})
	said := func() string { mu.Lock(); defer mu.Unlock(); return strings.Join(lines, "\n") }
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL}).Discovery().RESTClient()
	w := New(client, 20*time.Millisecond, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	defer cancel()

	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the log says\n%s", what, said())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if !w.Ready() || w.NotReady(time.Now()) != nil || said() != "" {
		t.Fatalf("a ready API server: Ready %v, NotReady %v, log %q", w.Ready(), w.NotReady(time.Now()), said())
	}
	answer.Store("etcd")
	wait("not ready once etcd fails", func() bool { return !w.Ready() })
	time.Sleep(100 * time.Millisecond) // several more checks
	if why := w.NotReady(time.Now()); len(why) != 1 || !strings.Contains(why[0], "etcd, etcd-readiness failing") {
		t.Errorf("NotReady: %q", why)
	}
	if n := strings.Count(said(), "the API server is not ready"); n != 1 {
		t.Errorf("the outage is said %d times, want once:\n%s", n, said())
	}
	if !strings.Contains(said(), `"failing"="etcd, etcd-readiness"`) {
		t.Errorf("the log does not name the failing checks:\n%s", said())
	}
	answer.Store("ok")
	wait("ready again", func() bool { return w.Ready() && strings.Contains(said(), "the API server is ready again") })
	answer.Store("forbidden")
	wait("a refused /readyz stops the watcher", func() bool { return strings.Contains(said(), "does not let the host read its /readyz") })
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("the watcher asks on after the API server refused it /readyz")
	}
}
