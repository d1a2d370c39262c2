package fake

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// Cluster is an API server and a wasmrec host in memory, for one plugin: its manifest, what the
// operator granted it (by default, what the manifest asks for), its namespaces (by default all),
// the objects, and the Events and log lines the plugin made. It is safe for concurrent use.
type Cluster struct {
	mu         sync.Mutex
	manifest   wasmrec.Manifest
	name       string // the plugin's name, in messages
	grant      []abi.Permission
	namespaces []string
	kinds      map[string]kindInfo // registered, by "group/Kind"
	objects    map[objKey]map[string]any
	applied    map[objKey]map[string]map[string]bool // per subresource ("" or "status"), the paths the plugin last applied
	rv         int64
	indexed    map[string]indexed // the index values lists told, by uid
	events     []Event
	logs       []LogLine
	logf       func(format string, args ...any)
	beforeCall func(call string, req []byte)
	req        *wasmrec.Request // the request Reconcile is running
	mapping    bool             // Map is running: writes are refused
}

type objKey struct{ group, kind, namespace, name string }

// indexed are the index values told of one version of an object.
type indexed struct {
	resourceVersion string
	fields          map[string][]string
}

// Event is a Kubernetes Event the plugin recorded.
type Event struct {
	// Object is what the Event is about: the object given to EventFor, or for Event the object
	// being reconciled (the manifest's For kind, named by the request).
	Object wasmrec.ObjectRef
	// UID is the object's UID when the host would set it: for an object of the For kind that
	// exists. Empty otherwise.
	UID string
	// Namespace is where the Event is recorded: the object's, or "default" for a
	// cluster-scoped one.
	Namespace string
	// Type is "Normal" or "Warning".
	Type    string
	Reason  string
	Message string
}

// LogLine is a line the plugin logged through wasmrec.Log during Reconcile.
type LogLine struct {
	// Level is abi.LogDebug, LogInfo, LogWarn or LogError.
	Level   int32
	Message string
	// KeysAndValues alternate, as decoded from the JSON the SDK sent: keys are strings, values
	// what encoding/json decodes (float64, string, bool, nil, []any, map[string]any). Keys are
	// the plugin's: the host writes those it uses itself ("request"...) as "plugin.<key>", and
	// takes the value of "error" at error level as the line's error; the fake does neither.
	KeysAndValues []any
	// Request is the request being reconciled.
	Request wasmrec.Request
}

// Value returns the value logged for key.
func (l LogLine) Value(key string) (any, bool) {
	for i := 0; i+1 < len(l.KeysAndValues); i += 2 {
		if l.KeysAndValues[i] == key {
			return l.KeysAndValues[i+1], true
		}
	}
	return nil, false
}

// String is the line as text: `info reconciled app=demo/web generation=2`.
func (l LogLine) String() string {
	var b strings.Builder
	switch {
	case l.Level <= abi.LogDebug:
		b.WriteString("debug")
	case l.Level == abi.LogInfo:
		b.WriteString("info")
	case l.Level == abi.LogWarn:
		b.WriteString("warn")
	default:
		b.WriteString("error")
	}
	b.WriteString(" " + l.Message)
	for i := 0; i < len(l.KeysAndValues); i += 2 {
		fmt.Fprintf(&b, " %v=", l.KeysAndValues[i])
		if i+1 < len(l.KeysAndValues) {
			b.WriteString(formatValue(l.KeysAndValues[i+1]))
		}
	}
	return b.String()
}

// NewCluster returns a cluster for a plugin with manifest m, holding objs (see Put). The
// permissions wasmrec.AddPermissions added (the module's RBAC markers) join m's, as they join
// the manifest the host reads. It panics if the manifest is not valid, as wasmrec.Register does.
func NewCluster(m wasmrec.Manifest, objs ...*wasmrec.Object) *Cluster {
	m.Permissions = append(m.Permissions[:len(m.Permissions):len(m.Permissions)], wasmrec.AddedPermissions()...)
	if err := m.Validate(); err != nil {
		panic("fake: " + err.Error())
	}
	c := &Cluster{
		manifest: m,
		name:     cmp.Or(m.Name, "plugin"),
		grant:    m.Permissions,
		kinds:    map[string]kindInfo{},
		objects:  map[objKey]map[string]any{},
		applied:  map[objKey]map[string]map[string]bool{},
	}
	c.Put(objs...)
	return c
}

// RegisterKind tells the cluster a kind's resource name (plural, "" for Plural(kind)) and scope:
// for a custom resource whose plural is not the usual English one, or which is cluster-scoped
// (other kinds of groups that are not the API server's own are taken to be namespaced). It also
// makes a kind of a built-in group served. Call it before the objects of the kind are used.
func (c *Cluster) RegisterKind(group, kind, resource string, namespaced bool) *Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kinds[group+"/"+kind] = kindInfo{group: group, kind: kind, resource: cmp.Or(resource, Plural(kind)), namespaced: namespaced}
	return c
}

// SetGrant sets what the operator granted the plugin (its config's permissions); by default
// the manifest's own permissions. Calls need both. A manifest that asks for more than the grant
// makes Reconcile fail, as the host refuses such a module.
func (c *Cluster) SetGrant(perms ...wasmrec.Permission) *Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grant = slices.Clone(perms)
	return c
}

// SetNamespaces limits the plugin to namespaces, as the operator's config does: calls naming
// another namespace are forbidden, lists across namespaces skip the others' objects.
func (c *Cluster) SetNamespaces(namespaces ...string) *Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.namespaces = slices.Clone(namespaces)
	return c
}

// LogTo also writes each log line the plugin makes to logf (t.Logf, say).
func (c *Cluster) LogTo(logf func(format string, args ...any)) *Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logf = logf
	return c
}

// BeforeCall runs fn before each host call the plugin makes, with the call's name
// (abi.ImportGet, abi.ImportPatch...) and its JSON request, outside the cluster's lock: fn may
// change the cluster (Put, Remove), as another writer does between a plugin's read and its
// write, to test what the plugin makes of it (controller-runtime's fake client takes
// interceptor.Funcs for this). nil removes it.
func (c *Cluster) BeforeCall(fn func(call string, req []byte)) *Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.beforeCall = fn
	return c
}

// Client returns a Client whose calls this cluster answers as the host would for the plugin.
func (c *Cluster) Client() *wasmrec.Client { return wasmrec.NewClientWith(transport{c}) }

// reconciling makes Reconciles run one at a time, across clusters: wasmrec.Log is global.
var reconciling sync.Mutex

// Reconcile runs r for req as the host would: the object req names is the one Events without an
// object are about, and wasmrec.Log's lines are captured (Logs). It fails without running r if
// the host would refuse the plugin: a manifest asking for more than the grant, watching a kind
// (for, owns, watches) without list and watch on it, or one a built-in group does not have. Reconciles of all clusters run one at
// a time, since wasmrec.Log is global.
func (c *Cluster) Reconcile(ctx context.Context, r wasmrec.Reconciler, req wasmrec.Request) (wasmrec.Result, error) {
	c.mu.Lock()
	err := c.checkManifest()
	c.mu.Unlock()
	if err != nil {
		return wasmrec.Result{}, fmt.Errorf("fake: the host would refuse this plugin: %w", err)
	}
	reconciling.Lock()
	defer reconciling.Unlock()
	defer wasmrec.SetLogTransport(transport{c})()
	c.mu.Lock()
	c.req = &req
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.req = nil
		c.mu.Unlock()
	}()
	return r.Reconcile(ctx, req)
}

// Map runs fn, a map function of the plugin (a MapWatch's) given the object to map, as the host
// would run it: reads are answered, and every write is refused with bad request, as the host
// refuses a map's writes; wasmrec.Log's lines are captured (Logs). It returns what fn returns:
//
//	reqs := cluster.Map(func() []wasmrec.Request { return r.configMapUsers(ctx, &cm) })
func (c *Cluster) Map(fn func() []wasmrec.Request) []wasmrec.Request {
	reconciling.Lock()
	defer reconciling.Unlock()
	defer wasmrec.SetLogTransport(transport{c})()
	c.mu.Lock()
	c.mapping = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.mapping = false
		c.mu.Unlock()
	}()
	return fn()
}

// Put stores objects as they are, as a test or another controller would write them (no
// permission check): creating them, or replacing them if they exist. It fills in what the API
// server sets (uid, creationTimestamp, generation 1) when missing, and gives each a new
// resourceVersion. It panics on an object without apiVersion, kind and metadata.name, or with a
// namespace against its kind's known scope.
func (c *Cluster) Put(objs ...*wasmrec.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, obj := range objs {
		o, err := normalize(obj.Object)
		if err != nil {
			panic(fmt.Sprintf("fake: Put: %v", err))
		}
		apiVersion, kind, ns, name := str(o, "apiVersion"), str(o, "kind"), str(o, "metadata", "namespace"), str(o, "metadata", "name")
		group, _, ok := groupVersion(apiVersion)
		if !ok || apiVersion == "" || kind == "" || name == "" {
			panic(fmt.Sprintf("fake: Put: an object needs apiVersion, kind and metadata.name (it has %q, %q, %q)", apiVersion, kind, name))
		}
		if k, ok := c.lookupKind(group, kind); ok {
			_, registered := c.kinds[group+"/"+kind]
			switch {
			case !k.namespaced && ns != "":
				panic(fmt.Sprintf("fake: Put: %s %s is cluster-scoped: it has namespace %q", apiVersion, kind, ns))
			case k.namespaced && ns == "" && (registered || builtinGroups[group]):
				panic(fmt.Sprintf("fake: Put: %s %s %q is namespaced: give it a namespace", apiVersion, kind, name))
			}
		}
		md := meta(o)
		delete(md, "managedFields")
		if str(o, "metadata", "uid") == "" {
			md["uid"] = newUID()
		}
		if str(o, "metadata", "creationTimestamp") == "" {
			md["creationTimestamp"] = now()
		}
		if int64At(o, "metadata", "generation") == 0 {
			md["generation"] = json.Number("1")
		}
		md["resourceVersion"] = c.nextRV()
		key := objKey{group, kind, ns, name}
		c.objects[key] = o
		delete(c.applied, key)
	}
}

// Remove deletes an object at once, as a test would (no finalizers, no permission check); false
// if there was none.
func (c *Cluster) Remove(apiVersion, kind, namespace, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	group, _, _ := groupVersion(apiVersion)
	key := objKey{group, kind, namespace, name}
	_, ok := c.objects[key]
	delete(c.objects, key)
	delete(c.applied, key)
	return ok
}

// Get returns a copy of an object (namespace "" for a cluster-scoped one), as the Client would
// decode it. Objects are kept by API group and kind: any version of the group finds them.
func (c *Cluster) Get(apiVersion, kind, namespace, name string) (*wasmrec.Object, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	group, _, _ := groupVersion(apiVersion)
	o, ok := c.objects[objKey{group, kind, namespace, name}]
	if !ok {
		return nil, false
	}
	return public(o), true
}

// Objects returns copies of the objects of a kind, sorted by namespace then name.
func (c *Cluster) Objects(apiVersion, kind string) []*wasmrec.Object {
	c.mu.Lock()
	defer c.mu.Unlock()
	group, _, _ := groupVersion(apiVersion)
	var out []*wasmrec.Object
	for _, key := range c.sortedKeys(group, kind) {
		out = append(out, public(c.objects[key]))
	}
	return out
}

// Events returns the Events the plugin recorded, oldest first.
func (c *Cluster) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// Logs returns the lines the plugin logged through wasmrec.Log during Reconcile, oldest first.
func (c *Cluster) Logs() []LogLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.logs)
}

func (c *Cluster) sortedKeys(group, kind string) []objKey {
	var keys []objKey
	for k := range c.objects {
		if k.group == group && k.kind == kind {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b objKey) int {
		return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
	})
	return keys
}

func (c *Cluster) nextRV() string {
	c.rv++
	return fmt.Sprint(c.rv)
}

func newUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }

// transport is the Cluster as the SDK's wasmrec.Transport.
type transport struct{ c *Cluster }

// maxRequest bounds a call's request and response, as the host does.
const maxRequest = 16 << 20

func (t transport) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	return t.c.Call(ctx, fn, req)
}

// Call answers one host call as the host would, at the level of the ABI: fn is the import's
// name (abi.ImportGet, abi.ImportPatch...), req its JSON request (abi/ABI.md), and it returns
// the status and the response: the call's answer, or a message saying what went wrong. It is
// what a Client's calls come down to; call it to serve a plugin that does not use the Go SDK,
// such as a module run by a WebAssembly runtime (wasmrec test does), from inside Reconcile so
// that an Event without an object is about the object being reconciled. Calls are checked
// against the manifest and the grant as the Client's are.
func (c *Cluster) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	if len(req) > maxRequest {
		return abi.StatusTooLarge, fmt.Appendf(nil, "%s: request of %d bytes exceeds %d", fn, len(req), maxRequest)
	}
	if ctx != nil && ctx.Err() != nil {
		return abi.StatusTimeout, []byte(fn + ": the reconcile's context is done: " + ctx.Err().Error())
	}
	c.mu.Lock()
	before := c.beforeCall
	c.mu.Unlock()
	if before != nil {
		before(fn, req)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, err := c.call(fn, req)
	if err != nil {
		if e, ok := err.(*apiError); ok {
			return e.status, []byte(e.msg)
		}
		return abi.StatusInternal, []byte(err.Error())
	}
	if len(resp) > maxRequest {
		return abi.StatusTooLarge, fmt.Appendf(nil, "%s: response of %d bytes exceeds %d", fn, len(resp), maxRequest)
	}
	return abi.StatusOK, resp
}

func (t transport) Log(level int32, line []byte) {
	l := LogLine{Level: level, Message: string(line)}
	if msg, kv, ok := strings.Cut(string(line), "\x00"); ok {
		// As the host reads it: what is not one JSON array stays text, the NUL as a space.
		var pairs []any
		d := json.NewDecoder(strings.NewReader(kv))
		if err := d.Decode(&pairs); err != nil || d.More() {
			l.Message = strings.ReplaceAll(string(line), "\x00", " ")
		} else {
			l.Message = msg
			for i := 0; i < len(pairs); i += 2 {
				key, ok := pairs[i].(string)
				if !ok {
					key = fmt.Sprint(pairs[i])
				}
				var v any = wasmrec.Missing
				if i+1 < len(pairs) {
					v = pairs[i+1]
				}
				l.KeysAndValues = append(l.KeysAndValues, key, v)
			}
		}
	}
	c := t.c
	c.mu.Lock()
	if c.req != nil {
		l.Request = *c.req
	}
	c.logs = append(c.logs, l)
	logf := c.logf
	c.mu.Unlock()
	if logf != nil {
		logf("%s", l)
	}
}
