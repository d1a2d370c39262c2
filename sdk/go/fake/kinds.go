package fake

import (
	"fmt"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
)

// kindInfo is what the fake knows of a kind: what the host's RESTMapper and the API server
// would say.
type kindInfo struct {
	group, kind string
	resource    string // plural, lowercase
	namespaced  bool
	// noStatus: a built-in kind without a status subresource (ConfigMap): status calls on it are
	// not found, as the API server answers for an unknown subresource.
	noStatus bool
}

// builtinGroups are the API server's own groups: their kinds are known (a kind of one of them
// not listed is served by nothing: bad request), strategic merge patch works on them, and an
// update may leave resourceVersion empty. Every other group is a custom resource's.
var builtinGroups = map[string]bool{}

// builtinKinds are the built-in kinds, by "group/Kind", with their flags: c for cluster-scoped,
// s for no status subresource.
var builtinKinds = func() map[string]string {
	m := map[string]string{}
	for group, kinds := range map[string]string{
		"":                             "Binding/s ComponentStatus/cs ConfigMap/s Endpoints/s Event/s LimitRange/s Namespace/c Node/c PersistentVolume/c PersistentVolumeClaim Pod PodTemplate/s ReplicationController ResourceQuota Secret/s Service ServiceAccount/s",
		"apps":                         "ControllerRevision/s DaemonSet Deployment ReplicaSet StatefulSet",
		"batch":                        "CronJob Job",
		"autoscaling":                  "HorizontalPodAutoscaler",
		"policy":                       "PodDisruptionBudget",
		"networking.k8s.io":            "Ingress IngressClass/cs NetworkPolicy/s IPAddress/cs ServiceCIDR/c",
		"rbac.authorization.k8s.io":    "ClusterRole/cs ClusterRoleBinding/cs Role/s RoleBinding/s",
		"storage.k8s.io":               "CSIDriver/cs CSINode/cs CSIStorageCapacity/s StorageClass/cs VolumeAttachment/c VolumeAttributesClass/cs",
		"coordination.k8s.io":          "Lease/s",
		"discovery.k8s.io":             "EndpointSlice/s",
		"scheduling.k8s.io":            "PriorityClass/cs",
		"node.k8s.io":                  "RuntimeClass/cs",
		"certificates.k8s.io":          "CertificateSigningRequest/c",
		"admissionregistration.k8s.io": "MutatingWebhookConfiguration/cs ValidatingWebhookConfiguration/cs ValidatingAdmissionPolicy/c ValidatingAdmissionPolicyBinding/cs",
		"apiextensions.k8s.io":         "CustomResourceDefinition/c",
		"apiregistration.k8s.io":       "APIService/c",
		"events.k8s.io":                "Event/s",
		"flowcontrol.apiserver.k8s.io": "FlowSchema/c PriorityLevelConfiguration/c",
		"resource.k8s.io":              "DeviceClass/cs ResourceClaim ResourceClaimTemplate/s ResourceSlice/cs",
	} {
		builtinGroups[group] = true
		for _, k := range strings.Fields(kinds) {
			kind, flags, _ := strings.Cut(k, "/")
			m[group+"/"+kind] = flags
		}
	}
	return m
}()

// Plural returns the resource name the fake gives a kind: lowercase, plural by the usual English
// rules ("ConfigMap" configmaps, "NetworkPolicy" networkpolicies, "Gateway" gateways, "Ingress"
// ingresses, "Box" boxes, "Patch" patches, "Mesh" meshes), with "Endpoints" endpoints. A CRD
// whose plural differs needs Cluster.RegisterKind.
func Plural(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case k == "":
		return ""
	case k == "endpoints":
		return k
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsRune("aeiou", rune(k[len(k)-2])):
		return k[:len(k)-1] + "ies"
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "z"),
		strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	}
	return k + "s"
}

// lookupKind resolves a kind as the host's RESTMapper would: a registered kind, a built-in one,
// or, in another group, a custom resource (namespaced, plural by Plural). ok is false for a
// kind of a built-in group that the API server does not serve ("v1 Deployment"). As client-go's
// discovery mapper, which the host's is built on, it also knows a kind spelled in lowercase
// ("configmap"), and answers with the kind as the API server spells it.
func (c *Cluster) lookupKind(group, kind string) (kindInfo, bool) {
	key := group + "/" + kind
	if k, ok := c.kinds[key]; ok {
		return k, true
	}
	if flags, ok := builtinKinds[key]; ok {
		return kindInfo{group: group, kind: kind, resource: Plural(kind),
			namespaced: !strings.Contains(flags, "c"), noStatus: strings.Contains(flags, "s")}, true
	}
	if known := c.spelled(group, kind); known != "" {
		return c.lookupKind(group, known)
	}
	if builtinGroups[group] {
		return kindInfo{}, false
	}
	return kindInfo{group: group, kind: kind, resource: Plural(kind), namespaced: true}, true
}

// spelled returns the kind of group that kind, all in lowercase, names: a built-in or registered
// one, one the manifest names, or the kind of an object held. "" if kind is not all lowercase or
// names none.
func (c *Cluster) spelled(group, kind string) string {
	if kind != strings.ToLower(kind) {
		return ""
	}
	var known []string
	for key := range builtinKinds {
		known = append(known, key)
	}
	for key := range c.kinds {
		known = append(known, key)
	}
	for _, w := range append(append([]abi.Watch{c.manifest.For}, c.manifest.Owns...), c.manifest.Watches...) {
		if g, _, ok := groupVersion(w.APIVersion); ok {
			known = append(known, g+"/"+w.Kind)
		}
	}
	for key := range c.objects {
		known = append(known, key.group+"/"+key.kind)
	}
	for _, key := range known {
		if g, k, _ := strings.Cut(key, "/"); g == group && k != kind && strings.ToLower(k) == kind {
			return k
		}
	}
	return ""
}

// qualified names a resource in messages as the API server does: "configmaps", "apps.demo.wasmrec.dev".
func (k kindInfo) qualified() string {
	if k.group == "" {
		return k.resource
	}
	return k.resource + "." + k.group
}

// notBuiltIn says that a kind of a built-in group does not exist, and what was most likely
// meant: "v1 has no kind ConfigMaps: did you mean ConfigMap?".
func notBuiltIn(group, version, kind string) string {
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	msg := fmt.Sprintf("%s has no kind %s", gv, kind)
	for key := range builtinKinds {
		g, known, _ := strings.Cut(key, "/")
		if g == group && (strings.EqualFold(known, kind) || strings.EqualFold(known, strings.TrimSuffix(kind, "s"))) {
			return msg + ": did you mean " + known + "?"
		}
	}
	return msg
}
