package metrics

import (
	"net/http"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/host/internal/review"
)

// Authorized serves h only to a client the API server vouches for, as kube-rbac-proxy and
// controller-runtime's metrics filters do: its bearer token must pass a TokenReview, and its
// user a SubjectAccessReview of get on the request's path (a non-resource URL: grant it with a
// ClusterRole's nonResourceURLs: ["/metrics"]). Anything else gets 401 or 403, naming what is
// missing and nothing of what h serves. Answers are kept for a minute (review.TTL), so that a
// scrape every few seconds costs no review.
//
// The metrics name every plugin and its module's digest: without this, anyone who could reach
// the port read every tenant's.
func Authorized(cs kubernetes.Interface, h http.Handler, log logr.Logger) http.Handler {
	return &authorized{reviews: review.New(cs), next: h, log: log}
}

type authorized struct {
	reviews *review.Reviewer
	next    http.Handler
	log     logr.Logger
}

func (a *authorized) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token := review.Token(r)
	if token == "" {
		http.Error(w, "unauthorized: send a bearer token the Kubernetes API server accepts (a ServiceAccount's), whose user may get "+r.URL.Path, http.StatusUnauthorized)
		return
	}
	user, err := a.reviews.Who(r.Context(), token)
	if err != nil {
		a.log.Error(err, "reviewing a metrics client with the API server")
		http.Error(w, "the API server could not review the request: try again", http.StatusInternalServerError)
		return
	}
	if user == nil {
		http.Error(w, "unauthorized: the API server does not accept this token", http.StatusUnauthorized)
		return
	}
	ok, err := a.reviews.May(r.Context(), token, user, nil, &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: "get"})
	if err != nil {
		a.log.Error(err, "reviewing a metrics client with the API server")
		http.Error(w, "the API server could not review the request: try again", http.StatusInternalServerError)
		return
	}
	if !ok {
		http.Error(w, "forbidden: "+user.Username+" may not get "+r.URL.Path+": bind it a ClusterRole with nonResourceURLs [\""+r.URL.Path+"\"] and verb get", http.StatusForbidden)
		return
	}
	a.next.ServeHTTP(w, r)
}
