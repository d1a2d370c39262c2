package plugin

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/host/wasm"
)

// ObjectPolicy is what the operator lets plugin objects (Plugin and ClusterPlugin) do: where
// their modules may come from, and bounds on their settings that no object can exceed. The
// operator's own plugins (the host config's) are not bound by it.
type ObjectPolicy struct {
	// Sources are where the modules of plugin objects may come from: registry prefixes
	// ("oci://registry.example.com/team-a/"; "oci://" for any registry) and host directories
	// ("/var/lib/wasmrec/modules/", for image layouts and .wasm files). A module elsewhere is
	// refused without being touched. Defaults to none: every plugin object is refused until the
	// operator lists a source.
	Sources []string `json:"sources,omitempty"`
	// MaxMemoryLimit bounds an object's memoryLimit (per instance). Defaults to 256Mi.
	MaxMemoryLimit *resource.Quantity `json:"maxMemoryLimit,omitempty"`
	// MaxConcurrentReconciles bounds an object's workers. Defaults to 8.
	MaxConcurrentReconciles int `json:"maxConcurrentReconciles,omitempty"`
	// MaxTimeout bounds an object's reconcile timeout. Defaults to 5m.
	MaxTimeout *metav1.Duration `json:"maxTimeout,omitempty"`
	// MaxShards bounds an object's shards. Defaults to 16.
	MaxShards int `json:"maxShards,omitempty"`
	// MemoryBudget bounds the memory all plugin objects' instances may take together
	// (memoryLimit times maxConcurrentReconciles, summed). Defaults to 4Gi.
	MemoryBudget *resource.Quantity `json:"memoryBudget,omitempty"`
}

// Defaults of ObjectPolicy.
var (
	DefaultObjectMaxMemory    = resource.MustParse("256Mi")
	DefaultObjectMaxWorkers   = 8
	DefaultObjectMaxTimeout   = 5 * time.Minute
	DefaultObjectMaxShards    = 16
	DefaultObjectMemoryBudget = resource.MustParse("4Gi")
)

// WithDefaults returns p with its defaults filled in.
func (p ObjectPolicy) WithDefaults() ObjectPolicy {
	if p.MaxMemoryLimit == nil {
		q := DefaultObjectMaxMemory.DeepCopy()
		p.MaxMemoryLimit = &q
	}
	if p.MaxConcurrentReconciles <= 0 {
		p.MaxConcurrentReconciles = DefaultObjectMaxWorkers
	}
	if p.MaxTimeout == nil {
		p.MaxTimeout = &metav1.Duration{Duration: DefaultObjectMaxTimeout}
	}
	if p.MaxShards <= 0 {
		p.MaxShards = DefaultObjectMaxShards
	}
	if p.MemoryBudget == nil {
		q := DefaultObjectMemoryBudget.DeepCopy()
		p.MemoryBudget = &q
	}
	return p
}

// Validate checks the policy itself.
func (p ObjectPolicy) Validate() error {
	for i, s := range p.Sources {
		if !strings.HasPrefix(s, "oci://") && !filepath.IsAbs(s) {
			return fmt.Errorf("pluginObjects.sources[%d] %q: give a registry prefix (oci://registry/path/) or an absolute directory", i, s)
		}
	}
	return nil
}

// Memory is what a plugin's instances may take together: memoryLimit times workers.
func (c *Config) Memory() int64 {
	limit := int64(wasm.DefaultMemoryLimit)
	if c.MemoryLimit != nil {
		limit = c.MemoryLimit.Value()
	}
	return limit * int64(max(c.MaxConcurrentReconciles, 1))
}

// Admit refuses settings of a plugin object beyond the policy's bounds, naming the field, its
// value and the limit. what names the object ("Plugin team-a/labeler").
func (p ObjectPolicy) Admit(what string, c Config) error {
	p = p.WithDefaults()
	beyond := func(field, value, limit string) error {
		return fmt.Errorf("%s: spec.%s %s is above the operator's limit of %s (pluginObjects.%s in the host config): lower it, or ask the operator", what, field, value, limit, "max"+strings.ToUpper(field[:1])+field[1:])
	}
	switch {
	case c.MemoryLimit != nil && c.MemoryLimit.Cmp(*p.MaxMemoryLimit) > 0:
		return beyond("memoryLimit", c.MemoryLimit.String(), p.MaxMemoryLimit.String())
	case c.MaxConcurrentReconciles > p.MaxConcurrentReconciles:
		return beyond("maxConcurrentReconciles", fmt.Sprint(c.MaxConcurrentReconciles), fmt.Sprint(p.MaxConcurrentReconciles))
	case c.Timeout != nil && c.Timeout.Duration > p.MaxTimeout.Duration:
		return beyond("timeout", c.Timeout.Duration.String(), p.MaxTimeout.Duration.String())
	case c.Shards > p.MaxShards:
		return beyond("shards", fmt.Sprint(c.Shards), fmt.Sprint(p.MaxShards))
	case c.Interruptible != nil:
		return fmt.Errorf("%s: spec.interruptible is for the operator's own plugins (the host config): remove it", what)
	}
	if c.MemoryLimit == nil && wasm.DefaultMemoryLimit > p.MaxMemoryLimit.Value() {
		return fmt.Errorf("%s: the default memoryLimit (%s) is above the operator's limit of %s: set spec.memoryLimit", what, resource.NewQuantity(wasm.DefaultMemoryLimit, resource.BinarySI), p.MaxMemoryLimit)
	}
	return p.AllowsSource(what, c.Module)
}

// AllowsSource refuses a module that is not from one of the policy's sources. It looks at the
// reference alone: nothing is read or dialled, so a refusal tells nothing of the host's files
// or network.
func (p ObjectPolicy) AllowsSource(what, module string) error {
	if p.allows(module) {
		return nil
	}
	allowed := "none yet"
	if len(p.Sources) > 0 {
		allowed = strings.Join(p.Sources, ", ")
	}
	return fmt.Errorf("%s: spec.module %q is not from a source the operator allows for plugin objects (%s; pluginObjects.sources in the host config): push the module to an allowed registry, or ask the operator", what, module, allowed)
}

func (p ObjectPolicy) allows(module string) bool {
	if strings.HasPrefix(module, "oci://") {
		for _, s := range p.Sources {
			if !strings.HasPrefix(s, "oci://") || !strings.HasPrefix(module, s) {
				continue
			}
			// "oci://reg/team-a/" and "oci://reg/team-a" allow oci://reg/team-a/x:v1, not
			// oci://reg/team-ab/x:v1.
			if rest := module[len(s):]; s == "oci://" || strings.HasSuffix(s, "/") || rest == "" || strings.ContainsRune("/:@", rune(rest[0])) {
				return true
			}
		}
		return false
	}
	dir := module // a .wasm file, or the directory of an image layout (oci:dir:tag)
	if layout, ok := strings.CutPrefix(module, "oci:"); ok {
		dir, _, _ = strings.Cut(layout, ":")
	}
	if !filepath.IsAbs(dir) {
		return false
	}
	dir = filepath.Clean(dir)
	for _, s := range p.Sources {
		if !filepath.IsAbs(s) {
			continue
		}
		s = filepath.Clean(s)
		if s == "/" || dir == s || strings.HasPrefix(dir, s+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
