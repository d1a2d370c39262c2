package plugin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/host/internal/review"
	"github.com/wasmrec/wasmrec/host/recording"
)

// RecordingsPath is where RecordingsHandler serves.
const RecordingsPath = "/recordings/"

// RecordingsHandler serves the recordings of the host's plugins (Config.Record) to clients
// whose bearer token the API server accepts (a TokenReview), each only the recordings of the
// plugins whose objects its user may read already (SubjectAccessReviews: see mayReadRecordings):
//
//	GET /recordings/PLUGIN/         its recordings, a JSON list, the oldest first
//	GET /recordings/PLUGIN/DIGEST   one, as a tar of it, the steps before it and its module
//
// A recording holds whatever the plugin read: the rule is that of the objects themselves.
// Only plugins the host runs are served.
func (h *Host) RecordingsHandler(cs kubernetes.Interface, log logr.Logger) http.Handler {
	return &recordingsHandler{host: h, reviews: review.New(cs), log: log}
}

type recordingsHandler struct {
	host    *Host
	reviews *review.Reviewer
	log     logr.Logger
}

func (s *recordingsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	token := review.Token(r)
	if token == "" {
		http.Error(w, "unauthorized: send a bearer token the Kubernetes API server accepts; a plugin's recordings are served to those who may read what it reads", http.StatusUnauthorized)
		return
	}
	user, err := s.reviews.Who(r.Context(), token)
	if err != nil {
		s.fail(w, err)
		return
	}
	if user == nil {
		http.Error(w, "unauthorized: the API server does not accept this token", http.StatusUnauthorized)
		return
	}
	name, digest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, RecordingsPath), "/")
	// One answer for a plugin the user may not read and one the host does not run: a refusal
	// says nothing of which plugins exist, where, or what they read. The host's log says why.
	forbidden := func(why string) {
		s.log.V(1).Info("refused a client the recordings of a plugin", "user", user.Username, "plugin", name, "why", why)
		http.Error(w, fmt.Sprintf("forbidden: %s may not read the recordings of a plugin %q: one needs to be allowed to get its Plugin or ClusterPlugin and to list every resource it reads, where it reads them", user.Username, name), http.StatusForbidden)
	}
	cfg, ok := s.host.running(name)
	if !ok || s.host.recordings == "" {
		forbidden("the host runs no such plugin, or keeps no recordings")
		return
	}
	if why, err := s.mayRead(r, token, user, cfg); err != nil {
		s.fail(w, err)
		return
	} else if why != "" {
		forbidden(why)
		return
	}
	dir := filepath.Join(s.host.recordings, cfg.Name)
	if digest == "" {
		listed, err := recording.List(dir)
		if err != nil {
			listed = nil // none yet
		}
		type item struct {
			Digest  string            `json:"digest"`
			Time    string            `json:"time"`
			Request recording.Request `json:"request"`
			Outcome string            `json:"outcome"`
			Failed  bool              `json:"failed,omitempty"`
		}
		items := []item{}
		for _, l := range listed {
			items = append(items, item{l.Digest, l.Time.UTC().Format(time.RFC3339Nano), l.Request, l.Outcome, l.Failed})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(items)
		return
	}
	if strings.ContainsAny(digest, "/.") {
		http.Error(w, "not a recording's digest", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if err := recording.WriteBundle(w, dir, digest); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
	}
}

func (s *recordingsHandler) fail(w http.ResponseWriter, err error) {
	s.log.Error(err, "reviewing a recordings client with the API server")
	http.Error(w, "the API server could not review the request: try again", http.StatusInternalServerError)
}

// mayRead says why user may not read the recordings of the plugin of cfg, "" if it may. It
// may if it may get the plugin's object (a Plugin or ClusterPlugin; a plugin of the host
// config has none) and list every resource the plugin may read, in each of its namespaces (in
// all, for a plugin not confined to some): what the recordings hold, it could read itself.
func (s *recordingsHandler) mayRead(r *http.Request, token string, user *authenticationv1.UserInfo, cfg Config) (string, error) {
	var checks []authorizationv1.ResourceAttributes
	if kind, ns, name, ok := objectOf(cfg.Origin); ok {
		resource := "plugins"
		if kind == "ClusterPlugin" {
			resource = "clusterplugins"
		}
		checks = append(checks, authorizationv1.ResourceAttributes{Verb: "get", Group: "wasmrec.dev", Resource: resource, Namespace: ns, Name: name})
	}
	namespaces := cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	for _, p := range cfg.Permissions {
		if !slices.Contains(p.Verbs, "get") && !slices.Contains(p.Verbs, "list") && !slices.Contains(p.Verbs, "*") {
			continue
		}
		for _, res := range p.Resources {
			res, sub, _ := strings.Cut(res, "/")
			for _, ns := range namespaces {
				checks = append(checks, authorizationv1.ResourceAttributes{Verb: "list", Group: p.Group, Resource: res, Subresource: sub, Namespace: ns})
			}
		}
	}
	for _, c := range checks {
		ok, err := s.reviews.May(r.Context(), token, user, &c, nil)
		if err != nil {
			return "", err
		}
		if !ok {
			what := c.Resource
			if c.Group != "" {
				what += "." + c.Group
			}
			where := "in any namespace"
			if c.Namespace != "" {
				where = "in namespace " + c.Namespace
			}
			if c.Name != "" {
				what += " " + c.Name
			}
			return fmt.Sprintf("it may not %s %s %s, which the plugin's recordings hold or name", c.Verb, what, where), nil
		}
	}
	return "", nil
}

// objectOf reads a Config's Origin: the kind, namespace and name of its plugin object.
func objectOf(origin string) (kind, namespace, name string, ok bool) {
	kind, ref, ok := strings.Cut(origin, " ")
	switch {
	case !ok:
		return "", "", "", false
	case kind == "Plugin":
		namespace, name, ok = strings.Cut(ref, "/")
		return kind, namespace, name, ok
	case kind == "ClusterPlugin":
		return kind, "", ref, true
	}
	return "", "", "", false
}

// running returns the settings of the plugin of that name the host runs.
func (h *Host) running(name string) (Config, bool) {
	h.namesMu.Lock()
	defer h.namesMu.Unlock()
	for p := range h.loaded {
		if p.cfg.Name == name && !p.isClosed() {
			return p.cfg, true
		}
	}
	return Config{}, false
}
