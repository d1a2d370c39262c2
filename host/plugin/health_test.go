package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// The host is ready once started, unless an informer fails for the whole host: the API server
// out of reach, or a refusal of an informer of the host's own. A kind refused by RBAC that a
// plugin needs leaves the host ready: that plugin is Degraded instead.
func TestReadinessRule(t *testing.T) {
	now := time.Now()
	secrets := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("Secret"), Namespace: "prod"}
	configMaps := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: "prod"}
	crds := cache.Key{GroupVersionKind: apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")}
	forbidden := cache.Failure{Key: secrets, Resource: corev1.SchemeGroupVersion.WithResource("secrets"), Verb: "list", Since: now.Add(-time.Minute),
		Err: apierrors.NewForbidden(corev1.Resource("secrets"), "", errors.New(`User "host" cannot list resource "secrets"`))}
	unauthorized := forbidden
	unauthorized.Err = apierrors.NewUnauthorized("token expired")
	outage := cache.Failure{Key: configMaps, Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Verb: "watch", Since: now.Add(-3 * time.Second),
		Err: errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")}
	ownRefused := cache.Failure{Key: crds, Resource: apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"), Verb: "list", Since: now,
		Err: apierrors.NewForbidden(apiextensionsv1.Resource("customresourcedefinitions"), "", errors.New("no"))}
	pluginsNeed := map[cache.Key]bool{secrets: true, configMaps: true}

	for _, c := range []struct {
		name     string
		started  bool
		failures []cache.Failure
		want     []string // a substring of each reason, in order; none: ready
	}{
		{"started, nothing failing", true, nil, nil},
		{"not started", false, nil, []string{"caches syncing or plugins loading"}},
		{"not started, a plugin's kind refused", false, []cache.Failure{forbidden}, []string{"caches syncing or plugins loading"}},
		{"a plugin's kind forbidden", true, []cache.Failure{forbidden}, nil},
		{"a plugin's kind unauthorized", true, []cache.Failure{unauthorized}, nil},
		{"the API server out of reach", true, []cache.Failure{outage}, []string{"list/watch of ConfigMap.v1 in namespace prod failing for 3s: dial tcp"}},
		{"the API server out of reach, a plugin's kind forbidden", true, []cache.Failure{forbidden, outage}, []string{"ConfigMap.v1 in namespace prod failing"}},
		{"the host's own informer refused", true, []cache.Failure{ownRefused, forbidden},
			[]string{"list/watch of CustomResourceDefinition.v1.apiextensions.k8s.io refused for 0s: the host cannot list apiextensions.k8s.io/customresourcedefinitions cluster-wide: grant its ServiceAccount list and watch on them"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := notReady(c.started, c.failures, pluginsNeed, now)
			if len(got) != len(c.want) {
				t.Fatalf("not ready because %q, want %d reasons %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("reason %d is %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

// A plugin is failing after FailingAfter failed reconciles in a row, with the last error, and
// not from the next success; the callback hears of each change, once.
func TestFailureStreak(t *testing.T) {
	defer func(d time.Duration) { failingRetell = d }(failingRetell)
	failingRetell = time.Hour // this test moves toldAt back instead; TestFailureStreakTellsTheLatestError waits
	var f failureStreak
	var told []string
	tell := func(s string) { told = append(told, s) }
	for i := range FailingAfter - 1 {
		f.record(errors.New("conflict"), tell)
		if f.message() != "" {
			t.Fatalf("failing after %d failures, want %d", i+1, FailingAfter)
		}
	}
	f.record(nil, tell) // one success starts the count again
	for range FailingAfter - 1 {
		f.record(errors.New("conflict"), tell)
	}
	if f.message() != "" || len(told) != 0 {
		t.Fatalf("failing (%q, told %q) though a reconcile succeeded %d failures ago", f.message(), told, FailingAfter-1)
	}
	f.record(errors.New(`plugin "p": boom`), tell)
	f.record(errors.New(`plugin "p": bang`), tell)
	if m := f.message(); !strings.HasPrefix(m, "every reconcile since ") || !strings.HasSuffix(m, `the last error: plugin "p": bang`) {
		t.Fatalf("message %q", m)
	}
	if len(told) != 1 || !strings.Contains(told[0], "boom") {
		t.Fatalf("told %q, want the one change, with the error at that time", told)
	}
	// Another error, some time later: told again, its first line only.
	f.toldAt = f.toldAt.Add(-failingRetell)
	f.record(errors.New("reconcile trapped: wasm error: unreachable\nwasm stack trace:\n\tabort"), tell)
	if len(told) != 2 || !strings.HasSuffix(told[1], "the last error: reconcile trapped: wasm error: unreachable") {
		t.Fatalf("told %q, want the new last error's first line", told)
	}
	f.record(errors.New("again at once"), tell)
	if len(told) != 2 {
		t.Fatalf("told %q within %s of the last", told, failingRetell)
	}
	// A long message is cut.
	f.toldAt = f.toldAt.Add(-failingRetell)
	f.record(errors.New(strings.Repeat("x", 10*maxFailingError)), tell)
	if m := f.message(); len(m) > 2*maxFailingError || !strings.HasSuffix(m, "xxx...") {
		t.Fatalf("message of %d bytes: %.80q...", len(m), m)
	}
	told = told[:3]
	f.record(nil, tell)
	if f.message() != "" || len(told) != 4 || told[3] != "" {
		t.Fatalf("after a success: %q, told %q", f.message(), told)
	}
}

// A last error that comes within failingRetell of the one told is told once it has passed, so
// that a plugin's status names the latest error even when no failure follows it.
func TestFailureStreakTellsTheLatestError(t *testing.T) {
	defer func(d time.Duration) { failingRetell = d }(failingRetell)
	failingRetell = 100 * time.Millisecond
	var f failureStreak
	told := make(chan string, 10)
	tell := func(s string) { told <- s }
	for range FailingAfter {
		f.record(errors.New("object a: boom"), tell)
	}
	if got := <-told; !strings.HasSuffix(got, "the last error: object a: boom") {
		t.Fatalf("told %q", got)
	}
	f.mu.Lock()
	first := f.toldAt
	f.mu.Unlock()
	f.record(errors.New("object b: bang"), tell)
	f.record(errors.New("object c: crash"), tell)
	select {
	case got := <-told:
		if since := time.Since(first); since < failingRetell {
			t.Fatalf("told %q %s after the last, within %s", got, since, failingRetell)
		}
		if !strings.HasSuffix(got, "the last error: object c: crash") {
			t.Fatalf("told %q, want the latest error", got)
		}
	case <-time.After(10 * failingRetell):
		t.Fatalf("the latest error, object c's, was never told: the status would go on naming object a")
	}
	// Nothing more to tell: no other call.
	select {
	case got := <-told:
		t.Fatalf("told %q again", got)
	case <-time.After(2 * failingRetell):
	}
}

// A timeout says which setting stopped the guest and what to do, without the interruption's
// wasm error, and carries where the guest was as its stack, for the log.
func TestATimeoutSaysTheSettingAndWhereTheGuestWas(t *testing.T) {
	interrupted := fmt.Errorf("plugin \"p\": %w: wasm error: unreachable\nwasm stack trace:\n\t.main.spin(i32) i32\n\t.wasmrec_map(i32,i32) i64", wasm.ErrTimedOut)
	for _, isMap := range []bool{false, true} {
		err := error(&timedOut{plugin: "p", timeout: 2 * time.Second, isMap: isMap, err: interrupted})
		if !errors.Is(err, wasm.ErrTimedOut) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v is not a timeout", err)
		}
		if msg := err.Error(); strings.Contains(msg, "wasm error") || strings.Contains(msg, "stack") || !strings.Contains(msg, "2s, the plugin's timeout (timeout in host.yaml") {
			t.Errorf("message %q", msg)
		}
		if got, want := reconcile.StackOf(err), []any{"stack", ".main.spin(i32) i32\n.wasmrec_map(i32,i32) i64"}; !slices.Equal(got, want) {
			t.Errorf("stack %q, want %q", got, want)
		}
	}
	if got := reconcile.StackOf(&timedOut{err: wasm.ErrTimedOut}); got != nil {
		t.Errorf("stack %q of a timeout without one", got)
	}
}
