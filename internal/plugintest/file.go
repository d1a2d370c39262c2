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
	Result Result `json:"result,omitempty"`
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
		if d := c.Result.RequeueAfter; d != nil && d.Duration < 0 {
			return nil, fmt.Errorf("%s.result.requeueAfter: %s is negative", where, d.Duration)
		}
	}
	return f, nil
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

// refOf names object o.
func refOf(o map[string]any) Ref {
	md, _ := o["metadata"].(map[string]any)
	r := Ref{}
	r.APIVersion, _ = o["apiVersion"].(string)
	r.Kind, _ = o["kind"].(string)
	r.Namespace, _ = md["namespace"].(string)
	r.Name, _ = md["name"].(string)
	return r
}
