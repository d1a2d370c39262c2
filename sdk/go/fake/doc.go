// Package fake is a cluster in memory for testing wasmrec plugins with go test, as
// controller-runtime's fake client is for controllers: it answers a wasmrec.Client's calls with
// the statuses the wasmrec host gives (abi/ABI.md), checks them against the plugin's manifest as
// the host does, and records the plugin's Events and log lines.
//
//	c := fake.NewCluster(manifest, app)              // the manifest the plugin registers
//	r := &reconciler{client: client.From(c.Client())} // the plugin uses client.New()
//	res, err := c.Reconcile(ctx, r, wasmrec.NewRequest("demo", "web"))
//	cm, ok := c.Get("v1", "ConfigMap", "demo", "web")
//	events, logs := c.Events(), c.Logs()
//
// Call answers a host call at the level of the ABI (a call's name and its JSON request), for a
// plugin that does not use the Go SDK: `wasmrec test` serves a module of any language with it.
//
// What it does as the host and the API server do (the call table in testdata/calls, which the
// host's tests run too, holds the two together):
//
//   - Permissions: a call needs its rules in both the manifest and the grant (SetGrant; by
//     default the manifest's own), checked in the host's order with its messages: forbidden
//     when no rule of the API group has the verb, or the namespace is outside SetNamespaces, or
//     a rule is missing (get needs get, list and watch; list needs list and watch; update_status
//     update on <resource>/status; a status patch patch on <resource>/status; an event create on
//     core events). Reconcile refuses to run a plugin the host would refuse: a manifest asking
//     for more than the grant, watching a kind without list and watch on it, or watching a
//     kind a built-in group does not have (ConfigMaps.v1).
//   - Bad requests: malformed JSON, no kind, a kind of a built-in group that does not exist
//     (Deployment.v1), a namespace against the kind's scope, get, patch, update or delete
//     without a name, an unknown patch type or subresource, an unparsable label selector, an
//     event without a valid type, reason or object. A kind in lowercase ("configmap") names
//     the kind, as the host's mapper reads it, but an object written with it is refused, as
//     the API server refuses it.
//   - get and list (namespace, kubectl's label selectors as labels.Parse reads them: =, ==, !=,
//     in, notin, exists, !exists, > and <), sorted by namespace then name; with SetNamespaces, a
//     list across namespaces only sees the plugin's.
//   - create: already exists; uid, resourceVersion, creationTimestamp, generation 1;
//     generateName; status dropped; names, label keys and values and annotation keys
//     validated (invalid); a resourceVersion set is refused as the API server does (an
//     internal error there, which the host answers as unavailable).
//   - update and update_status: not found; conflict on a stale resourceVersion or another
//     uid; a custom resource's update needs a resourceVersion (invalid), a built-in kind's may
//     leave it empty. update keeps the stored status, update_status changes only status;
//     generation goes up when anything but metadata and status changes; an update that
//     changes nothing keeps the resourceVersion. Status calls on a built-in kind without a
//     status subresource (ConfigMap) are not found.
//   - patch: merge (RFC 7386), json (RFC 6902 as the API server's json-patch applies it:
//     replace of a missing member adds it, negative indices count from the end; a failing
//     operation is invalid), strategic (built-in kinds only, bad request on a custom
//     resource), apply; a resourceVersion in the patch is a precondition (conflict), another
//     uid is invalid (it is immutable), as is a change of kind or apiVersion. A resourceVersion
//     that is not a number is unavailable, on any write, as the host answers the API server's
//     internal error.
//   - delete: not found; a uid precondition (conflict); propagationPolicy checked (invalid).
//     An object with finalizers gets a deletionTimestamp and stays until an update removes the
//     last one.
//   - event: about the given object, or the object being reconciled (Reconcile's request, of
//     the manifest's For kind); recorded in the object's namespace or "default".
//   - Log lines of wasmrec.Log during Reconcile, decoded from the SDK's structured form (Logs,
//     LogTo).
//
// What is simpler than a real API server (trust a real cluster, or the e2e tests, for these):
//
//   - Strategic merge patch merges as the API server does with k8s.io/api's patch metadata
//     (each built-in kind's, generated from the same types as sdk/go/k8s): a list of
//     containers is merged by name whether or not the patch has a $setElementOrder directive,
//     and a list another writer filled since the plugin read it keeps that writer's items.
//     $deleteFromPrimitiveList, $retainKeys and $patch (replace and delete, of an object or an
//     item of a list) are applied as the API server applies them; an item without the list's
//     merge key, or a $patch of merge or another word, is unavailable (the API server's
//     internal error, as the host answers it), and a list where the kind has an object, or an
//     object where it has a list, is invalid. Where a list merges items of another writer with
//     the patch's, those items may stand elsewhere in the list than the API server puts them
//     (it orders them by the live list after its merge has changed it in place). A member a
//     kind does not have merges a list only where the patch names the key. The object is
//     stored as the patch leaves it: no decoding into the kind's type drops a null or an
//     unknown member, as the API server's does, and nothing is validated (a list of
//     containers left empty is kept).
//   - Server-side apply is minimal: the applied fields are merged in (maps field by field,
//     lists replaced whole: no list-map merging by key), and fields the plugin applied before
//     and no longer applies are removed; a missing object is created. There are no other field
//     managers: no apply conflicts ever, force changes nothing, and no managedFields are kept
//     (a write's field owner is checked as the host checks it, then has no effect).
//   - A dry run (DryRun, client.DryRunAll) is the write made and then undone: it meets the
//     fake's checks, not the admission or defaulting a real API server's dry run goes through.
//   - No schemas, defaulting, conversion or admission: any fields are stored as written;
//     objects are kept by API group and kind, so any version of the group reads the same object,
//     as written. Every kind of a group that is not the API server's own is served (a
//     namespaced custom resource, plural by Plural, unless RegisterKind says otherwise).
//   - Every kind is given a generation (the API server gives none to a ConfigMap, say), and
//     every kind with a status other than the built-in kinds known to have none is taken to
//     have a status subresource.
//   - Namespaces need not exist: create in a namespace with no Namespace object succeeds (the
//     API server says not found), and deleting a Namespace deletes nothing in it.
//   - No garbage collection: deleting an owner leaves its dependents; propagationPolicy is only
//     checked. Deletion has no grace period.
//   - Reads see writes at once (the host reads from an informer cache that may lag), Events
//     are recorded one by one (the host's recorder aggregates and may drop them), and calls
//     outside Reconcile are answered (the host refuses them), except events without an object.
//   - No rate limits, timeouts (a call with a done context gets timeout), size limits other
//     than the 16 MiB of requests and responses, or per-reconcile log limits.
//   - The plugin's name in messages is the manifest's name (or "plugin"), not the operator's.
//   - Reconcile runs the reconciler once and returns what it returned: no requeues, no
//     backoff. Reconciles run one at a time across clusters, since wasmrec.Log is global.
package fake
