package metrics

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Authorized serves h only to a client the API server vouches for, as kube-rbac-proxy and
// controller-runtime's metrics filters do: its bearer token must pass a TokenReview, and its
// user a SubjectAccessReview of get on the request's path (a non-resource URL: grant it with a
// ClusterRole's nonResourceURLs: ["/metrics"]). Anything else gets 401 or 403, naming what is
// missing and nothing of what h serves. Answers are kept for a minute, 10,000 of them at most,
// so that a scrape every few seconds costs no review.
//
// The metrics name every plugin and its module's digest: without this, anyone who could reach
// the port read every tenant's.
func Authorized(cs kubernetes.Interface, h http.Handler, log logr.Logger) http.Handler {
	return &authorized{cs: cs, next: h, log: log, clock: clock.RealClock{}, answers: map[[sha256.Size]byte]answer{}}
}

// answerTTL is how long an answer of the API server is kept; maxAnswers how many.
const (
	answerTTL  = time.Minute
	maxAnswers = 10000
)

type authorized struct {
	cs    kubernetes.Interface
	next  http.Handler
	log   logr.Logger
	clock clock.PassiveClock

	mu      sync.Mutex
	answers map[[sha256.Size]byte]answer // by token and path
}

type answer struct {
	status int    // 0: allowed
	why    string // what the client is told
	until  time.Time
}

func (a *authorized) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" { // the scheme is case-insensitive (RFC 7235)
		http.Error(w, "unauthorized: send a bearer token the Kubernetes API server accepts (a ServiceAccount's), whose user may get "+r.URL.Path, http.StatusUnauthorized)
		return
	}
	key := sha256.Sum256([]byte(r.URL.Path + "\x00" + token))
	now := a.clock.Now()
	a.mu.Lock()
	ans, ok := a.answers[key]
	a.mu.Unlock()
	if !ok || now.After(ans.until) {
		var err error
		if ans, err = a.review(r.Context(), token, r.URL.Path); err != nil {
			a.log.Error(err, "reviewing a metrics client with the API server")
			http.Error(w, "the API server could not review the request: try again", http.StatusInternalServerError)
			return
		}
		ans.until = now.Add(answerTTL)
		a.mu.Lock()
		if len(a.answers) >= maxAnswers {
			clear(a.answers)
		}
		a.answers[key] = ans
		a.mu.Unlock()
	}
	if ans.status != 0 {
		http.Error(w, ans.why, ans.status)
		return
	}
	a.next.ServeHTTP(w, r)
}

// review asks the API server who token is, and whether that user may get path.
func (a *authorized) review(ctx context.Context, token, path string) (answer, error) {
	tr, err := a.cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return answer{}, err
	}
	if !tr.Status.Authenticated {
		return answer{status: http.StatusUnauthorized, why: "unauthorized: the API server does not accept this token"}, nil
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return answer{}, err
	}
	if !sar.Status.Allowed {
		return answer{status: http.StatusForbidden, why: "forbidden: " + u.Username + " may not get " + path + ": bind it a ClusterRole with nonResourceURLs [\"" + path + "\"] and verb get"}, nil
	}
	return answer{}, nil
}
