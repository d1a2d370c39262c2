package kinds

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// Kind is a kind with its resource.
type Kind struct {
	Group, Version, Kind string
	// Resource is the plural resource name: known for built-in kinds, guessed for others
	// (ConfigMap -> configmaps, Policy -> policies).
	Resource string
	// Namespaced is false for the built-in cluster-scoped kinds; other kinds are taken to be
	// namespaced.
	Namespaced bool
	// BuiltIn is true for a kind of the API server's own groups.
	BuiltIn bool
}

// APIVersion is "group/version", or "version" for the core group.
func (k Kind) APIVersion() string {
	return schema.GroupVersion{Group: k.Group, Version: k.Version}.String()
}

// ParseFor reads "APIVERSION/KIND" ("v1/ConfigMap", "apps/v1/Deployment",
// "example.com/v1alpha1/Widget"). A kind of a built-in group that does not exist is an error
// that names the kind it most likely meant.
func ParseFor(s string) (Kind, error) {
	i := strings.LastIndex(s, "/")
	if i <= 0 || i == len(s)-1 {
		return Kind{}, fmt.Errorf("--for %q: write APIVERSION/KIND, as in v1/ConfigMap or apps/v1/Deployment", s)
	}
	gv, err := schema.ParseGroupVersion(s[:i])
	if err != nil || gv.Version == "" {
		return Kind{}, fmt.Errorf("--for %q: %q is not an apiVersion: write APIVERSION/KIND, as in v1/ConfigMap or apps/v1/Deployment", s, s[:i])
	}
	if gv.Group == "" && strings.Contains(gv.Version, ".") { // example.com/Widget
		return Kind{}, fmt.Errorf("--for %q: %q is an API group without its version: write GROUP/VERSION/KIND, as in %s/v1/%s", s, gv.Version, gv.Version, s[i+1:])
	}
	k := Lookup(gv.WithKind(s[i+1:]))
	if BuiltInGroup(gv.Group) && !k.BuiltIn {
		return Kind{}, fmt.Errorf("--for %q: %s", s, NotBuiltIn(gv.WithKind(s[i+1:])))
	}
	return k, nil
}

// Lookup returns what is known of gvk.
func Lookup(gvk schema.GroupVersionKind) Kind {
	k := Kind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespaced: true}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	k.Resource = plural.Resource
	if _, ok := builtIn()[gvk]; ok {
		k.BuiltIn = true
		k.Namespaced = !clusterScoped[gvk.GroupKind()]
	}
	return k
}

// BuiltInGroup reports whether group is one of the API server's own ("" is core).
func BuiltInGroup(group string) bool {
	for gvk := range builtIn() {
		if gvk.Group == group {
			return true
		}
	}
	return false
}

// Resources are the resources of group's built-in kinds ("" is core), sorted: none for a group
// that is not built in.
func Resources(group string) []string {
	var out []string
	for gvk := range builtIn() {
		if gvk.Group == group {
			out = append(out, Lookup(gvk).Resource)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NotBuiltIn says that gvk, of a built-in group, does not exist, and what was most likely
// meant: "v1 has no kind ConfigMaps: did you mean ConfigMap?".
func NotBuiltIn(gvk schema.GroupVersionKind) string {
	gv := gvk.GroupVersion().String()
	if m := Suggest(gvk); m != "" {
		return fmt.Sprintf("%s has no kind %s: did you mean %s?", gv, gvk.Kind, m)
	}
	return fmt.Sprintf("%s has no kind %s", gv, gvk.Kind)
}

// Suggest returns the built-in kind gvk's kind most likely misspells ("apps/v1 Deployment" when
// the version differs, or the kind is of another group), or "" when none is close.
func Suggest(gvk schema.GroupVersionKind) string {
	if s := suggestIn(gvk, true); s != "" {
		return s
	}
	return suggestIn(gvk, false) // v1 Deployment: apps/v1 Deployment
}

// suggestIn is Suggest among the kinds of gvk's group, or else among the kinds of the same name
// (case aside) and a stable version in other groups.
func suggestIn(gvk schema.GroupVersionKind, sameGroup bool) string {
	best, bestScore := "", 3
	for known := range builtIn() {
		if sameGroup != (known.Group == gvk.Group) {
			continue
		}
		if !sameGroup && (!strings.EqualFold(known.Kind, gvk.Kind) || strings.Contains(known.Version, "beta") || strings.Contains(known.Version, "alpha")) {
			continue
		}
		score := closeness(gvk.Kind, known.Kind)
		name := known.Kind
		if known.Version != gvk.Version || known.Group != gvk.Group {
			score++
			name = known.GroupVersion().String() + " " + known.Kind
		}
		if score < bestScore || score == bestScore && name < best {
			best, bestScore = name, score
		}
	}
	return best
}

// Closest returns the name among names that kind most likely misspells (by edit distance, case
// aside, or a plural), or "" when none is close.
func Closest(kind string, names []string) string {
	best, bestScore := "", 3
	for _, name := range names {
		if score := closeness(kind, name); score < bestScore || score == bestScore && name < best {
			best, bestScore = name, score
		}
	}
	return best
}

// closeness is how far kind is from name: the edit distance, case aside; 0 for name's plural.
func closeness(kind, name string) int {
	if strings.TrimSuffix(strings.ToLower(kind), "s") == strings.ToLower(name) {
		return 0
	}
	return distance(strings.ToLower(kind), strings.ToLower(name))
}

// builtIn is every kind of client-go's scheme that is an object (has metadata), not a list or
// an options type. Built once, on first use, from any goroutine.
var builtIn = sync.OnceValue(func() map[schema.GroupVersionKind]bool {
	m := map[schema.GroupVersionKind]bool{}
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || gvk.Version == "__internal" {
			continue
		}
		if f, ok := t.FieldByName("ObjectMeta"); ok && f.Anonymous {
			m[gvk] = true
		}
	}
	return m
})

// The built-in cluster-scoped kinds (kubectl api-resources --namespaced=false).
var clusterScoped = map[schema.GroupKind]bool{}

func init() {
	for _, gk := range []string{
		"Namespace", "Node", "PersistentVolume", "ComponentStatus",
		"MutatingWebhookConfiguration.admissionregistration.k8s.io", "ValidatingWebhookConfiguration.admissionregistration.k8s.io",
		"ValidatingAdmissionPolicy.admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io",
		"MutatingAdmissionPolicy.admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding.admissionregistration.k8s.io",
		"CustomResourceDefinition.apiextensions.k8s.io", "APIService.apiregistration.k8s.io",
		"TokenReview.authentication.k8s.io", "SelfSubjectReview.authentication.k8s.io",
		"SelfSubjectAccessReview.authorization.k8s.io", "SelfSubjectRulesReview.authorization.k8s.io", "SubjectAccessReview.authorization.k8s.io",
		"CertificateSigningRequest.certificates.k8s.io", "ClusterTrustBundle.certificates.k8s.io",
		"FlowSchema.flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io",
		"IngressClass.networking.k8s.io", "IPAddress.networking.k8s.io", "ServiceCIDR.networking.k8s.io",
		"RuntimeClass.node.k8s.io", "PriorityClass.scheduling.k8s.io",
		"ClusterRole.rbac.authorization.k8s.io", "ClusterRoleBinding.rbac.authorization.k8s.io",
		"CSIDriver.storage.k8s.io", "CSINode.storage.k8s.io", "StorageClass.storage.k8s.io", "VolumeAttachment.storage.k8s.io",
		"VolumeAttributesClass.storage.k8s.io", "DeviceClass.resource.k8s.io", "ResourceSlice.resource.k8s.io",
		"StorageVersion.internal.apiserver.k8s.io",
	} {
		clusterScoped[schema.ParseGroupKind(gk)] = true
	}
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = slices.Min([]int{prev[j] + 1, cur[j-1] + 1, prev[j-1] + cost})
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// String is how wasmrec writes a kind, in logs, errors and output alike: "Deployment.v1.apps",
// "ConfigMap.v1" (kind.version.group, as kubectl writes resources).
func String(apiVersion, kind string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return kind + "." + apiVersion
	}
	s := kind + "." + gv.Version
	if gv.Group != "" {
		s += "." + gv.Group
	}
	return s
}

// GVK is String for a GroupVersionKind.
func GVK(gvk schema.GroupVersionKind) string {
	return String(gvk.GroupVersion().String(), gvk.Kind)
}

// GVKs spells a list of kinds, separated by commas.
func GVKs(gvks []schema.GroupVersionKind) string {
	s := make([]string, len(gvks))
	for i, g := range gvks {
		s[i] = GVK(g)
	}
	return strings.Join(s, ", ")
}
