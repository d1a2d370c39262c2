package pluginobjects

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wasmrec/wasmrec/host/plugin"
)

// ConfigOf returns the settings a plugin object gives its plugin, and whether it is paused. A
// Plugin's plugin acts as spec.serviceAccountName of its namespace and is confined to that
// namespace; a ClusterPlugin's acts as spec.serviceAccount and reaches spec.namespaces (all if
// none). Unknown fields, and fields only the operator may set, are refused.
func ConfigOf(u *unstructured.Unstructured) (cfg plugin.Config, paused bool, err error) {
	raw, _ := json.Marshal(u.Object["spec"])
	spec, err := specOf(describe(u), raw)
	if err != nil {
		return plugin.Config{}, false, err
	}
	return configOf(u, spec)
}

// specOf decodes a plugin object's spec from its JSON, refusing unknown fields.
func specOf(what string, raw []byte) (pluginSpec, error) {
	if len(raw) == 0 {
		raw = []byte("null")
	}
	var spec pluginSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return pluginSpec{}, fmt.Errorf("%s: spec is not a plugin's settings: %v: fix the object", what, err)
	}
	return spec, nil
}

// configOf is ConfigOf of u's spec, decoded.
func configOf(u *unstructured.Unstructured, spec pluginSpec) (cfg plugin.Config, paused bool, err error) {
	what := describe(u)
	cfg = spec.Config
	cfg.Origin = what
	if ns := u.GetNamespace(); ns != "" {
		cfg.Name = PluginName(ns, u.GetName())
		switch {
		case spec.ServiceAccount != nil:
			return cfg, false, fmt.Errorf("%s: spec.serviceAccount is a ClusterPlugin's: a Plugin acts as spec.serviceAccountName, a ServiceAccount of its own namespace", what)
		case len(cfg.Namespaces) > 0:
			return cfg, false, fmt.Errorf("%s: spec.namespaces is a ClusterPlugin's: a Plugin reaches its own namespace only", what)
		case spec.ServiceAccountName == "":
			return cfg, false, fmt.Errorf("%s: spec.serviceAccountName is required: the ServiceAccount of namespace %s the plugin acts as", what, ns)
		}
		cfg.ServiceAccount = &plugin.ServiceAccountRef{Namespace: ns, Name: spec.ServiceAccountName}
		cfg.Namespaces, cfg.Confined = []string{ns}, true
	} else {
		cfg.Name = u.GetName()
		switch {
		case spec.ServiceAccountName != "":
			return cfg, false, fmt.Errorf("%s: spec.serviceAccountName is a Plugin's: a ClusterPlugin names spec.serviceAccount {namespace, name}", what)
		case spec.ServiceAccount == nil || spec.ServiceAccount.Namespace == "" || spec.ServiceAccount.Name == "":
			return cfg, false, fmt.Errorf("%s: spec.serviceAccount {namespace, name} is required: the ServiceAccount the plugin acts as", what)
		}
		cfg.ServiceAccount = spec.ServiceAccount
	}
	if sa := cfg.ServiceAccount; len(validation.IsDNS1123Subdomain(sa.Name)) > 0 || len(validation.IsDNS1123Label(sa.Namespace)) > 0 {
		return cfg, false, fmt.Errorf("%s: ServiceAccount %s/%s: not a valid name", what, sa.Namespace, sa.Name)
	}
	return cfg, spec.Paused, nil
}

// pluginSpec is a plugin object's spec: a Config without its name, who it acts as, and paused.
type pluginSpec struct {
	plugin.Config                                // its fields are the spec's; name comes from the object
	ServiceAccountName string                    `json:"serviceAccountName,omitempty"` // Plugin
	ServiceAccount     *plugin.ServiceAccountRef `json:"serviceAccount,omitempty"`     // ClusterPlugin
	Paused             bool                      `json:"paused,omitempty"`
}

// settingsOf is what of spec starts the plugin anew when it changes: all but module and paused.
func settingsOf(spec pluginSpec) string {
	spec.Module, spec.Paused = "", false
	b, _ := json.Marshal(spec)
	return string(b)
}
