package plugin

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// ObjectPolicy is what the operator lets plugin objects (Plugin and ClusterPlugin) do: where
// their modules may come from, and bounds on their settings that no object can exceed. The
// operator's own plugins (the host config's) are not bound by it.
type ObjectPolicy struct {
	// Sources are where the modules of plugin objects may come from: registry prefixes
	// ("oci://registry.example.com/platform/"; "oci://" for any registry) and host directories
	// ("/var/lib/wasmrec/modules/", for image layouts and .wasm files). "{namespace}" in a
	// source is a Plugin's own namespace ("oci://registry.example.com/{namespace}/": each team
	// its own repositories; such a source allows no ClusterPlugin). A module elsewhere is
	// refused without being touched. Defaults to none: every plugin object is refused until the
	// operator lists a source.
	Sources []string `json:"sources,omitempty"`
	// MaxModuleSize bounds an object's module, and its maxModuleSize. Defaults to 32Mi: a typed
	// Go module is about 18 MB, and compiling one takes about ten times its size.
	MaxModuleSize *resource.Quantity `json:"maxModuleSize,omitempty"`
	// MaxMemoryLimit bounds an object's memoryLimit (per instance). Defaults to 256Mi.
	MaxMemoryLimit *resource.Quantity `json:"maxMemoryLimit,omitempty"`
	// MaxConcurrentReconciles bounds an object's workers. Defaults to 8.
	MaxConcurrentReconciles int `json:"maxConcurrentReconciles,omitempty"`
	// MaxTimeout bounds an object's reconcile timeout. Defaults to 5m.
	MaxTimeout *metav1.Duration `json:"maxTimeout,omitempty"`
	// MaxShards bounds an object's shards. Defaults to 16.
	MaxShards int `json:"maxShards,omitempty"`
	// MemoryBudget bounds the memory all plugin objects may take together: their instances'
	// (memoryLimit times maxConcurrentReconciles, twice that with a rollout) and their modules'
	// compiled code (wasm.CompilePeak times a module's size while it compiles, wasm.CodeHeld
	// times after). Defaults to 4Gi.
	MemoryBudget *resource.Quantity `json:"memoryBudget,omitempty"`
	// NamespaceMemoryBudget bounds what the Plugins of one namespace may take together, so that
	// one team cannot take the whole budget. Defaults to 1Gi.
	NamespaceMemoryBudget *resource.Quantity `json:"namespaceMemoryBudget,omitempty"`
	// UnitBudget bounds the units of work all plugin objects make together: a plugin object is
	// one unit, or one per shard with shards set. With --share-plugins each unit is a Lease,
	// renewed by every replica that holds or wants it: this bounds what plugin objects add to
	// the API server's Lease traffic. Defaults to 512.
	UnitBudget int `json:"unitBudget,omitempty"`
	// NamespaceUnitBudget bounds the units of one namespace's Plugins, so that one team cannot
	// take the whole budget. Defaults to 64.
	NamespaceUnitBudget int `json:"namespaceUnitBudget,omitempty"`
	// NamespaceCPU is how many guests of one namespace's Plugins may execute at once: each takes
	// one core at most, so a team's plugins together take at most this many of the host's
	// cores, whatever their number, workers or loops. A reconcile waits for a slot within its
	// timeout, and fails past it (retried with backoff; the plugin's status says so once every
	// reconcile fails). Defaults to 1; raise it for teams whose plugins are busy.
	NamespaceCPU int `json:"namespaceCPU,omitempty"`
	// MinPollInterval is the shortest pollInterval an object may set: each poll is a request to
	// its registry, made with the host's credentials. Defaults to 10s.
	MinPollInterval *metav1.Duration `json:"minPollInterval,omitempty"`
	// MinResyncPeriod is the shortest resyncPeriod an object may set: each resync reconciles
	// every object the plugin sees. Defaults to 1m.
	MinResyncPeriod *metav1.Duration `json:"minResyncPeriod,omitempty"`
	// MaxRecordBytes bounds what one object's recordings may take on the host's disk (its
	// record.maxBytes, which it takes if unset). Defaults to 32Mi: with namespaceUnitBudget
	// objects, a team's recordings take at most 2 GiB.
	MaxRecordBytes *resource.Quantity `json:"maxRecordBytes,omitempty"`
}

// Defaults of ObjectPolicy.
var (
	DefaultObjectMaxMemory    = resource.MustParse("256Mi")
	DefaultObjectMaxModule    = resource.MustParse("32Mi")
	DefaultObjectMaxWorkers   = 8
	DefaultObjectMaxTimeout   = 5 * time.Minute
	DefaultObjectMaxShards    = 16
	DefaultObjectMemoryBudget = resource.MustParse("4Gi")
	DefaultNamespaceBudget    = resource.MustParse("1Gi")
	DefaultObjectMinPoll      = 10 * time.Second
	DefaultObjectMinResync    = time.Minute
	DefaultObjectUnitBudget   = 512
	DefaultNamespaceUnits     = 64
	DefaultNamespaceCPU       = 1
	DefaultObjectMaxRecord    = resource.MustParse("32Mi")
)

// WithDefaults returns p with its defaults filled in.
func (p ObjectPolicy) WithDefaults() ObjectPolicy {
	if p.MaxModuleSize == nil {
		q := DefaultObjectMaxModule.DeepCopy()
		p.MaxModuleSize = &q
	}
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
	if p.NamespaceMemoryBudget == nil {
		q := DefaultNamespaceBudget.DeepCopy()
		p.NamespaceMemoryBudget = &q
	}
	if p.MinPollInterval == nil {
		p.MinPollInterval = &metav1.Duration{Duration: DefaultObjectMinPoll}
	}
	if p.MinResyncPeriod == nil {
		p.MinResyncPeriod = &metav1.Duration{Duration: DefaultObjectMinResync}
	}
	if p.MaxRecordBytes == nil {
		q := DefaultObjectMaxRecord.DeepCopy()
		p.MaxRecordBytes = &q
	}
	if p.NamespaceCPU <= 0 {
		p.NamespaceCPU = DefaultNamespaceCPU
	}
	if p.UnitBudget <= 0 {
		p.UnitBudget = DefaultObjectUnitBudget
	}
	if p.NamespaceUnitBudget <= 0 {
		p.NamespaceUnitBudget = DefaultNamespaceUnits
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

// Memory is what a plugin's instances may take together: memoryLimit times workers, twice
// over with a rollout, whose new version runs its own instances beside the live one's.
func (c *Config) Memory() int64 {
	limit := int64(wasm.DefaultMemoryLimit)
	if c.MemoryLimit != nil {
		limit = c.MemoryLimit.Value()
	}
	n := int64(max(c.MaxConcurrentReconciles, 1))
	if c.Rollout != nil {
		n *= 2
	}
	return limit * n
}

// Units is how many units of work the plugin is: one per shard, or one.
func (c *Config) Units() int { return max(c.Shards, 1) }

// Admit refuses settings of a plugin object beyond the policy's bounds, naming the field, its
// value and the limit. what names the object ("Plugin team-a/labeler"); namespace is a Plugin's
// ("" for a ClusterPlugin).
//
// Besides the operator's bounds, an object may not raise what the host's defaults hold down for
// everyone (log rates, call rates, retry pace): it may only lower them.
func (p ObjectPolicy) Admit(what, namespace string, c Config) error {
	p = p.WithDefaults()
	beyond := func(field, value, limit, setting string) error {
		return fmt.Errorf("%s: spec.%s %s is above the operator's limit of %s (%s): lower it, or ask the operator", what, field, value, limit, setting)
	}
	above := func(field string, value, limit float64) error {
		if value <= limit {
			return nil
		}
		return beyond(field, fmt.Sprint(value), fmt.Sprint(limit), "the host's default, which plugin objects may lower only")
	}
	switch {
	case c.MaxModuleSize != nil && c.MaxModuleSize.Cmp(*p.MaxModuleSize) > 0:
		return beyond("maxModuleSize", c.MaxModuleSize.String(), p.MaxModuleSize.String(), "pluginObjects.maxModuleSize in the host config")
	case c.MemoryLimit != nil && c.MemoryLimit.Cmp(*p.MaxMemoryLimit) > 0:
		return beyond("memoryLimit", c.MemoryLimit.String(), p.MaxMemoryLimit.String(), "pluginObjects.maxMemoryLimit in the host config")
	case c.MaxConcurrentReconciles > p.MaxConcurrentReconciles:
		return beyond("maxConcurrentReconciles", fmt.Sprint(c.MaxConcurrentReconciles), fmt.Sprint(p.MaxConcurrentReconciles), "pluginObjects.maxConcurrentReconciles in the host config")
	case c.Timeout != nil && c.Timeout.Duration > p.MaxTimeout.Duration:
		return beyond("timeout", c.Timeout.Duration.String(), p.MaxTimeout.Duration.String(), "pluginObjects.maxTimeout in the host config")
	case c.Record != nil && c.Record.Bytes() > p.MaxRecordBytes.Value():
		return beyond("record.maxBytes", c.Record.MaxBytes.String(), p.MaxRecordBytes.String(), "pluginObjects.maxRecordBytes in the host config")
	case c.Shards > p.MaxShards:
		return beyond("shards", fmt.Sprint(c.Shards), fmt.Sprint(p.MaxShards), "pluginObjects.maxShards in the host config")
	case c.PollInterval != nil && c.PollInterval.Duration < p.MinPollInterval.Duration:
		return fmt.Errorf("%s: spec.pollInterval %s is below the operator's floor of %s (pluginObjects.minPollInterval in the host config): each poll is a request to the registry; raise it", what, c.PollInterval.Duration, p.MinPollInterval.Duration)
	case c.ResyncPeriod != nil && c.ResyncPeriod.Duration < p.MinResyncPeriod.Duration:
		return fmt.Errorf("%s: spec.resyncPeriod %s is below the operator's floor of %s (pluginObjects.minResyncPeriod in the host config): each resync reconciles every object the plugin sees; raise it", what, c.ResyncPeriod.Duration, p.MinResyncPeriod.Duration)
	case c.Interruptible != nil:
		return fmt.Errorf("%s: spec.interruptible is for the operator's own plugins (the host config): remove it", what)
	case c.RateLimiter.BaseDelay != nil && c.RateLimiter.BaseDelay.Duration < controller.DefaultBaseDelay:
		return fmt.Errorf("%s: spec.rateLimiter.baseDelay %s is below the host's default of %s, which plugin objects may raise only: raise it", what, c.RateLimiter.BaseDelay.Duration, controller.DefaultBaseDelay)
	case c.RateLimiter.MaxDelay != nil && c.RateLimiter.MaxDelay.Duration < controller.DefaultMaxDelay:
		return fmt.Errorf("%s: spec.rateLimiter.maxDelay %s is below the host's default of %s, which plugin objects may raise only: raise it", what, c.RateLimiter.MaxDelay.Duration, controller.DefaultMaxDelay)
	}
	for _, err := range []error{
		above("logLimit.linesPerSecond", c.LogLimit.LinesPerSecond, wasm.DefaultLogLinesPerSecond),
		above("logLimit.bytesPerSecond", c.LogLimit.BytesPerSecond, wasm.DefaultLogBytesPerSecond),
		above("logLimit.perReconcile", float64(c.LogLimit.PerReconcile), wasm.DefaultLogPerReconcile),
		above("reads.qps", c.Reads.QPS, DefaultReadQPS),
		above("reads.burst", float64(c.Reads.Burst), DefaultReadBurst),
		above("writes.qps", c.Writes.QPS, DefaultWriteQPS),
		above("writes.burst", float64(c.Writes.Burst), DefaultWriteBurst),
		above("rateLimiter.qps", c.RateLimiter.QPS, controller.DefaultQPS),
		above("rateLimiter.burst", float64(c.RateLimiter.Burst), controller.DefaultBurst),
	} {
		if err != nil {
			return err
		}
	}
	if c.MemoryLimit == nil && wasm.DefaultMemoryLimit > p.MaxMemoryLimit.Value() {
		return fmt.Errorf("%s: the default memoryLimit (%s) is above the operator's limit of %s: set spec.memoryLimit", what, resource.NewQuantity(wasm.DefaultMemoryLimit, resource.BinarySI), p.MaxMemoryLimit)
	}
	return p.AllowsSource(what, namespace, c.Module)
}

// AllowsSource refuses a module that is not from one of the policy's sources, for an object in
// namespace ("" for a ClusterPlugin). It looks at the reference alone: nothing is read or
// dialled, so a refusal tells nothing of the host's files or network. A module it allows from a
// directory is read inside that directory (Dirs): a symbolic link does not lead out of it.
func (p ObjectPolicy) AllowsSource(what, namespace, module string) error {
	sources := p.sourcesFor(namespace)
	if allows(sources, module) {
		return nil
	}
	if clean := cleanModule(module); clean != module && allows(sources, clean) {
		return fmt.Errorf("%s: spec.module %q is not written plainly (a path with ., .. or //, which a link could turn elsewhere): write it as %q, which pluginObjects.sources in the host config allow", what, module, clean)
	}
	allowed := "none yet"
	if len(sources) > 0 {
		allowed = strings.Join(sources, ", ")
	}
	return fmt.Errorf("%s: spec.module %q is not from a source the operator allows for plugin objects (%s; pluginObjects.sources in the host config): %s, or ask the operator", what, module, allowed, whereTo(sources, module))
}

// whereTo says where to put a module that is from no source: under a directory source, with
// its absolute path written plainly, or in an allowed registry.
func whereTo(sources []string, module string) string {
	var dirs, registries bool
	for _, s := range sources {
		if filepath.IsAbs(s) {
			dirs = true
		} else {
			registries = true
		}
	}
	switch {
	case dirs && strings.Contains(module, ".."):
		return "a path with .. is never allowed: put the module under a source directory and name it by its absolute path"
	case dirs && !registries:
		return "put the module under a source directory and name it by its absolute path"
	case dirs:
		return "push the module to an allowed registry, or put it under a source directory and name it by its absolute path"
	}
	return "push the module to an allowed registry"
}

// Dirs are the directories among the sources of an object in namespace: a module file or image
// layout it names is opened inside the one that holds it (Config.SourceDirs).
func (p ObjectPolicy) Dirs(namespace string) []string {
	var dirs []string
	for _, s := range p.sourcesFor(namespace) {
		if filepath.IsAbs(s) {
			dirs = append(dirs, filepath.Clean(s))
		}
	}
	return dirs
}

// sourcesFor are the sources an object in namespace may use: "{namespace}" made its own, and
// sources naming a namespace left out of a ClusterPlugin's.
func (p ObjectPolicy) sourcesFor(namespace string) []string {
	var out []string
	for _, s := range p.Sources {
		switch {
		case !strings.Contains(s, "{namespace}"):
			out = append(out, s)
		case namespace != "":
			out = append(out, strings.ReplaceAll(s, "{namespace}", namespace))
		}
	}
	return out
}

// cleanModule is module with its path cleaned, for a file or an image layout.
func cleanModule(module string) string {
	if dir, reference, ok := oci.ParseLayout(module); ok {
		if filepath.IsAbs(dir) {
			sep := ":"
			if strings.Contains(reference, ":") { // a digest, "sha256:..."
				sep = "@"
			}
			return oci.LayoutPrefix + filepath.Clean(dir) + sep + reference
		}
		return module
	}
	if filepath.IsAbs(module) {
		return filepath.Clean(module)
	}
	return module
}

func allows(sources []string, module string) bool {
	if strings.HasPrefix(module, "oci://") {
		if strings.Contains(module, "/../") || strings.HasSuffix(module, "/..") {
			return false
		}
		for _, s := range sources {
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
	if layout, _, ok := oci.ParseLayout(module); ok {
		dir = layout // read as the pull reads it
	} else if strings.HasPrefix(module, oci.LayoutPrefix) {
		return false
	}
	// A path is taken as written: one that "." or ".." would change, or that is relative,
	// names somewhere else than it seems to.
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return false
	}
	for _, s := range sources {
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
