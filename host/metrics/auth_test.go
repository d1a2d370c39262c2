package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wasmrec/wasmrec/host/internal/review"
)

// A scrape is served only with a token the API server accepts, whose user may get the path;
// the answers are kept a minute, then asked again.
func TestAuthorizedAsksTheAPIServer(t *testing.T) {
	cs := fake.NewClientset()
	var reviews atomic.Int32
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "prometheus", "tenant":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:x:" + tr.Spec.Token}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:x:prometheus" && sar.Spec.NonResourceAttributes.Path == "/metrics" && sar.Spec.NonResourceAttributes.Verb == "get"
		return true, sar, nil
	})
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("wasmrec_plugin_info{plugin=\"team-a.x\"} 1"))
	})
	clock := clocktesting.NewFakePassiveClock(time.Now())
	h := &authorized{reviews: review.NewWithClock(cs, clock), next: served, log: logr.Discard()}
	get := func(token string) (int, string) {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	for _, c := range []struct {
		token string
		code  int
		says  string
	}{
		{"", http.StatusUnauthorized, "send a bearer token"},
		{"forged", http.StatusUnauthorized, "does not accept this token"},
		{"tenant", http.StatusForbidden, "system:serviceaccount:x:tenant may not get /metrics"},
		{"prometheus", http.StatusOK, "wasmrec_plugin_info"},
	} {
		code, body := get(c.token)
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("token %q: %d %q, want %d saying %q", c.token, code, body, c.code, c.says)
		}
		if code != http.StatusOK && strings.Contains(body, "team-a") {
			t.Errorf("token %q: refused, yet told of a plugin: %q", c.token, body)
		}
	}
	n := reviews.Load()
	get("prometheus")
	if reviews.Load() != n {
		t.Error("a second scrape within the minute was reviewed again")
	}
	clock.SetTime(clock.Now().Add(review.TTL + time.Second))
	get("prometheus")
	if reviews.Load() != n+1 {
		t.Error("a scrape past the minute was not reviewed again")
	}
}
