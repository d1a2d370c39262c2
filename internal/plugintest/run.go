package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/wasm"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

// Options configure a Suite. The zero value tests a module with the grant its manifest asks for.
type Options struct {
	// Name is the plugin's name, as the host config gives it. Defaults to the manifest's name,
	// or "plugin".
	Name string
	// Grant is what the operator grants the plugin (host.yaml's permissions). Defaults to what
	// the manifest asks for. A manifest asking for more fails every case, as the host refuses
	// such a module.
	Grant []abi.Permission
	// Namespaces limits the plugin to these namespaces, as the host config does. Defaults to
	// all.
	Namespaces []string
	// Kinds are custom resources the cluster serves whose plural is not the usual English one,
	// or which are cluster-scoped (from the plugin's CRDs). Others are taken to be namespaced.
	Kinds []Kind
	// Timeout bounds one reconcile, as the host's timeout does. Defaults to 30 s.
	Timeout time.Duration
	// MemoryLimit caps one instance's memory, in bytes, as the host config's memoryLimit does.
	// Defaults to the host's default (host/wasm.DefaultMemoryLimit).
	MemoryLimit uint64
	// CacheDir holds compiled modules across runs (host/wasm.EngineOptions.CacheDir). Defaults
	// to the user cache directory's; "-" for none.
	CacheDir string
}

// Kind is a kind the cluster serves, as a CRD declares it.
type Kind struct {
	Group, Kind, Resource string
	Namespaced            bool
}

func (o Options) withDefaults(m *abi.Manifest) Options {
	if o.Name == "" {
		o.Name = m.Name
	}
	if o.Name == "" {
		o.Name = "plugin"
	}
	if o.Grant == nil {
		o.Grant = m.Permissions
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	return o
}

// Suite is a module loaded for testing: compiled once, each case run on a cluster of its own.
// Its cases run one at a time.
type Suite struct {
	opts   Options
	engine *wasm.Engine
	module *wasm.Module
	logs   *logBook
	mu     sync.Mutex
}

// Load compiles a module and checks it as the host does at load (ABI, exports, imports,
// manifest).
func Load(ctx context.Context, module []byte, opts Options) (*Suite, error) {
	engine, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: opts.CacheDir})
	if err != nil {
		return nil, err
	}
	s := &Suite{engine: engine, logs: &logBook{}}
	name := opts.Name
	if name == "" {
		name = "plugin"
	}
	if s.module, err = engine.Compile(ctx, module, wasm.Options{Name: name, MemoryLimit: opts.MemoryLimit, Logger: s.logs.logger()}); err != nil {
		return nil, errors.Join(err, engine.Close(ctx))
	}
	s.opts = opts.withDefaults(s.module.Manifest())
	return s, nil
}

// Module is the module under test. Reconciles of it must not run alongside Run.
func (s *Suite) Module() *wasm.Module { return s.module }

// Options are the suite's options, with their defaults.
func (s *Suite) Options() Options { return s.opts }

// Manifest is the module's manifest.
func (s *Suite) Manifest() *abi.Manifest { return s.module.Manifest() }

// Close releases the module and the engine.
func (s *Suite) Close(ctx context.Context) error {
	return errors.Join(s.module.Close(ctx), s.engine.Close(ctx))
}

// Outcome is what a case did and how it differed from what it expected.
type Outcome struct {
	Case string
	// Failures say what differed, one a line, each naming the field; none if the case passed.
	Failures []string
	// Notes say what the case did not check, though it passed.
	Notes []string
	// Logs are the lines the plugin logged.
	Logs     []string
	Duration time.Duration
}

// Passed reports whether the case got what it expected.
func (o Outcome) Passed() bool { return len(o.Failures) == 0 }

// ErrRefused is the error of a case run for a plugin the host would refuse at load: its
// manifest asks for more than the grant, or watches a kind without list and watch on it. Every
// case of the Suite gets it.
var ErrRefused = errors.New("the host would refuse this plugin")

// Run runs one case. An error is a case that could not run (its objects do not fit the
// cluster, or the host would refuse the plugin), not a case that failed.
func (s *Suite) Run(ctx context.Context, c Case) (Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Outcome{Case: c.Name}
	if c.Explore != nil {
		return out, fmt.Errorf("the case explores: run it with wasmrec explore's package (internal/explore)")
	}
	cluster, req, err := s.cluster(c)
	if err != nil {
		return out, err
	}
	if len(s.opts.Namespaces) > 0 && req.Namespace != "" && !slices.Contains(s.opts.Namespaces, req.Namespace) {
		out.Failures = append(out.Failures, fmt.Sprintf("request: %s/%s is outside the plugin's namespaces %v: the host never reconciles it (its watches see only those namespaces)",
			req.Namespace, req.Name, s.opts.Namespaces))
		return out, nil
	}
	s.logs.reset()
	start := time.Now()
	ran := false
	var (
		res    abi.Result
		runErr error
	)
	_, err = cluster.Reconcile(ctx, wasmrec.ReconcilerFunc(func(ctx context.Context, _ wasmrec.Request) (wasmrec.Result, error) {
		ran = true
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		res, runErr = s.module.Reconcile(ctx, &wasm.Call{Request: req, Host: cluster, Logger: s.logs.logger()})
		return wasmrec.Result{}, nil
	}), wasmrec.Request{NamespacedName: types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, Retries: int(req.Retries)})
	out.Duration = time.Since(start)
	out.Logs = s.logs.all()
	if !ran { // the fake refused to run it
		return out, fmt.Errorf("%w: %s", ErrRefused, strings.TrimPrefix(err.Error(), "fake: the host would refuse this plugin: "))
	}
	if runErr != nil { // a trap or a timeout: a failed reconcile
		res = abi.Result{Failed: true, Err: strings.TrimPrefix(runErr.Error(), fmt.Sprintf("plugin %q: ", s.module.Name()))}
	}
	out.Failures = append(out.Failures, compareResult(c.Result, res)...)
	for i, want := range c.After {
		r := RefOf(want)
		got, ok := cluster.Get(r.APIVersion, r.Kind, r.Namespace, r.Name)
		if !ok {
			out.Failures = append(out.Failures, fmt.Sprintf("after[%d] %s: not found", i, r))
			continue
		}
		for _, d := range match(normalize(want), normalize(got.Object), "") {
			out.Failures = append(out.Failures, fmt.Sprintf("after[%d] %s: %s", i, r, d))
		}
	}
	for i, r := range c.Gone {
		if _, ok := cluster.Get(r.APIVersion, r.Kind, r.Namespace, r.Name); ok {
			out.Failures = append(out.Failures, fmt.Sprintf("gone[%d] %s: still there", i, r))
		}
	}
	if c.Events != nil {
		out.Failures = append(out.Failures, compareEvents(*c.Events, cluster.Events())...)
	}
	out.Failures = append(out.Failures, compareLogs(c.Logs, out.Logs)...)
	return out, nil
}

// NewCluster makes a cluster for the plugin, as the host serves it (its grant, namespaces and
// kinds), holding objects.
func (s *Suite) NewCluster(objects []map[string]any) (*fake.Cluster, error) {
	m := *s.module.Manifest()
	if m.Name == "" {
		m.Name = s.opts.Name
	}
	cluster := fake.NewCluster(m).SetGrant(s.opts.Grant...).SetNamespaces(s.opts.Namespaces...)
	for _, k := range s.opts.Kinds {
		cluster.RegisterKind(k.Group, k.Kind, k.Resource, k.Namespaced)
	}
	for i, o := range objects {
		if err := Put(cluster, o); err != nil {
			return nil, fmt.Errorf("before[%d]: %w", i, err)
		}
	}
	return cluster, nil
}

// cluster makes the case's cluster and request.
func (s *Suite) cluster(c Case) (_ *fake.Cluster, _ abi.Request, err error) {
	m := *s.module.Manifest()
	cluster, err := s.NewCluster(c.Before)
	if err != nil {
		return nil, abi.Request{}, err
	}
	if c.Request != nil {
		return cluster, abi.Request{Namespace: c.Request.Namespace, Name: c.Request.Name, Retries: c.Request.Retries}, nil
	}
	var found []Ref
	for _, o := range c.Before {
		r := RefOf(o)
		if sameKind(r.APIVersion, r.Kind, m.For) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		return nil, abi.Request{}, fmt.Errorf("request: before holds %d objects of the plugin's kind (%s %s): say which to reconcile with request: {namespace: ..., name: ...}", len(found), m.For.APIVersion, m.For.Kind)
	}
	return cluster, abi.Request{Namespace: found[0].Namespace, Name: found[0].Name}, nil
}

// Put stores o in c as a test would (fake.Cluster.Put), with an error for an object c cannot
// hold, where the fake panics.
func Put(c *fake.Cluster, o map[string]any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s", strings.TrimPrefix(fmt.Sprint(r), "fake: Put: "))
		}
	}()
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	var obj wasmrec.Object
	if err := json.Unmarshal(b, &obj.Object); err != nil {
		return err
	}
	c.Put(&obj)
	return nil
}

// sameKind reports whether apiVersion and kind name the watch's kind (any version of its group).
func sameKind(apiVersion, kind string, w abi.Watch) bool {
	group := func(v string) string {
		g, _, ok := strings.Cut(v, "/")
		if !ok {
			return ""
		}
		return g
	}
	return kind == w.Kind && group(apiVersion) == group(w.APIVersion)
}

func compareResult(want Result, got abi.Result) []string {
	var out []string
	wantErr := want.Error != nil || want.Terminal
	switch {
	case wantErr && !got.Failed:
		out = append(out, fmt.Sprintf("result.error: want an error%s, got none", holding(want.Error)))
	case !wantErr && got.Failed:
		out = append(out, "result.error: want none, got an error: "+multiline(got.Err))
	case wantErr && want.Error != nil && !strings.Contains(got.Err, *want.Error):
		out = append(out, fmt.Sprintf("result.error: want an error holding %q, got: %s", *want.Error, multiline(got.Err)))
	}
	if got.Failed && want.Terminal != got.Terminal {
		if want.Terminal {
			out = append(out, "result.terminal: want a terminal error, got one that is retried")
		} else if wantErr {
			out = append(out, "result.terminal: want an error that is retried, got a terminal one (write terminal: true)")
		}
	}
	if !got.Failed { // beside an error, the host ignores a Result
		if want.Requeue != got.Requeue {
			out = append(out, fmt.Sprintf("result.requeue: want %t, got %t", want.Requeue, got.Requeue))
		}
		var after time.Duration
		if want.RequeueAfter != nil {
			after = want.RequeueAfter.Duration
		}
		if after != got.RequeueAfter {
			out = append(out, fmt.Sprintf("result.requeueAfter: want %s, got %s", after, got.RequeueAfter))
		}
	}
	return out
}

// multiline is an error message on its line, the lines after it (a stack trace) indented.
func multiline(s string) string {
	first, rest, ok := strings.Cut(strings.TrimRight(s, "\n"), "\n")
	if !ok {
		return first
	}
	return first + "\n" + indent(rest)
}

func holding(s *string) string {
	if s == nil || *s == "" {
		return ""
	}
	return fmt.Sprintf(" holding %q", *s)
}

func compareEvents(want []Event, got []fake.Event) []string {
	var out []string
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(got):
			out = append(out, fmt.Sprintf("events[%d]: want %s, got no such event", i, showWant(want[i])))
		case i >= len(want):
			out = append(out, fmt.Sprintf("events[%d]: want no more events, got %s", i, showGot(got[i])))
		default:
			w, g := want[i], got[i]
			if (w.Type != "" && w.Type != g.Type) || w.Reason != g.Reason || !strings.Contains(g.Message, w.Message) {
				out = append(out, fmt.Sprintf("events[%d]: want %s, got %s", i, showWant(w), showGot(g)))
			}
		}
	}
	return out
}

func showWant(e Event) string {
	s := strings.TrimSpace(e.Type + " " + e.Reason)
	if e.Message != "" {
		s += fmt.Sprintf(" with a message holding %q", e.Message)
	}
	return s
}

func showGot(e fake.Event) string {
	return fmt.Sprintf("%s %s %q about %s %s", e.Type, e.Reason, e.Message, e.Object.Kind, Ref{Namespace: e.Object.Namespace, Name: e.Object.Name}.name())
}

func (r Ref) name() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// compareLogs finds each wanted text in a line, in order.
func compareLogs(want, got []string) []string {
	next := 0
	for i, w := range want {
		j := slices.IndexFunc(got[next:], func(l string) bool { return strings.Contains(l, w) })
		if j < 0 {
			msg := fmt.Sprintf("logs[%d]: want a line holding %q", i, w)
			if next > 0 {
				msg += " after the line logs[" + fmt.Sprint(i-1) + "] matched"
			}
			if len(got) == 0 {
				return append([]string{}, msg+", got no lines")
			}
			return []string{msg + ", got:\n" + indent(strings.Join(got, "\n"))}
		}
		next += j + 1
	}
	return nil
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }
