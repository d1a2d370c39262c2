package plugintest

import (
	"fmt"
	"os"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/internal/configcheck"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// File is a file of test cases (tests/*.yaml in a plugin's folder).
type File struct {
	// Path is where the file was read from, for messages.
	Path  string `json:"-"`
	Cases []Case `json:"cases"`
}

// Case is one reconcile: the cluster before it, the request, and what is expected after it.
// Each case starts from a cluster holding only its Before objects.
type Case struct {
	// Name says what the case checks; unique in its file.
	Name string `json:"name"`
	// Before are the objects in the cluster when the reconcile starts.
	Before []map[string]any `json:"before,omitempty"`
	// Request names the object to reconcile. Defaults to the one object of the manifest's
	// For kind in Before.
	Request *Request `json:"request,omitempty"`
	// Result is the Result expected. Left out, the reconcile must succeed with nothing to
	// requeue.
	Result Result `json:"result,omitzero"`
	// After are objects that must exist after the reconcile, with at least the fields given
	// (a partial match: maps compare the keys given, lists item by item and must be as long,
	// null means the field is absent).
	After []map[string]any `json:"after,omitempty"`
	// Gone are objects that must not exist after the reconcile.
	Gone []Ref `json:"gone,omitempty"`
	// Events, if given, are exactly the Events the reconcile must record, in order ([] for
	// none).
	Events *[]Event `json:"events,omitempty"`
	// Logs are texts that lines the plugin logged must hold, in order; other lines may come
	// between and after them. A line reads "info marked object=default/sample".
	Logs []string `json:"logs,omitempty"`
	// Explore, if given, makes the case an exploration (wasmrec explore, docs/exploration.md):
	// the plugin is driven from Before to convergence, every object of its For kind reconciled
	// as the host would, then through the changes, under the faults given; the case passes if
	// it ends as the same run without faults does, settles, and writes nothing more once
	// settled. After and Gone are then checked on its end state; Request, Result, Events and
	// Logs do not apply.
	Explore *Exploration `json:"explore,omitempty"`
}

// Exploration is the workload and the fault schedule of an exploring case.
type Exploration struct {
	// Changes are made one at a time, as a user would make them, each once the plugin has
	// settled after the one before.
	Changes []Change `json:"changes,omitempty"`
	// Faults are injected in the run, each at its place. None: the run without faults.
	Faults []Fault `json:"faults,omitempty"`
}

// Change is a user's change to the cluster: exactly one of its fields.
type Change struct {
	// Put creates the object, or replaces it as kubectl replace does (its status kept).
	Put map[string]any `json:"put,omitempty"`
	// Delete deletes the object (marks it, if it has finalizers); the garbage collector then
	// deletes what it alone owned.
	Delete *Ref `json:"delete,omitempty"`
}

// Fault types.
const (
	// FaultCrash stops the host in a reconcile once AfterWrites of its writes are made (the next
	// is not), or after it returns if it makes no more: the instance and the queue are lost,
	// and the host starts again and lists every object.
	FaultCrash = "crash"
	// FaultStale answers the reconcile's reads of Object with its version before its latest
	// write (absent if that write created it, there if it deleted it), as a lagging cache.
	FaultStale = "stale"
	// FaultConflict answers the reconcile's Write-th write with a conflict, as if another
	// writer had changed the object first (its resourceVersion moves on).
	FaultConflict = "conflict"
	// FaultCoalesce makes Change and the one after it at once: the plugin never sees the state
	// between them, as a watch that skips an intermediate state.
	FaultCoalesce = "coalesce"
)

// Fault is one fault of a schedule.
type Fault struct {
	// Type is one of the Fault* constants.
	Type string `json:"type"`
	// Reconcile is the reconcile, counted from 1 in the run, of a crash, stale or conflict.
	Reconcile int `json:"reconcile,omitempty"`
	// AfterWrites (crash) is how many of the reconcile's writes are made before the crash.
	AfterWrites int `json:"afterWrites,omitempty"`
	// Write (conflict) is the write of the reconcile that conflicts, counted from 1.
	Write int `json:"write,omitempty"`
	// Object (stale) is the object read stale, and Read which of the reconcile's reads of it
	// (a get, or a list holding it), counted from 1; 0: every one.
	Object *Ref `json:"object,omitempty"`
	Read   int  `json:"read,omitempty"`
	// Change (coalesce) is the change, counted from 1, made at once with the next.
	Change int `json:"change,omitempty"`
}

// String says what the fault does: "crash in reconcile 3 after 1 write".
func (f Fault) String() string {
	switch f.Type {
	case FaultCrash:
		return fmt.Sprintf("crash in reconcile %d after %d %s, then a restart that lists every object", f.Reconcile, f.AfterWrites, plural(f.AfterWrites, "write"))
	case FaultStale:
		if f.Read > 0 {
			return fmt.Sprintf("stale read %d of %s in reconcile %d", f.Read, f.Object, f.Reconcile)
		}
		return fmt.Sprintf("stale reads of %s in reconcile %d", f.Object, f.Reconcile)
	case FaultConflict:
		return fmt.Sprintf("conflict on write %d of reconcile %d", f.Write, f.Reconcile)
	case FaultCoalesce:
		return fmt.Sprintf("changes %d and %d made at once (the state between them unseen)", f.Change, f.Change+1)
	}
	return f.Type
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// Request is the request a case reconciles.
type Request struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Retries is the request's retry count, as the host passes it (0 on the first try).
	Retries uint32 `json:"retries,omitempty"`
}

// Result is the Result a case expects.
type Result struct {
	Requeue      bool             `json:"requeue,omitempty"`
	RequeueAfter *metav1.Duration `json:"requeueAfter,omitempty"`
	// Error, if given, is a text the reconcile's error must hold ("" for any error).
	Error *string `json:"error,omitempty"`
	// Terminal expects a terminal error (one that is not retried); Error then defaults to "".
	Terminal bool `json:"terminal,omitempty"`
}

// Ref names an object.
type Ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s %s", r.APIVersion, r.Kind, r.Name)
	}
	return fmt.Sprintf("%s %s %s/%s", r.APIVersion, r.Kind, r.Namespace, r.Name)
}

// Event is an Event a case expects.
type Event struct {
	// Type is Normal or Warning; left out, any.
	Type string `json:"type,omitempty"`
	// Reason must be the Event's reason.
	Reason string `json:"reason"`
	// Message, if given, is a text the Event's message must hold.
	Message string `json:"message,omitempty"`
}

// ReadFile reads and checks a file of cases.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse reads a file of cases from data; path names it in errors. A mistake is named by the
// file, the line, the case and the field.
func Parse(path string, data []byte) (*File, error) {
	f := &File{Path: path}
	if err := yaml.UnmarshalStrict(data, f); err != nil {
		// The decoder stops at the first mistake and names Go types: say each with its line,
		// its field and the form it takes.
		if explained := configcheck.File(path, data, reflect.TypeFor[File]()); explained != nil {
			return nil, explained
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Cases) == 0 {
		return nil, fmt.Errorf("%s: no cases: write them in a list under cases:", path)
	}
	seen := map[string]bool{}
	for i, c := range f.Cases {
		where := fmt.Sprintf("%s: cases[%d]", path, i)
		if c.Name == "" {
			return nil, fmt.Errorf("%s: a case needs a name, saying what it checks", where)
		}
		where += " (" + c.Name + ")"
		if seen[c.Name] {
			return nil, fmt.Errorf("%s: another case has this name: give each its own", where)
		}
		seen[c.Name] = true
		for j, o := range c.Before {
			if err := checkObject(o); err != nil {
				return nil, fmt.Errorf("%s.before[%d]: %w", where, j, err)
			}
		}
		for j, o := range c.After {
			if err := checkObject(o); err != nil {
				return nil, fmt.Errorf("%s.after[%d]: %w", where, j, err)
			}
		}
		for j, r := range c.Gone {
			if r.APIVersion == "" || r.Kind == "" || r.Name == "" {
				return nil, fmt.Errorf("%s.gone[%d]: name an object with apiVersion, kind, name and (if namespaced) namespace", where, j)
			}
		}
		if c.Request != nil && c.Request.Name == "" {
			return nil, fmt.Errorf("%s.request: name is missing: give the name (and namespace) of the object to reconcile", where)
		}
		if c.Events != nil {
			for j, e := range *c.Events {
				if e.Reason == "" {
					return nil, fmt.Errorf("%s.events[%d]: reason is missing: an Event is matched by its reason", where, j)
				}
				if e.Type != "" && e.Type != "Normal" && e.Type != "Warning" {
					return nil, fmt.Errorf("%s.events[%d].type: %q: use Normal or Warning", where, j, e.Type)
				}
			}
		}
		if c.Explore != nil {
			if err := checkExploration(c); err != nil {
				return nil, fmt.Errorf("%s.explore%w", where, err)
			}
		}
		if d := c.Result.RequeueAfter; d != nil && d.Duration < 0 {
			return nil, fmt.Errorf("%s.result.requeueAfter: %s is negative", where, d.Duration)
		}
	}
	return f, nil
}

// checkExploration checks an exploring case; its errors start with the field, after "explore".
func checkExploration(c Case) error {
	e := c.Explore
	if c.Request != nil || c.Result != (Result{}) || c.Events != nil || c.Logs != nil {
		return fmt.Errorf(": an exploring case reconciles every object of the plugin's kind: request, result, events and logs do not apply (check its end state with after and gone)")
	}
	for i, ch := range e.Changes {
		switch {
		case (ch.Put == nil) == (ch.Delete == nil):
			return fmt.Errorf(".changes[%d]: give exactly one of put (an object) and delete (a reference)", i)
		case ch.Put != nil:
			if err := checkObject(ch.Put); err != nil {
				return fmt.Errorf(".changes[%d].put: %w", i, err)
			}
		case ch.Delete.APIVersion == "" || ch.Delete.Kind == "" || ch.Delete.Name == "":
			return fmt.Errorf(".changes[%d].delete: name an object with apiVersion, kind, name and (if namespaced) namespace", i)
		}
	}
	for i, f := range e.Faults {
		where := fmt.Sprintf(".faults[%d]", i)
		switch f.Type {
		case FaultCrash, FaultStale, FaultConflict:
			if f.Reconcile < 1 {
				return fmt.Errorf("%s.reconcile: give the reconcile of the %s, counted from 1", where, f.Type)
			}
		case FaultCoalesce:
			if f.Change < 1 || f.Change >= len(e.Changes) {
				return fmt.Errorf("%s.change: %d: give a change (from 1) that has one after it; there are %d", where, f.Change, len(e.Changes))
			}
		default:
			return fmt.Errorf("%s.type: %q: use %s, %s, %s or %s", where, f.Type, FaultCrash, FaultStale, FaultConflict, FaultCoalesce)
		}
		switch {
		case f.Type == FaultStale && (f.Object == nil || f.Object.Kind == "" || f.Object.Name == ""):
			return fmt.Errorf("%s.object: a stale read names the object read (apiVersion, kind, namespace, name)", where)
		case f.Type == FaultConflict && f.Write < 1:
			return fmt.Errorf("%s.write: give the write that conflicts, counted from 1", where)
		case f.Read < 0:
			return fmt.Errorf("%s.read: %d is negative", where, f.Read)
		case len(foreignFields(f)) > 0:
			return fmt.Errorf("%s: a %s fault takes no %s: %s", where, f.Type, strings.Join(foreignFields(f), ", "), faultFields[f.Type])
		case f.AfterWrites < 0:
			return fmt.Errorf("%s.afterWrites: %d is negative", where, f.AfterWrites)
		}
	}
	return nil
}

// faultFields says which fields each type of fault takes.
var faultFields = map[string]string{
	FaultCrash:    "give reconcile and afterWrites",
	FaultStale:    "give reconcile, object and read",
	FaultConflict: "give reconcile and write",
	FaultCoalesce: "give change",
}

// foreignFields are the fields f sets that its type does not take.
func foreignFields(f Fault) []string {
	var out []string
	set := map[string]bool{"reconcile": f.Reconcile != 0, "afterWrites": f.AfterWrites != 0, "write": f.Write != 0,
		"object": f.Object != nil, "read": f.Read != 0, "change": f.Change != 0}
	for _, field := range []string{"reconcile", "afterWrites", "write", "object", "read", "change"} {
		if set[field] && !strings.Contains(faultFields[f.Type], field) {
			out = append(out, field)
		}
	}
	return out
}

// checkObject says what an object of a case lacks to name one.
func checkObject(o map[string]any) error {
	var missing []string
	if s, _ := o["apiVersion"].(string); s == "" {
		missing = append(missing, "apiVersion")
	}
	if s, _ := o["kind"].(string); s == "" {
		missing = append(missing, "kind")
	}
	md, _ := o["metadata"].(map[string]any)
	if s, _ := md["name"].(string); s == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s missing: an object needs apiVersion, kind and metadata.name (and metadata.namespace if namespaced)", strings.Join(missing, ", "))
	}
	// A kind of the API server's own groups that it does not have is a misspelling: the case
	// would hold an object no plugin ever sees.
	gvk := schema.FromAPIVersionAndKind(o["apiVersion"].(string), o["kind"].(string))
	if kinds.BuiltInGroup(gvk.Group) && !kinds.Lookup(gvk).BuiltIn {
		return fmt.Errorf("kind: %s", kinds.NotBuiltIn(gvk))
	}
	return nil
}

// RefOf names object o, an object of a case.
func RefOf(o map[string]any) Ref {
	md, _ := o["metadata"].(map[string]any)
	r := Ref{}
	r.APIVersion, _ = o["apiVersion"].(string)
	r.Kind, _ = o["kind"].(string)
	r.Namespace, _ = md["namespace"].(string)
	r.Name, _ = md["name"].(string)
	return r
}
