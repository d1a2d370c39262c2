package fake

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
)

// The host calls, with the statuses and messages the host gives (host/plugin/internal/hostcalls),
// over an API server in memory. c.mu is held.

func (c *Cluster) call(fn string, body []byte) ([]byte, error) {
	if c.mapping && fn != abi.ImportGet && fn != abi.ImportList {
		return nil, fail(abi.StatusBadRequest, "%s: a map function may only read (get, list): write from the reconcile it enqueues", fn)
	}
	switch fn {
	case abi.ImportGet:
		return c.get(body)
	case abi.ImportList:
		return c.list(body)
	case abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus:
		return c.write(fn, body)
	case abi.ImportPatch:
		return c.patch(body)
	case abi.ImportDelete:
		return nil, c.delete(body)
	case abi.ImportEvent:
		return nil, c.event(body)
	}
	return nil, fail(abi.StatusBadRequest, "unknown host function %q", fn)
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fail(abi.StatusBadRequest, "the request is not valid JSON for this call: %v", err)
	}
	return nil
}

func (c *Cluster) key(k kindInfo, namespace, name string) objKey {
	if !k.namespaced {
		namespace = ""
	}
	return objKey{k.group, k.kind, namespace, name}
}

func notFound(k kindInfo, name string) error {
	return fail(abi.StatusNotFound, "%s %q not found", k.qualified(), name)
}

func conflict(k kindInfo, name, why string) error {
	return fail(abi.StatusConflict, "Operation cannot be fulfilled on %s %q: %s", k.qualified(), name, why)
}

func invalid(k kindInfo, name, why string) error {
	return fail(abi.StatusInvalid, "%s %q is invalid: %s", k.kind, name, why)
}

const staleRV = "the object has been modified; please apply your changes to the latest version and try again"

// noSubresource is the API server's answer for a status call on a kind without a status
// subresource.
func noSubresource() error {
	return fail(abi.StatusNotFound, "the server could not find the requested resource")
}

// get and list answer JSON whatever encoding the request asks for, as a host does for a kind it
// has no Go types of: the SDK decodes either.
func (c *Cluster) get(body []byte) ([]byte, error) {
	var ref abi.GetRequest
	if err := decode(body, &ref); err != nil {
		return nil, err
	}
	k, err := c.target(ref.APIVersion, ref.Kind, "", "get", ref.Namespace)
	if err != nil {
		return nil, err
	}
	if ref.Name == "" {
		return nil, fail(abi.StatusBadRequest, "get needs a name (list reads many)")
	}
	o, ok := c.objects[c.key(k, ref.Namespace, ref.Name)]
	if !ok {
		return nil, notFound(k, ref.Name)
	}
	return json.Marshal(o)
}

func (c *Cluster) list(body []byte) ([]byte, error) {
	var req abi.ListRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	k, err := c.target(req.APIVersion, req.Kind, "", "list", req.Namespace)
	if err != nil {
		return nil, err
	}
	sel, err := parseSelector(req.LabelSelector)
	if err != nil {
		return nil, fail(abi.StatusBadRequest, "labelSelector %q: %v", req.LabelSelector, err)
	}
	c.learn(req.Indexed)
	items := []any{}
	for _, key := range c.sortedKeys(k.group, k.kind) {
		if req.Namespace != "" && key.namespace != req.Namespace {
			continue
		}
		if key.namespace != "" && !c.policy().InNamespace(key.namespace) {
			continue // a list across namespaces covers the plugin's own
		}
		o := c.objects[key]
		if sel.matches(stringMap(o, "metadata", "labels")) && !c.excludes(o, req.Fields) {
			items = append(items, o)
		}
	}
	return json.Marshal(map[string]any{"items": items})
}

// learn keeps the index values a list request tells, as the host does (by object version; the
// host may forget them, the fake does not).
func (c *Cluster) learn(told []abi.IndexValues) {
	for _, t := range told {
		if c.indexed == nil {
			c.indexed = map[string]indexed{}
		}
		e, ok := c.indexed[t.UID]
		if !ok || e.resourceVersion != t.ResourceVersion {
			e = indexed{t.ResourceVersion, map[string][]string{}}
			c.indexed[t.UID] = e
		}
		e.fields[t.Field] = t.Values
	}
}

// excludes reports whether o lacks one of fields' values, as the host tells: metadata.name and
// metadata.namespace from o, an index field from the values told of o's version. The rest are
// listed, for the guest to test.
func (c *Cluster) excludes(o map[string]any, fields map[string]string) bool {
	e, known := c.indexed[str(o, "metadata", "uid")]
	known = known && e.resourceVersion == str(o, "metadata", "resourceVersion")
	for field, value := range fields {
		switch field {
		case "metadata.name", "metadata.namespace":
			if str(o, "metadata", field[len("metadata."):]) != value {
				return true
			}
		default:
			if values, told := e.fields[field]; known && told && !slices.Contains(values, value) {
				return true
			}
		}
	}
	return false
}

// decodeObject decodes a write's object: a JSON object, less managedFields.
func decodeObject(fn string, body []byte) (map[string]any, error) {
	v, err := decodeJSON(body)
	o, ok := v.(map[string]any)
	if err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("not a JSON object")
		}
		return nil, fail(abi.StatusBadRequest, "%s: the request is not a Kubernetes object: %v", fn, err)
	}
	if md, ok := o["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	return o, nil
}

func (c *Cluster) write(fn string, body []byte) ([]byte, error) {
	body, wo, err := abi.SplitWrite(body)
	if err != nil {
		return nil, fail(abi.StatusBadRequest, "%s: the request is not a Kubernetes object: %v", fn, err)
	}
	o, err := decodeObject(fn, body)
	if err != nil {
		return nil, err
	}
	verb, sub := fn, ""
	if fn == abi.ImportUpdateStatus {
		verb, sub = "update", "status"
	}
	ns, name := str(o, "metadata", "namespace"), str(o, "metadata", "name")
	k, err := c.target(str(o, "apiVersion"), str(o, "kind"), sub, verb, ns)
	if err != nil {
		return nil, err
	}
	if fn != abi.ImportCreate && name == "" {
		return nil, fail(abi.StatusBadRequest, "%s: the object has no metadata.name", fn)
	}
	if _, err := abi.FieldManager(c.name, wo.FieldOwner); err != nil {
		return nil, fail(abi.StatusBadRequest, "%v", err)
	}
	if kind, apiVersion := str(o, "kind"), str(o, "apiVersion"); kind != k.kind { // "configmap": the API server decodes the body by its kind
		if builtinGroups[k.group] {
			_, version, _ := groupVersion(apiVersion)
			return nil, fail(abi.StatusBadRequest, "%s in version %q cannot be handled as a %s: no kind %q is registered for version %q", kind, version, k.kind, kind, apiVersion)
		}
		return nil, fail(abi.StatusInvalid, "%s.%s %q is invalid: kind: Invalid value: %q: must be %s", strings.ToLower(kind), k.group, name, kind, k.kind)
	}
	out, err := c.maybeDry(wo.DryRun, k, func() (map[string]any, error) {
		if fn == abi.ImportCreate {
			return c.create(k, o, true)
		}
		return c.update(k, o, sub)
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// maybeDry runs write, and for a dry run puts the cluster back as it was, as the API server's
// dryRun=All checks a write and answers it without storing anything: the answer keeps the
// resourceVersion the object had, and a created object has none.
func (c *Cluster) maybeDry(dry bool, k kindInfo, write func() (map[string]any, error)) (map[string]any, error) {
	if !dry {
		return write()
	}
	objects, applied, rv := maps.Clone(c.objects), maps.Clone(c.applied), c.rv
	for key, subs := range applied {
		applied[key] = maps.Clone(subs)
	}
	out, err := write()
	c.objects, c.applied, c.rv = objects, applied, rv
	if err != nil || out == nil {
		return out, err
	}
	out = copyMap(out)
	md := meta(out)
	delete(md, "resourceVersion")
	if old, ok := c.objects[c.key(k, str(out, "metadata", "namespace"), str(out, "metadata", "name"))]; ok {
		md["resourceVersion"] = str(old, "metadata", "resourceVersion")
	}
	return out, nil
}

// create stores a new object as the API server does; dropStatus for a create through the
// plugin (the status subresource's fields are not set by a create).
func (c *Cluster) create(k kindInfo, o map[string]any, dropStatus bool) (map[string]any, error) {
	md := meta(o)
	name := str(o, "metadata", "name")
	if name == "" {
		prefix := str(o, "metadata", "generateName")
		if prefix == "" {
			return nil, invalid(k, "", "metadata.name: Required value: name or generateName is required")
		}
		if len(prefix) > 58 {
			prefix = prefix[:58]
		}
		const alphabet = "bcdfghjklmnpqrstvwxz2456789"
		b := []byte(prefix)
		for range 5 {
			b = append(b, alphabet[rand.IntN(len(alphabet))])
		}
		name = string(b)
		md["name"] = name
	}
	if err := validateMeta(k, o); err != nil {
		return nil, err
	}
	if str(o, "metadata", "resourceVersion") != "" {
		// etcd's store refuses it with a plain error: an internal error, which the host
		// answers as unavailable.
		return nil, fail(abi.StatusUnavailable, "resourceVersion should not be set on objects to be created")
	}
	key := c.key(k, str(o, "metadata", "namespace"), name)
	if _, ok := c.objects[key]; ok {
		return nil, fail(abi.StatusAlreadyExists, "%s %q already exists", k.qualified(), name)
	}
	md["uid"] = newUID()
	md["creationTimestamp"] = now()
	md["generation"] = json.Number("1")
	md["resourceVersion"] = c.nextRV()
	delete(md, "deletionTimestamp")
	delete(md, "deletionGracePeriodSeconds")
	if dropStatus && !k.noStatus {
		delete(o, "status")
	}
	c.objects[key] = o
	return o, nil
}

// preconditions checks a write's resourceVersion and uid against the stored object. A custom
// resource's update needs a resourceVersion; a built-in kind's may leave it empty. An update
// (a whole object) of another uid is a conflict; a patch (patched is set) that changes the uid
// is invalid, the uid being immutable.
func preconditions(k kindInfo, name string, o, old map[string]any, needRV, patched bool) error {
	rv := str(o, "metadata", "resourceVersion")
	if _, err := strconv.ParseUint(rv, 10, 64); rv != "" && err != nil {
		// The API server's storage fails to read it: an internal error, which the host answers
		// as unavailable.
		return fail(abi.StatusUnavailable, "%v", err)
	}
	switch {
	case rv == "" && needRV:
		return invalid(k, name, "metadata.resourceVersion: Invalid value: 0: must be specified for an update")
	case rv != "" && rv != str(old, "metadata", "resourceVersion"):
		return conflict(k, name, staleRV)
	}
	switch uid := str(o, "metadata", "uid"); {
	case uid == "" || uid == str(old, "metadata", "uid"):
	case patched:
		return invalid(k, name, fmt.Sprintf("metadata.uid: Invalid value: %q: field is immutable", uid))
	default:
		return conflict(k, name, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, str(old, "metadata", "uid")))
	}
	return nil
}

func (c *Cluster) update(k kindInfo, o map[string]any, sub string) (map[string]any, error) {
	name := str(o, "metadata", "name")
	if sub == "status" && k.noStatus {
		return nil, noSubresource()
	}
	key := c.key(k, str(o, "metadata", "namespace"), name)
	old, ok := c.objects[key]
	if !ok {
		return nil, notFound(k, name)
	}
	if err := preconditions(k, name, o, old, !builtinGroups[k.group], false); err != nil {
		return nil, err
	}
	if sub == "" {
		if err := validateMeta(k, o); err != nil {
			return nil, err
		}
	}
	return c.commit(k, key, old, o, sub)
}

// metaSystem are the metadata fields the API server keeps from the stored object on an update.
var metaSystem = []string{"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "resourceVersion", "name", "namespace"}

// applyIgnored are the metadata fields an applied configuration does not set.
var applyIgnored = slices.Concat(metaSystem, []string{"managedFields", "selfLink", "generateName"})

// commit stores new in place of old as an update of the object (sub "") or of its status
// (sub "status") does: a status write keeps everything but status, another write keeps status
// (every kind with one is taken to have a status subresource); the generation goes up when
// something other than metadata and status changed; an update that changes nothing keeps the
// resourceVersion; an object being deleted goes when its last finalizer does.
func (c *Cluster) commit(k kindInfo, key objKey, old, new map[string]any, sub string) (map[string]any, error) {
	new = copyMap(new)
	if sub == "status" {
		res := copyMap(old)
		setOrDelete(res, "status", new["status"])
		new = res
	} else if !k.noStatus {
		setOrDelete(new, "status", deepCopy(old["status"]))
	}
	nm, om := meta(new), meta(old)
	delete(nm, "managedFields")
	// ObjectMeta's maps and lists are omitempty: the API server stores an empty one as none
	// (a merge patch that removes the last label leaves no labels).
	for _, f := range []string{"labels", "annotations", "finalizers", "ownerReferences"} {
		switch v := nm[f].(type) {
		case map[string]any:
			if len(v) == 0 {
				delete(nm, f)
			}
		case []any:
			if len(v) == 0 {
				delete(nm, f)
			}
		}
	}
	for _, f := range metaSystem {
		setOrDelete(nm, f, deepCopy(om[f]))
	}
	deleting := om["deletionTimestamp"] != nil
	if deleting {
		for _, f := range stringList(new, "metadata", "finalizers") {
			if !slices.Contains(stringList(old, "metadata", "finalizers"), f) {
				return nil, invalid(k, key.name, fmt.Sprintf("metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{%q}", f))
			}
		}
	}
	if specChanged(old, new) {
		nm["generation"] = json.Number(fmt.Sprint(int64At(old, "metadata", "generation") + 1))
	}
	if jsonv.Equal(old, new) {
		return old, nil
	}
	nm["resourceVersion"] = c.nextRV()
	if deleting && len(stringList(new, "metadata", "finalizers")) == 0 {
		delete(c.objects, key)
		delete(c.applied, key)
		return new, nil
	}
	c.objects[key] = new
	return new, nil
}

// specChanged reports a change of anything but apiVersion, kind, metadata and status.
func specChanged(old, new map[string]any) bool {
	skip := func(f string) bool { return f == "apiVersion" || f == "kind" || f == "metadata" || f == "status" }
	for f, v := range new {
		if !skip(f) && !jsonv.Equal(v, old[f]) {
			return true
		}
	}
	for f := range old {
		if _, ok := new[f]; !ok && !skip(f) {
			return true
		}
	}
	return false
}

func (c *Cluster) patch(body []byte) ([]byte, error) {
	var req abi.PatchRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	switch req.Type {
	case abi.PatchMerge, abi.PatchJSON, abi.PatchStrategic, abi.PatchApply:
	default:
		return nil, fail(abi.StatusBadRequest, "patch type %q: use merge, json, strategic or apply", req.Type)
	}
	if req.Subresource != "" && req.Subresource != "status" {
		return nil, fail(abi.StatusBadRequest, "subresource %q: only status can be patched", req.Subresource)
	}
	k, err := c.target(req.APIVersion, req.Kind, req.Subresource, "patch", req.Namespace)
	if err != nil {
		return nil, err
	}
	if req.Name == "" {
		return nil, fail(abi.StatusBadRequest, "patch needs the object's name")
	}
	if req.Subresource == "status" && k.noStatus {
		return nil, noSubresource()
	}
	if abi.PatchSetsManagedFields(req.Type, req.Patch) {
		return nil, fail(abi.StatusBadRequest, "the patch writes metadata.managedFields, which the API server keeps and no plugin may write: leave them out")
	}
	if _, err := abi.FieldManager(c.name, req.FieldOwner); err != nil {
		return nil, fail(abi.StatusBadRequest, "%v", err)
	}
	if req.Type == abi.PatchStrategic && !builtinGroups[k.group] {
		return nil, fail(abi.StatusBadRequest, "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
	}
	out, err := c.maybeDry(req.DryRun, k, func() (map[string]any, error) {
		if req.Type == abi.PatchApply {
			return c.apply(k, req)
		}
		return c.patchObject(k, req)
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func (c *Cluster) patchObject(k kindInfo, req abi.PatchRequest) (map[string]any, error) {
	var patched any
	key := c.key(k, req.Namespace, req.Name)
	old, exists := c.objects[key]
	if !exists {
		return nil, notFound(k, req.Name)
	}
	switch req.Type {
	case abi.PatchJSON:
		ops, err := decodeJSONPatch(req.Patch)
		if err != nil {
			return nil, fail(abi.StatusBadRequest, "%v", err)
		}
		if patched, err = applyJSONPatch(old, ops); err != nil {
			return nil, fail(abi.StatusInvalid, "%v", err)
		}
	default: // merge, strategic
		p, err := decodeJSON(req.Patch)
		pm, isMap := p.(map[string]any)
		if err != nil || !isMap {
			return nil, fail(abi.StatusBadRequest, "invalid JSON document: the patch is not a JSON object")
		}
		if req.Type == abi.PatchStrategic {
			if patched, err = strategicPatch(old, pm, metaOf(req.APIVersion, req.Kind)); err != nil {
				if _, answered := err.(*apiError); answered {
					return nil, err
				}
				return nil, fail(abi.StatusBadRequest, "%v", err)
			}
		} else {
			patched = mergePatch(old, p)
		}
	}
	o, ok := patched.(map[string]any)
	if !ok {
		return nil, fail(abi.StatusInvalid, "the patched object is not a JSON object")
	}
	switch {
	case str(o, "metadata", "name") != req.Name:
		return nil, fail(abi.StatusBadRequest, "the name of the object (%s) does not match the name on the URL (%s)", str(o, "metadata", "name"), req.Name)
	case str(o, "metadata", "namespace") != str(old, "metadata", "namespace"):
		return nil, fail(abi.StatusBadRequest, "the namespace of the provided object does not match the namespace sent on the request")
	case str(o, "kind") != str(old, "kind") || str(o, "apiVersion") != str(old, "apiVersion"):
		return nil, fail(abi.StatusInvalid, "%s %q is invalid: patch: the patch changes the object's apiVersion or kind (to %s %s)", k.kind, req.Name, str(o, "apiVersion"), str(o, "kind"))
	}
	if err := preconditions(k, req.Name, o, old, false, true); err != nil {
		return nil, err
	}
	if req.Subresource == "" {
		if err := validateMeta(k, o); err != nil {
			return nil, err
		}
	}
	return c.commit(k, key, old, o, req.Subresource)
}

// apply is server-side apply, minimal: the fields of the applied object are merged into the
// object (maps field by field, lists replaced whole), the fields the plugin applied last time
// and no longer does are removed, and a missing object is created (not through the status
// subresource). The fake knows no other field manager: it never reports an apply conflict, and
// force changes nothing.
func (c *Cluster) apply(k kindInfo, req abi.PatchRequest) (map[string]any, error) {
	v, err := decodeJSON(req.Patch)
	cfg, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil, fail(abi.StatusBadRequest, "error decoding YAML: the applied configuration is not a JSON object")
	}
	group, _, _ := groupVersion(str(cfg, "apiVersion"))
	switch {
	case str(cfg, "apiVersion") == "" || str(cfg, "kind") == "":
		return nil, fail(abi.StatusBadRequest, "apiVersion and kind must be set in the applied configuration")
	case group != k.group || str(cfg, "kind") != k.kind:
		return nil, fail(abi.StatusBadRequest, "the applied configuration is a %s %s, not a %s", str(cfg, "apiVersion"), str(cfg, "kind"), k.kind)
	case str(cfg, "metadata", "name") != "" && str(cfg, "metadata", "name") != req.Name:
		return nil, fail(abi.StatusBadRequest, "the name of the object (%s) does not match the name on the URL (%s)", str(cfg, "metadata", "name"), req.Name)
	case str(cfg, "metadata", "namespace") != "" && str(cfg, "metadata", "namespace") != req.Namespace:
		return nil, fail(abi.StatusBadRequest, "the namespace of the provided object does not match the namespace sent on the request")
	}
	sub := req.Subresource
	keep := func(p []string) bool {
		switch {
		case len(p) == 1 && (p[0] == "apiVersion" || p[0] == "kind"):
			return false
		case len(p) >= 2 && p[0] == "metadata" && slices.Contains(applyIgnored, p[1]):
			return false
		case sub == "status":
			return p[0] == "status"
		}
		return p[0] != "status" || k.noStatus
	}
	cur := map[string]bool{}
	fieldPaths(cfg, nil, keep, cur)
	key := c.key(k, req.Namespace, req.Name)
	old, exists := c.objects[key]
	if !exists {
		if sub == "status" {
			return nil, notFound(k, req.Name)
		}
		if uid := str(cfg, "metadata", "uid"); uid != "" {
			return nil, conflict(k, req.Name, fmt.Sprintf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
		}
		o := map[string]any{"apiVersion": str(cfg, "apiVersion"), "kind": k.kind, "metadata": map[string]any{"name": req.Name}}
		if k.namespaced {
			meta(o)["namespace"] = req.Namespace
		}
		applyFields(o, cfg, nil, cur)
		out, err := c.create(k, o, true)
		if err != nil {
			return nil, err
		}
		c.applied[key] = map[string]map[string]bool{sub: cur}
		return out, nil
	}
	if err := preconditions(k, req.Name, cfg, old, false, true); err != nil {
		return nil, err
	}
	o := copyMap(old)
	applyFields(o, cfg, c.applied[key][sub], cur)
	if sub == "" {
		if err := validateMeta(k, o); err != nil {
			return nil, err
		}
	}
	out, err := c.commit(k, key, old, o, sub)
	if err != nil {
		return nil, err
	}
	if _, still := c.objects[key]; still {
		if c.applied[key] == nil {
			c.applied[key] = map[string]map[string]bool{}
		}
		c.applied[key][sub] = cur
	}
	return out, nil
}

var propagationPolicies = []string{"", "Orphan", "Background", "Foreground"}

func (c *Cluster) delete(body []byte) error {
	var req abi.DeleteRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	k, err := c.target(req.APIVersion, req.Kind, "", "delete", req.Namespace)
	if err != nil {
		return err
	}
	if req.Name == "" {
		return fail(abi.StatusBadRequest, "delete needs the object's name: a plugin deletes one object at a time")
	}
	if !slices.Contains(propagationPolicies, req.PropagationPolicy) {
		return fail(abi.StatusInvalid, "DeleteOptions \"\" is invalid: propagationPolicy: Unsupported value: %q: supported values: \"Foreground\", \"Background\", \"Orphan\"", req.PropagationPolicy)
	}
	key := c.key(k, req.Namespace, req.Name)
	old, ok := c.objects[key]
	if !ok {
		return notFound(k, req.Name)
	}
	if req.UID != "" && req.UID != str(old, "metadata", "uid") {
		// The API server names the kind here, not the resource.
		return fail(abi.StatusConflict, "Operation cannot be fulfilled on %s %q: the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated",
			strings.TrimSuffix(k.kind+"."+k.group, "."), req.Name, req.UID, str(old, "metadata", "uid"))
	}
	if req.DryRun {
		return nil
	}
	if len(stringList(old, "metadata", "finalizers")) == 0 {
		delete(c.objects, key)
		delete(c.applied, key)
		return nil
	}
	if nested(old, "metadata", "deletionTimestamp") != nil {
		return nil // already being deleted
	}
	o := copyMap(old)
	md := meta(o)
	md["deletionTimestamp"] = now()
	md["deletionGracePeriodSeconds"] = json.Number("0")
	md["generation"] = json.Number(fmt.Sprint(int64At(old, "metadata", "generation") + 1))
	md["resourceVersion"] = c.nextRV()
	c.objects[key] = o
	return nil
}

func (c *Cluster) event(body []byte) error {
	var req abi.EventRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	if req.Type != "Normal" && req.Type != "Warning" {
		return fail(abi.StatusBadRequest, "event type %q: use Normal or Warning", req.Type)
	}
	if req.Reason == "" {
		return fail(abi.StatusBadRequest, "an event needs a reason")
	}
	// The host's bounds (ABI.md), the API server's for events.k8s.io.
	if len(req.Reason) > 128 {
		return fail(abi.StatusBadRequest, "an event's reason is %d bytes, over the limit of %d: use a short CamelCase word, and say the rest in the message", len(req.Reason), 128)
	}
	if len(req.Message) > 1024 {
		return fail(abi.StatusBadRequest, "an event's message is %d bytes, over the limit of %d: say less, or log the rest", len(req.Message), 1024)
	}
	if err := c.policy().Require("an event", []abi.Rule{{Resource: "events", Verb: "create"}}); err != nil {
		return fail(abi.StatusForbidden, "forbidden: %v", err)
	}
	forGroup, forVersion, _ := groupVersion(c.manifest.For.APIVersion)
	ref := abi.ObjectRef{APIVersion: c.manifest.For.APIVersion, Kind: c.manifest.For.Kind}
	if c.req != nil {
		ref.Namespace, ref.Name = c.req.Namespace, c.req.Name
	}
	if req.Object != nil {
		ref = *req.Object
	}
	group, version, ok := groupVersion(ref.APIVersion)
	if !ok || ref.Kind == "" || ref.Name == "" {
		return fail(abi.StatusBadRequest, "an event's object needs apiVersion, kind and name (it has %q, %q, %q)", ref.APIVersion, ref.Kind, ref.Name)
	}
	ns := cmp.Or(ref.Namespace, "default")
	if !c.policy().InNamespace(ns) {
		return fail(abi.StatusForbidden, "forbidden: the event would be recorded in namespace %q, outside plugin %q's namespaces %v", ns, c.name, c.namespaces)
	}
	e := Event{Object: ref, Namespace: ns, Type: req.Type, Reason: req.Reason, Message: req.Message}
	if group == forGroup && version == forVersion && ref.Kind == c.manifest.For.Kind {
		if o, ok := c.objects[objKey{group, ref.Kind, ref.Namespace, ref.Name}]; ok {
			e.UID = str(o, "metadata", "uid")
		}
	}
	c.events = append(c.events, e)
	return nil
}
