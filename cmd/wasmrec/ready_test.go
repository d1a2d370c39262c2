package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeReadiness is not ready for the reasons it holds, and not before it has started.
type fakeReadiness []string

func (f fakeReadiness) NotReady(started bool) []string {
	if !started {
		return []string{"caches syncing or plugins loading"}
	}
	return f
}

// /readyz answers 200 "ok" when nothing is wrong, else 503 with every reason, one a line.
func TestReadyz(t *testing.T) {
	for _, c := range []struct {
		name     string
		started  bool
		host     fakeReadiness
		code     int
		contains []string
	}{
		{"ready", true, nil, http.StatusOK, []string{"ok"}},
		{"starting", false, nil, http.StatusServiceUnavailable, []string{"caches syncing or plugins loading"}},
		{"failing", true, fakeReadiness{"list/watch of A failing", "list/watch of B failing"}, http.StatusServiceUnavailable,
			[]string{"list/watch of A failing\nlist/watch of B failing\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			readyz(func() bool { return c.started }, c.host).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != c.code {
				t.Errorf("code %d, want %d (body %q)", rec.Code, c.code, body)
			}
			for _, s := range c.contains {
				if !strings.Contains(string(body), s) {
					t.Errorf("body %q does not say %q", body, s)
				}
			}
		})
	}
}
