package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/plugin/internal/policy"
)

// ServiceAccountUser is the user a plugin acts as when the host impersonates plugins: the
// ServiceAccount named after the plugin in namespace.
func ServiceAccountUser(namespace, plugin string) string {
	return "system:serviceaccount:" + namespace + ":" + plugin
}

// identity is who a plugin's API calls are made as: the host itself, or a ServiceAccount of
// the plugin's (the host config's impersonate, or a Plugin object's). Then the API server's RBAC
// bounds the plugin too, whatever the host's own checks let through, and reads from the host's
// informers are reviewed for it first.
type identity struct {
	user        string                  // "" for the host's own identity
	objects     *object.Client          // the guest's writes
	broadcaster record.EventBroadcaster // the guest's events; nil: the host's
	access      authorizationReviewer   // asks the API server what user may do; nil for the host
	reviews     reviewCache             // what access answered lately
}

type authorizationReviewer interface {
	Create(context.Context, *authorizationv1.SelfSubjectAccessReview, metav1.CreateOptions) (*authorizationv1.SelfSubjectAccessReview, error)
}

// identityFor returns the identity cfg's plugin's calls are made as: cfg.ServiceAccount, else,
// when the host impersonates its config's plugins, the ServiceAccount named after the plugin,
// else the host.
func (h *Host) identityFor(cfg Config) (*identity, error) {
	var user string
	switch {
	case cfg.ServiceAccount != nil:
		user = cfg.ServiceAccount.User()
	case h.impersonate != "":
		user = ServiceAccountUser(h.impersonate, cfg.Name)
	default:
		return &identity{objects: h.objects}, nil
	}
	rc := rest.CopyConfig(h.mgr.GetConfig())
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}
	objs, err := object.NewClient(rc)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: a client acting as %s: %w", cfg.Name, user, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: a client acting as %s: %w", cfg.Name, user, err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return &identity{user: user, objects: objs, broadcaster: b, access: cs.AuthorizationV1().SelfSubjectAccessReviews()}, nil
}

// reviewTTL is how long an answer of the API server about a read is trusted: a Role taken away
// reaches the plugin's reads from the host's caches within it.
const reviewTTL = 30 * time.Second

// reviewCache keeps the API server's answers about reads, by verb, resource and namespace.
type reviewCache struct {
	mu      sync.Mutex
	answers map[authorizationv1.ResourceAttributes]reviewAnswer
}

type reviewAnswer struct {
	allowed bool
	at      time.Time
}

// may asks the API server (or its answer of the last reviewTTL) whether the identity may do
// what attrs say.
func (id *identity) may(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
	now := time.Now()
	id.reviews.mu.Lock()
	a, ok := id.reviews.answers[attrs]
	id.reviews.mu.Unlock()
	if ok && now.Sub(a.at) < reviewTTL {
		return a.allowed, nil
	}
	review, err := id.access.Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("asking the API server what %s may do: %w", id.user, err)
	}
	id.reviews.mu.Lock()
	if id.reviews.answers == nil || len(id.reviews.answers) > 4096 {
		id.reviews.answers = map[authorizationv1.ResourceAttributes]reviewAnswer{}
	}
	id.reviews.answers[attrs] = reviewAnswer{allowed: review.Status.Allowed, at: now}
	id.reviews.mu.Unlock()
	return review.Status.Allowed, nil
}

// forget drops the answers kept, so that the next questions go to the API server.
func (id *identity) forget() {
	id.reviews.mu.Lock()
	defer id.reviews.mu.Unlock()
	clear(id.reviews.answers)
}

// mayRead is guest.API.MayRead for the identity: nil when it is the host's own.
func (id *identity) mayRead() func(context.Context, string, schema.GroupResource, []string) error {
	if id.access == nil {
		return nil
	}
	return func(ctx context.Context, verb string, gr schema.GroupResource, namespaces []string) error {
		if len(namespaces) == 0 {
			namespaces = []string{""}
		}
		var denied []string
		for _, ns := range namespaces {
			ok, err := id.may(ctx, authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: gr.Group, Resource: gr.Resource})
			if err != nil {
				return err
			}
			if !ok {
				denied = append(denied, abi.Rule{Group: gr.Group, Resource: gr.Resource, Verb: verb}.String()+" "+where(ns))
			}
		}
		if len(denied) > 0 {
			return fmt.Errorf("the plugin's ServiceAccount's RBAC does not let %s %s (its manifest and grant do): grant it to the ServiceAccount, or read less", id.user, strings.Join(denied, ", "))
		}
		return nil
	}
}

func where(ns string) string {
	if ns == "" {
		return "cluster-wide"
	}
	return "in " + ns
}

// recorder records the plugin's events as its identity.
func (id *identity) recorder(h *Host, plugin string) record.EventRecorder {
	b := id.broadcaster
	if b == nil {
		b = h.broadcaster
	}
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "wasmrec/" + plugin})
}

func (id *identity) close() {
	if id.broadcaster != nil {
		id.broadcaster.Shutdown()
	}
}

// checkReads asks the API server whether the plugin's own identity may do every read its policy
// names (get, list and watch on each resource both asked for and granted), in each of its
// namespaces (or cluster-wide). The host serves reads from its own informers, so without this
// only the host's check would bound them. It refuses, naming each denied rule, and does nothing
// for a plugin acting as the host. Rules for every resource ("*") name no informer: each read
// under them is reviewed when it is made (identity.mayRead).
func (p *Plugin) checkReads(ctx context.Context, pol *policy.Policy, m *abi.Manifest) error {
	id := p.identity
	if id.access == nil {
		return nil
	}
	var rules []abi.Rule
	for _, r := range abi.Rules(pol.Asked) {
		if slices.Contains([]string{"get", "list", "watch"}, r.Verb) && r.Resource != "*" && pol.Allows(r) {
			rules = append(rules, r)
		}
	}
	// The kinds it watches, whatever rule allows them ("*" included): their informers list and
	// watch for it.
	if watched, err := policy.Watched(m); err == nil {
		for _, gvk := range watched {
			mapping, err := p.host.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				continue // not served yet: its informer starts with its plugin's next start
			}
			for _, r := range policy.WatchRules(mapping.Resource.GroupResource()) {
				if !slices.Contains(rules, r) {
					rules = append(rules, r)
				}
			}
		}
	}
	var denied []string
	for _, r := range rules {
		namespaces := pol.Namespaces
		if len(namespaces) == 0 || p.clusterScoped(r) {
			namespaces = []string{""}
		}
		resource, sub, _ := strings.Cut(r.Resource, "/")
		for _, ns := range namespaces {
			ok, err := id.may(ctx, authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verb, Group: r.Group, Resource: resource, Subresource: sub})
			if err != nil {
				return err
			}
			if !ok {
				denied = append(denied, r.String()+" "+where(ns))
			}
		}
	}
	if len(denied) > 0 {
		how := "grant them to the ServiceAccount with a Role and binding"
		if p.cfg.ServiceAccount == nil { // the host config's: its Roles come from the grants
			how = "grant them to the ServiceAccount (`wasmrec rbac` prints the Roles)"
		}
		return fmt.Errorf("the API server does not let %s %s (the plugin's ServiceAccount's RBAC lacks them; its manifest and grant have them): %s", id.user, strings.Join(denied, ", "), how)
	}
	return nil
}

// clusterScoped reports whether r's resource is cluster-scoped, as far as the mapper knows.
func (p *Plugin) clusterScoped(r abi.Rule) bool {
	resource, _, _ := strings.Cut(r.Resource, "/")
	gvk, err := p.host.mapper.KindFor(schema.GroupVersionResource{Group: r.Group, Resource: resource})
	if err != nil {
		return false
	}
	m, err := p.host.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil && m.Scope.Name() == "root"
}

// RBAC returns the objects that let plugins act as their own ServiceAccounts in namespace: for
// each plugin its ServiceAccount, a Role per namespace it is limited to (a ClusterRole if none)
// with its grant, and their bindings; and a Role letting hostAccount ("namespace/name", the
// host's own ServiceAccount) impersonate them. Apply them beside a host config whose
// impersonate.namespace is namespace.
func RBAC(namespace, hostAccount string, plugins []Config) ([]runtime.Object, error) {
	hostNS, hostName, ok := strings.Cut(hostAccount, "/")
	if !ok || hostNS == "" || hostName == "" {
		return nil, fmt.Errorf("the host's ServiceAccount %q: give it as namespace/name", hostAccount)
	}
	var out []runtime.Object
	var accounts []string
	for _, c := range plugins {
		accounts = append(accounts, c.Name)
		out = append(out, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: namespace, Labels: rbacLabels(c.Name)}})
		var rules []rbacv1.PolicyRule
		events := false
		for _, p := range c.Permissions {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: p.Resources, Verbs: p.Verbs})
			events = events || abi.Allows([]abi.Permission{p}, "", "events", "create")
		}
		if events { // the host's event recorder patches an event that repeats
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"patch"}})
		}
		name := "wasmrec-plugin-" + c.Name
		subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: c.Name, Namespace: namespace}}
		if len(c.Namespaces) == 0 {
			out = append(out,
				&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: rbacLabels(c.Name)}, Rules: rules},
				&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: rbacLabels(c.Name)}, Subjects: subjects,
					RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}})
			continue
		}
		for _, ns := range c.Namespaces {
			out = append(out,
				&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: rbacLabels(c.Name)}, Rules: rules},
				&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: rbacLabels(c.Name)}, Subjects: subjects,
					RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}})
		}
	}
	if len(accounts) > 0 {
		out = append(out,
			&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
				ObjectMeta: metav1.ObjectMeta{Name: "wasmrec-impersonate-plugins", Namespace: namespace},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}, ResourceNames: accounts}}},
			&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
				ObjectMeta: metav1.ObjectMeta{Name: "wasmrec-impersonate-plugins", Namespace: namespace},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: hostName, Namespace: hostNS}},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "wasmrec-impersonate-plugins"}})
	}
	return out, nil
}

func rbacLabels(plugin string) map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "wasmrec", "wasmrec.dev/plugin": plugin}
}
