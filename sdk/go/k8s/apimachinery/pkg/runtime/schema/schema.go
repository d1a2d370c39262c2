package schema

import "strings"

// GroupVersion is an API group and version: apps/v1, or v1 for the core group.
type GroupVersion struct {
	Group   string
	Version string
}

// String is the apiVersion: "group/version", or "version" for the core group.
func (gv GroupVersion) String() string {
	if gv.Group == "" {
		return gv.Version
	}
	return gv.Group + "/" + gv.Version
}

// WithKind is the kind in this group and version.
func (gv GroupVersion) WithKind(kind string) GroupVersionKind {
	return GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}
}

// WithResource is the resource in this group and version.
func (gv GroupVersion) WithResource(resource string) GroupVersionResource {
	return GroupVersionResource{Group: gv.Group, Version: gv.Version, Resource: resource}
}

// Empty reports the zero GroupVersion.
func (gv GroupVersion) Empty() bool { return gv.Group == "" && gv.Version == "" }

// ParseGroupVersion reads an apiVersion: "apps/v1", "v1".
func ParseGroupVersion(apiVersion string) (GroupVersion, error) {
	if apiVersion == "" || apiVersion == "/" {
		return GroupVersion{}, nil
	}
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return GroupVersion{Version: apiVersion}, nil
	}
	if strings.Contains(version, "/") {
		return GroupVersion{}, &parseError{apiVersion}
	}
	return GroupVersion{Group: group, Version: version}, nil
}

type parseError struct{ apiVersion string }

func (e *parseError) Error() string {
	return "unexpected GroupVersion string: " + e.apiVersion
}

// GroupVersionKind names a kind.
type GroupVersionKind struct {
	Group   string
	Version string
	Kind    string
}

// GroupVersion is the kind's group and version.
func (gvk GroupVersionKind) GroupVersion() GroupVersion {
	return GroupVersion{Group: gvk.Group, Version: gvk.Version}
}

// GroupKind is the kind's group and kind.
func (gvk GroupVersionKind) GroupKind() GroupKind { return GroupKind{Group: gvk.Group, Kind: gvk.Kind} }

// ToAPIVersionAndKind is the kind as TypeMeta holds it.
func (gvk GroupVersionKind) ToAPIVersionAndKind() (apiVersion, kind string) {
	return gvk.GroupVersion().String(), gvk.Kind
}

// Empty reports the zero GroupVersionKind.
func (gvk GroupVersionKind) Empty() bool { return gvk == GroupVersionKind{} }

// String is "group/version, Kind=kind", as apimachinery writes it.
func (gvk GroupVersionKind) String() string {
	return gvk.Group + "/" + gvk.Version + ", Kind=" + gvk.Kind
}

// FromAPIVersionAndKind is the kind TypeMeta names; an apiVersion that does not parse gives a
// GroupVersionKind of the kind alone.
func FromAPIVersionAndKind(apiVersion, kind string) GroupVersionKind {
	gv, err := ParseGroupVersion(apiVersion)
	if err != nil {
		return GroupVersionKind{Kind: kind}
	}
	return gv.WithKind(kind)
}

// GroupKind names a kind across versions.
type GroupKind struct {
	Group string
	Kind  string
}

// String is "Kind.group", or "Kind" for the core group.
func (gk GroupKind) String() string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

// GroupVersionResource names a resource.
type GroupVersionResource struct {
	Group    string
	Version  string
	Resource string
}

// GroupResource names a resource across versions.
type GroupResource struct {
	Group    string
	Resource string
}
