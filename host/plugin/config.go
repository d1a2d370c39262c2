package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/plugin/internal/modsource"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/signature"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/configcheck"
)

// HostConfig is the file `wasmrec run --config` reads.
type HostConfig struct {
	// Plugins to run.
	Plugins []Config `json:"plugins"`
	// Impersonate, if set, makes every plugin's writes and events act as the plugin's own
	// ServiceAccount (named after the plugin, in this namespace), and checks at load and at
	// every swap that the API server lets it read what its grant allows. The API server's RBAC
	// then bounds each plugin as well as the host's checks do. The host needs the impersonate
	// verb on those ServiceAccounts; `wasmrec rbac` prints the rest.
	Impersonate *Impersonation `json:"impersonate,omitempty"`
	// PluginObjects is what the operator lets Plugin and ClusterPlugin objects do: where their
	// modules may come from, and bounds on their settings.
	PluginObjects ObjectPolicy `json:"pluginObjects,omitempty"`
	// Signatures, if set, is who must have signed every module this host runs, and the trusted
	// root keyless signatures are checked under.
	Signatures HostSignatures `json:"signatures,omitempty"`
}

// Impersonation says where the plugins' ServiceAccounts are.
type Impersonation struct {
	// Namespace holds one ServiceAccount per plugin, named as the plugin.
	Namespace string `json:"namespace"`
}

// Config is one plugin's settings, chosen by the operator.
type Config struct {
	// Name identifies the plugin in logs, metrics and events, and is its field manager.
	// Lowercase letters, digits and dashes.
	Name string `json:"name"`
	// Module is where the module comes from: the path of a .wasm file (relative to the config
	// file), "oci://registry/repository:tag" (or @sha256:...), or "oci:dir:tag" for an OCI
	// image-layout directory.
	Module string `json:"module"`
	// PollInterval is how often a module from a registry tag is checked for a new digest.
	// Defaults to 30s; modules pinned by digest and files are not polled (files are watched).
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
	// Permissions granted. The module's manifest must ask for no more.
	Permissions []abi.Permission `json:"permissions"`
	// Namespaces, if set, limits every watch of the plugin to these namespaces.
	Namespaces []string `json:"namespaces,omitempty"`
	// MaxConcurrentReconciles is the number of workers and instances. Defaults to 1.
	MaxConcurrentReconciles int `json:"maxConcurrentReconciles,omitempty"`

	// Shards splits the plugin's objects among replicas that share plugins (run
	// --share-plugins): each shard is held by one replica at a time, which caches and reconciles
	// only that shard's objects. A namespaced plugin is split by namespace, a cluster-scoped one
	// by the uid of its For objects. 0 or 1: not split. A host that does not share plugins runs
	// them whole.
	Shards int `json:"shards,omitempty"`
	// RateLimiter paces retries of failed requests.
	RateLimiter RateLimiterConfig `json:"rateLimiter,omitempty"`
	// ResyncPeriod, if set, reconciles every object of the For kind the plugin sees again this
	// often (each period 0-10% longer, so that plugins started together do not resync
	// together), as controller-runtime's SyncPeriod does: for a controller whose world changes
	// where no watch tells it. Unset, only the host's informers resync, every 10h; their
	// resync is an update event that the For kind's predicates see, and GenerationChanged drops.
	ResyncPeriod *metav1.Duration `json:"resyncPeriod,omitempty"`
	// Timeout bounds one reconcile. Defaults to 30s.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Interruptible lets the timeout interrupt a guest that loops. Defaults to true; with false
	// a guest that loops holds its worker and its instance until it returns (the plugin's swaps
	// and unload do not wait for it; shutdown ends at its graceful timeout). Use false only for
	// code that must never be stopped half-way.
	Interruptible *bool `json:"interruptible,omitempty"`
	// MemoryLimit caps one instance's memory. Defaults to 128Mi.
	MemoryLimit *resource.Quantity `json:"memoryLimit,omitempty"`
	// MaxModuleSize bounds the module's size: a larger one is refused before it is read whole,
	// at load and at every swap. Defaults to 64Mi (pluginObjects.maxModuleSize, 32Mi, for
	// plugin objects). The host's memory follows a module's size: compiling one takes about ten
	// times its size, and its machine code stays.
	MaxModuleSize *resource.Quantity `json:"maxModuleSize,omitempty"`
	// RecycleAbove replaces an instance whose memory grew past this. Defaults to half the limit.
	RecycleAbove *resource.Quantity `json:"recycleAbove,omitempty"`
	// IdleTimeout closes an instance that has reconciled nothing for this long, and gives its
	// memory back: an idle plugin holds no instance, and its next reconcile starts one.
	// Defaults to 2m; 0s keeps idle instances for ever.
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
	// CodeIdleTimeout lets go of the plugin's compiled module once it has had no instance for
	// this long; its next reconcile loads it again from the compilation cache. Defaults to 10m;
	// 0s keeps it for ever.
	CodeIdleTimeout *metav1.Duration `json:"codeIdleTimeout,omitempty"`
	// Record says which reconciles the host records, for `wasmrec replay`: none (the default),
	// failures (errors, traps, timeouts), a sample of them (and every failure), or all. A
	// recording holds everything the plugin read, its objects included, and is kept in the
	// host's recordings directory (run --recordings-dir) within maxBytes, the oldest dropped
	// first. While a plugin records, each of its instances holds what it saw since it started
	// (at most 8 MiB: then it is replaced), from which any of its reconciles replays exactly.
	Record *recording.Policy `json:"record,omitempty"`
	// Snapshots starts the plugin's instances from a copy of the first one's memory right
	// after its initialisation, instead of running it again in each. Defaults to true; set
	// false for a plugin whose initialisation draws what must differ between instances (a
	// random seed it keeps: math/rand's in a Go guest).
	Snapshots *bool `json:"snapshots,omitempty"`
	// Writes limits the plugin's writes to the API server (create, update, patch, delete,
	// events). Defaults to 5000 qps, burst 10000: a bound on a plugin that spins, far above
	// what a normal controller writes (controller-runtime patching 10000 ConfigMaps with 2
	// workers writes about 750/s against a local API server; the API server's priority and
	// fairness paces a busy controller first).
	Writes CallLimit `json:"writes,omitempty"`
	// Reads limits the plugin's reads (get, list), served from the host's cache. Defaults to
	// 5000 qps, burst 10000: far above what a controller reads, a bound on one that spins.
	Reads CallLimit `json:"reads,omitempty"`
	// LogLimit bounds what the plugin's stdout, stderr and log calls put in the host log.
	// Defaults to 1000 lines/s and 1 MiB/s (bursts of twice that), and 64 KiB per reconcile.
	LogLimit wasm.LogLimit `json:"logLimit,omitempty"`
	// Signatures, if set, is who must have signed the plugin's modules, besides whom the host
	// config's signatures name: a module that is not is refused before it is compiled, at load
	// and at every swap (a tag moved, a file changed), and the running one keeps serving.
	Signatures *signature.Policy `json:"signatures,omitempty"`
	// Rollout, if set, is how a new module version comes in: first a shadow run beside the live
	// version (its writes sent with dryRun=All), then a growing share of the keys, each step
	// judged against the live version's figures; a version that does worse is rolled back at
	// once and not tried again until its source changes. Without it a new version takes every
	// key at once.
	Rollout *RolloutConfig `json:"rollout,omitempty"`

	// Origin says where the settings come from, for a clash of names: "Plugin object \"x\"",
	// say. Empty: the host config.
	Origin string `json:"-"`
	// ServiceAccount, if set, is who the plugin acts as, whatever HostConfig.Impersonate says:
	// its writes and events are made as this ServiceAccount, and each of its reads from the
	// host's caches is first reviewed with the API server for it. Plugin objects set it.
	ServiceAccount *ServiceAccountRef `json:"-"`
	// SourceDirs, if set, are the directories the plugin's module files and image layouts must
	// lie in: each is opened inside the one that holds its path, and ".." or a symbolic link
	// out of it is refused. A plugin object's are the operator's directory sources.
	SourceDirs []string `json:"-"`
	// CPU, if set, is the share of the host's cores the plugin's guests run within, with the
	// other plugins given it: a plugin object's is its namespace's (pluginObjects.namespaceCPU).
	CPU *wasm.CPUShare `json:"-"`
	// Code, if set, is charged for compiling each of the plugin's modules and for its compiled
	// code while the plugin holds it (the live version, a rollout's candidate, versions kept
	// for a swap back): a plugin object's is its share of the memory budgets. A module that
	// does not fit is not compiled, and is tried again later (ReasonOverBudget).
	// The values of its field indexes are charged to it too, or to what its ForIndex method
	// returns, if it has one.
	Code wasm.CodeBudget `json:"-"`
	// Hooks are told what happens to the plugin once it is loaded.
	Hooks Hooks `json:"-"`
	// Confined keeps the plugin inside Namespaces: cluster-scoped kinds are out of its reach
	// (watches, reads and writes alike). A namespaced Plugin object's plugin is confined to its
	// namespace.
	Confined bool `json:"-"`
}

// ServiceAccountRef names a ServiceAccount.
type ServiceAccountRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// User is the ServiceAccount's user name: system:serviceaccount:namespace:name.
func (r ServiceAccountRef) User() string { return ServiceAccountUser(r.Namespace, r.Name) }

func (c *Config) originName() string {
	if c.Origin == "" {
		return "the host config"
	}
	return c.Origin
}

// RateLimiterConfig is the retry backoff: per key exponential, and an overall bucket.
type RateLimiterConfig struct {
	// BaseDelay defaults to 5ms.
	BaseDelay *metav1.Duration `json:"baseDelay,omitempty"`
	// MaxDelay defaults to 1000s.
	MaxDelay *metav1.Duration `json:"maxDelay,omitempty"`
	// QPS defaults to 10.
	QPS float64 `json:"qps,omitempty"`
	// Burst defaults to 100.
	Burst int `json:"burst,omitempty"`
}

// CallLimit is a token bucket for one plugin's host calls of one kind (reads or writes).
type CallLimit struct {
	// QPS defaults to 5000.
	QPS float64 `json:"qps,omitempty"`
	// Burst defaults to 10000.
	Burst int `json:"burst,omitempty"`
}

// Defaults.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultWriteQPS   = 5000
	DefaultWriteBurst = 10000
	DefaultReadQPS    = 5000
	DefaultReadBurst  = 10000
)

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// objectNameRE is the name of a namespaced Plugin object's plugin: namespace.name.
var objectNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// LoadHostConfig reads a host config file; module, key and trusted root paths are made
// relative to its directory.
// Unknown fields are errors.
func LoadHostConfig(path string) (*HostConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var hc HostConfig
	if err := yaml.UnmarshalStrict(data, &hc); err != nil {
		// The decoder stops at the first mistake and names Go types: say each with its line,
		// its field and the form it takes.
		if explained := configcheck.File("config "+path, data, reflect.TypeFor[HostConfig]()); explained != nil {
			return nil, explained
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	relative := func(p string) string {
		if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "oci:") || strings.Contains(p, "-----BEGIN") {
			return p
		}
		return filepath.Join(filepath.Dir(path), p)
	}
	for i := range hc.Plugins {
		hc.Plugins[i].Module = relative(hc.Plugins[i].Module)
		if s := hc.Plugins[i].Signatures; s != nil {
			for j := range s.Keys {
				s.Keys[j] = relative(s.Keys[j])
			}
		}
	}
	hc.Signatures.TrustedRoot = relative(hc.Signatures.TrustedRoot)
	for j := range hc.Signatures.Keys {
		hc.Signatures.Keys[j] = relative(hc.Signatures.Keys[j])
	}
	// Each mistake is said with the line of its setting, or else of its plugin's entry.
	line := func(n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf("line %d: ", n)
	}
	where := configLines{
		plugin: func(i int, err error) string {
			var fe *fieldError
			if errors.As(err, &fe) {
				path := []any{"plugins", i}
				for _, key := range strings.Split(fe.field, ".") {
					path = append(path, key)
				}
				if n := configcheck.Line(data, path...); n > 0 {
					return line(n)
				}
			}
			return line(configcheck.Line(data, "plugins", i))
		},
		impersonate:   line(configcheck.Line(data, "impersonate", "namespace")),
		pluginObjects: line(configcheck.Line(data, "pluginObjects")),
	}
	if errs := hc.validate(where); len(errs) > 0 {
		for i, err := range errs {
			errs[i] = fmt.Errorf("config %s: %w", path, err)
		}
		return nil, errors.Join(errs...)
	}
	return &hc, nil
}

// configLines say where in a config file a mistake is: "line 7: ", or "" where unknown.
type configLines struct {
	plugin                     func(i int, err error) string // a mistake of plugins[i]
	impersonate, pluginObjects string
}

// Validate checks every plugin and that names are unique.
func (hc *HostConfig) Validate() error {
	return errors.Join(hc.validate(configLines{plugin: func(int, error) string { return "" }})...)
}

// validate is Validate's mistakes, each said where.
func (hc *HostConfig) validate(where configLines) []error {
	var errs []error
	if im := hc.Impersonate; im != nil && !nameRE.MatchString(im.Namespace) {
		errs = append(errs, fmt.Errorf("%simpersonate.namespace %q: give the namespace of the plugins' ServiceAccounts", where.impersonate, im.Namespace))
	}
	if err := hc.PluginObjects.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%s%w", where.pluginObjects, err))
	}
	seen := map[string]bool{}
	for i, p := range hc.Plugins {
		if err := p.Validate(); err != nil {
			// Each of its mistakes on a line of its own, said where.
			for _, err := range each(err) {
				errs = append(errs, fmt.Errorf("%splugins[%d]: %w", where.plugin(i, err), i, err))
			}
		}
		if seen[p.Name] {
			used := at("name", fmt.Errorf("name %q is used twice", p.Name))
			errs = append(errs, fmt.Errorf("%splugins[%d]: %w", where.plugin(i, used), i, used))
		}
		seen[p.Name] = true
	}
	return errs
}

// A fieldError is a mistake of one of a plugin's settings: field is its path in the plugin's
// entry ("timeout", "rollout.replay"), for the line that says where it is.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// at is err, a mistake of the setting at field.
func at(field string, err error) error { return &fieldError{field: field, err: err} }

// each is err's errors, if errors.Join made it, or err itself (none for nil).
func each(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return joined.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// Validate checks one plugin's settings.
func (c *Config) Validate() error {
	var errs []error
	if !nameRE.MatchString(c.Name) && !(c.Confined && objectNameRE.MatchString(c.Name)) {
		errs = append(errs, at("name", fmt.Errorf("name %q: use lowercase letters, digits and dashes (at most 63)", c.Name)))
	}
	if c.Module == "" {
		errs = append(errs, at("module", fmt.Errorf("plugin %q: module is required (the path of a .wasm file)", c.Name)))
	}
	if c.Shards < 0 || c.Shards > MaxShards {
		errs = append(errs, at("shards", fmt.Errorf("plugin %q: shards %d: shards must be between 0 and %d (0 or 1: not split)", c.Name, c.Shards, MaxShards)))
	}
	if c.MaxConcurrentReconciles < 0 {
		errs = append(errs, at("maxConcurrentReconciles", fmt.Errorf("plugin %q: maxConcurrentReconciles must not be negative", c.Name)))
	}
	if c.Timeout != nil && c.Timeout.Duration <= 0 {
		errs = append(errs, at("timeout", fmt.Errorf("plugin %q: timeout %s: use a positive duration, like 30s, or leave it unset for the default %s", c.Name, c.Timeout.Duration, DefaultTimeout)))
	}
	if c.ResyncPeriod != nil && c.ResyncPeriod.Duration < time.Second {
		errs = append(errs, at("resyncPeriod", fmt.Errorf("plugin %q: resyncPeriod %s: use 1s or more, or leave it unset for none beyond the host's", c.Name, c.ResyncPeriod.Duration)))
	}
	// Below a second, a plugin would start an instance, or load its code, for nearly every
	// reconcile: the host's CPU, spent at the word of whoever writes the setting.
	if c.IdleTimeout != nil && c.IdleTimeout.Duration != 0 && c.IdleTimeout.Duration < time.Second {
		errs = append(errs, at("idleTimeout", fmt.Errorf("plugin %q: idleTimeout %s: use 1s or more (0s keeps idle instances for ever)", c.Name, c.IdleTimeout.Duration)))
	}
	if c.CodeIdleTimeout != nil && c.CodeIdleTimeout.Duration != 0 && c.CodeIdleTimeout.Duration < time.Second {
		errs = append(errs, at("codeIdleTimeout", fmt.Errorf("plugin %q: codeIdleTimeout %s: use 1s or more (0s keeps the compiled module for ever)", c.Name, c.CodeIdleTimeout.Duration)))
	}
	if c.MemoryLimit != nil && c.MemoryLimit.Value() < 1<<20 {
		errs = append(errs, at("memoryLimit", fmt.Errorf("plugin %q: memoryLimit %s is below 1Mi", c.Name, c.MemoryLimit)))
	}
	// A WebAssembly memory addresses 4Gi at most: a limit above it would say what no guest gets.
	if c.MemoryLimit != nil && c.MemoryLimit.Value() > 4<<30 {
		errs = append(errs, at("memoryLimit", fmt.Errorf("plugin %q: memoryLimit %s is above 4Gi, the most a WebAssembly memory addresses: use 4Gi or less", c.Name, c.MemoryLimit)))
	}
	limit := resource.NewQuantity(wasm.DefaultMemoryLimit, resource.BinarySI)
	if c.MemoryLimit != nil {
		limit = c.MemoryLimit
	}
	if c.RecycleAbove != nil && c.RecycleAbove.Cmp(*limit) > 0 {
		errs = append(errs, at("recycleAbove", fmt.Errorf("plugin %q: recycleAbove %s is above the memoryLimit %s, so no instance would be recycled: use at most the limit, or leave it unset for half of it", c.Name, c.RecycleAbove, limit)))
	}
	if c.MaxModuleSize != nil && c.MaxModuleSize.Value() < 1<<10 {
		errs = append(errs, at("maxModuleSize", fmt.Errorf("plugin %q: maxModuleSize %s is below 1Ki", c.Name, c.MaxModuleSize)))
	}
	if c.RateLimiter.QPS < 0 || c.RateLimiter.Burst < 0 || c.Writes.QPS < 0 || c.Writes.Burst < 0 || c.Reads.QPS < 0 || c.Reads.Burst < 0 {
		errs = append(errs, fmt.Errorf("plugin %q: rate limits must not be negative", c.Name))
	}
	grant := abi.Manifest{For: abi.Watch{APIVersion: "v1", Kind: "x"}, Permissions: c.Permissions}
	if err := grant.Validate(); err != nil {
		errs = append(errs, at("permissions", fmt.Errorf("plugin %q: permissions: %w", c.Name, err)))
	}
	if c.Record != nil {
		for _, err := range each(c.Record.Check("record")) {
			field := "record"
			if se := (*recording.SettingError)(nil); errors.As(err, &se) {
				field += "." + se.Setting
			}
			errs = append(errs, at(field, fmt.Errorf("plugin %q: %w", c.Name, err)))
		}
	}
	if c.Rollout != nil {
		if err := c.Rollout.Validate(); err != nil {
			errs = append(errs, at("rollout", fmt.Errorf("plugin %q: %w", c.Name, err)))
		}
		if c.Rollout.Replay != nil && (c.Record == nil || !c.Record.On()) {
			errs = append(errs, at("rollout.replay", fmt.Errorf("plugin %q: rollout.replay runs a new version on the live one's recordings: set record (mode failures, sample or all), or leave rollout.replay out", c.Name)))
		}
	}
	if c.Signatures != nil {
		if err := c.Signatures.Validate(c.Origin == ""); err != nil {
			errs = append(errs, at("signatures", fmt.Errorf("plugin %q: signatures: %w", c.Name, err)))
		}
	}
	return errors.Join(errs...)
}

// OCIRef returns the registry or layout reference of the module, if it comes from one.
func (c *Config) OCIRef() (string, bool) { return modsource.OCIRef(c.Module) }

// DefaultMaxModuleSize is a plugin's MaxModuleSize when none is set.
var DefaultMaxModuleSize = resource.MustParse("64Mi")

// bounds are what the plugin's module may be read from, and how much of it.
func (c *Config) bounds() modsource.Bounds {
	size := DefaultMaxModuleSize.Value()
	if c.MaxModuleSize != nil {
		size = c.MaxModuleSize.Value()
	}
	return modsource.Bounds{Dirs: c.SourceDirs, MaxSize: size}
}

func (c *Config) pollInterval() time.Duration {
	if c.PollInterval == nil || c.PollInterval.Duration <= 0 {
		return 30 * time.Second
	}
	return c.PollInterval.Duration
}

// ReconcileTimeout is the bound on one reconcile: Timeout, or DefaultTimeout.
func (c *Config) ReconcileTimeout() time.Duration {
	if c.Timeout == nil {
		return DefaultTimeout
	}
	return c.Timeout.Duration
}

func quantity(q *resource.Quantity) uint64 {
	if q == nil {
		return 0
	}
	return uint64(q.Value())
}

// Hooks are told what happens to a loaded plugin, each when it happens; a nil hook is not told.
// They are given at load, in Config, and do not change after. Each may be called with one of the
// plugin's locks held, as it says: none may block, or call the plugin's methods that change it
// (Swap, Promote, Abort, Close).
type Hooks struct {
	// OnSwap is told of every swap attempt, with the plugin's swap lock held.
	OnSwap func(SwapEvent)
	// OnRollout is told when a rollout starts, moves on a step or ends. It is called with the
	// plugin's swap lock held: it must not block or call the plugin's swap methods.
	OnRollout func(RolloutEvent)
	// OnRunning is told when the controller starts (true) or stops.
	OnRunning func(bool)
	// OnUnavailable is told Unavailable's new lines whenever they change (none: the plugin has
	// all it needs again), in order, with the lock that orders them held, from whatever found
	// the change: the cache's goroutine, a reconcile's read, an event's mapping, a swap (under
	// the swap lock), the controller's start or the warmer's. It must not block (enqueueing the
	// Plugin object whose status says it is what it is for).
	OnUnavailable func([]string)
	// OnFailing is told what Failing says when it changes from "" or back to it, from a
	// reconcile's goroutine or a map's (an informer's event handler): it must not block.
	OnFailing func(string)
	// OnDropped is told, at most once a minute, that the plugin's map function named an object
	// the plugin may not reconcile, which was not enqueued: which one and why, as the log says
	// each. It is called from an informer's event handler and must not block.
	OnDropped func(string)
	// OnIndexRefused is told when the memory budget refuses a version's field index a charge
	// (true) and when it takes one again (false), for the serving version or a rollout's
	// candidate, with the index's lock held: it must not block (IndexRefused says which).
	OnIndexRefused func(refused bool)
}
