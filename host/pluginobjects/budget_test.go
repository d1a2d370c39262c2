package pluginobjects

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/reconcile"
)

// Units of work are budgeted as memory is: one namespace's Plugins up to its budget, plugin
// objects together up to theirs; a refusal names the budget, and the object waits for a stop.
// 512 Plugins of 8 shards each, within every other bound, were 4096 Leases renewed by every
// replica: other teams' plugins lost theirs and the host stopped.
func TestUnitsAreBudgeted(t *testing.T) {
	r := &resources{
		policy:     plugin.ObjectPolicy{NamespaceUnitBudget: 16, UnitBudget: 24}.WithDefaults(),
		running:    map[string]*objectRun{},
		overBudget: map[reconcile.Request]need{},
	}
	reserve := func(ns, name string, shards int) error {
		u := objectOf(t, fmt.Sprintf(`"kind":"Plugin","metadata":{"name":%q,"namespace":%q}`, name, ns), fmt.Sprintf(`{"module":"/m.wasm","shards":%d}`, shards))
		cfg := plugin.Config{Shards: shards}
		return r.reserve(u, PluginName(ns, name), &objectRun{units: cfg.Units(), memory: 1})
	}
	for i := range 2 {
		if err := reserve("team-a", fmt.Sprint("sh-", i), 8); err != nil {
			t.Fatalf("within the namespace's budget: %v", err)
		}
	}
	err := reserve("team-a", "sh-2", 1)
	if err == nil || !strings.Contains(err.Error(), "the Plugins of team-a hold 16 of the operator's budget of 16 units for one namespace (pluginObjects.namespaceUnitBudget") {
		t.Fatalf("past the namespace's budget: %v", err)
	}
	if err := reserve("team-b", "one", 8); err != nil {
		t.Fatalf("another namespace, within the whole budget: %v", err)
	}
	err = reserve("team-c", "one", 0)
	if err == nil || !strings.Contains(err.Error(), "plugin objects hold 24 of the operator's budget of 24 units (pluginObjects.unitBudget") {
		t.Fatalf("past the whole budget: %v", err)
	}
	if len(r.overBudget) != 2 {
		t.Errorf("%d objects wait for a stop; want 2", len(r.overBudget))
	}
}

// A Plugin's compiled modules count in the memory budgets beside its instances: a module whose
// compiling does not fit is refused before it compiles, naming the budget and what holds it; code
// given back makes room for the next. A 512 MiB module with memoryLimit 2Mi held 1.76 GiB of a
// host whose budgets counted 4 MiB for it.
func TestCompiledCodeIsBudgeted(t *testing.T) {
	ctrl, cerr := controller.New("plugins", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), controller.Options{})
	if cerr != nil {
		t.Fatal(cerr)
	}
	r := &resources{
		ctrl: ctrl, // not started: what is enqueued when room is made goes nowhere
		policy: plugin.ObjectPolicy{
			NamespaceMemoryBudget: ptr(resource.MustParse("100Mi")),
			MemoryBudget:          ptr(resource.MustParse("150Mi")),
		}.WithDefaults(),
		running:    map[string]*objectRun{},
		overBudget: map[reconcile.Request]need{},
	}
	start := func(ns, name string, memory int64) (*objectRun, codeBudget, error) {
		u := objectOf(t, fmt.Sprintf(`"kind":"Plugin","metadata":{"name":%q,"namespace":%q}`, name, ns), `{"module":"/m.wasm"}`)
		l := &objectRun{req: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}, units: 1, memory: memory}
		return l, codeBudget{r: r, l: l, name: PluginName(ns, name), what: describe(u)}, r.reserve(u, PluginName(ns, name), l)
	}
	_, one, err := start("team-a", "one", 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Charge(30 << 20); err != nil {
		t.Fatalf("code within the namespace's budget: %v", err)
	}
	err = one.Charge(10 << 20)
	if err == nil || !strings.HasPrefix(err.Error(), "Plugin team-a/one: its module needs 10Mi more to compile") ||
		!strings.Contains(err.Error(), "the Plugins of team-a hold 94Mi of the operator's budget of 100Mi for one namespace (pluginObjects.namespaceMemoryBudget in the host config; one 94Mi)") {
		t.Fatalf("code past the namespace's budget: %v", err)
	}
	// Its field indexes' values are charged there too, and a refusal says what they are for.
	err = one.ForIndex().Charge(7 << 20)
	if err == nil || !strings.HasPrefix(err.Error(), "Plugin team-a/one: its field indexes' values need 7Mi more (the host keeps them for its lists") ||
		!strings.Contains(err.Error(), "the Plugins of team-a hold 94Mi of the operator's budget of 100Mi for one namespace (pluginObjects.namespaceMemoryBudget in the host config; one 94Mi)") {
		t.Fatalf("index values past the namespace's budget: %v", err)
	}
	if err := one.ForIndex().Charge(1 << 20); err != nil {
		t.Fatalf("index values within the namespace's budget: %v", err)
	}
	one.Release(1 << 20)
	if _, _, err := start("team-a", "two", 8<<20); err == nil || !strings.Contains(err.Error(), "the Plugins of team-a hold 94Mi of the operator's budget") {
		t.Fatalf("instances past the namespace's budget, counting code: %v", err)
	}
	one.Release(30 << 20)
	if _, _, err := start("team-a", "two", 8<<20); err != nil {
		t.Fatalf("once the code was let go: %v", err)
	}

	_, b, err := start("team-b", "one", 40<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Charge(20 << 20); err != nil {
		t.Fatalf("within the whole budget: %v", err)
	}
	err = b.Charge(30 << 20)
	if err == nil || !strings.Contains(err.Error(), "plugin objects hold 132Mi of the operator's memory budget of 150Mi (pluginObjects.memoryBudget in the host config; team-a 72Mi, team-b 60Mi)") {
		t.Fatalf("past the whole budget: %v", err)
	}
	// The metrics say the same, by namespace, beside the budgets.
	m := metrics.New()
	p := r.policy
	m.WatchPluginObjectBudgets(metrics.Budgets{MemoryBytes: p.MemoryBudget.Value(), NamespaceMemoryBytes: p.NamespaceMemoryBudget.Value(), Units: p.UnitBudget, NamespaceUnits: p.NamespaceUnitBudget}, r.budgetUse)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{
		`wasmrec_plugin_objects_memory_bytes{namespace="team-a"} 7.5497472e+07`,
		`wasmrec_plugin_objects_memory_bytes{namespace="team-b"} 6.291456e+07`,
		`wasmrec_plugin_objects_units{namespace="team-a"} 2`,
		`wasmrec_plugin_objects_memory_promised_bytes{namespace="team-a"} 0`, // none of these has a supervisor: each counts as loaded
		`wasmrec_plugin_objects_memory_budget_bytes{scope="all"} 1.572864e+08`,
		`wasmrec_plugin_objects_memory_budget_bytes{scope="namespace"} 1.048576e+08`,
		`wasmrec_plugin_objects_units_budget{scope="namespace"} 64`,
	} {
		if !strings.Contains(rec.Body.String(), line+"\n") {
			t.Errorf("the metrics do not say %s", line)
		}
	}

	// What can never fit says so, and does not ask for another Plugin to stop.
	if err := b.Charge(101 << 20); err == nil || !strings.Contains(err.Error(), "its module needs 101Mi to compile") || !strings.Contains(err.Error(), "more than the operator's whole budget of 100Mi for one namespace") || strings.Contains(err.Error(), "stop another") {
		t.Errorf("a module larger than the namespace's whole budget: %v", err)
	}
	if _, _, err := start("team-c", "huge", 101<<20); err == nil || !strings.Contains(err.Error(), "more than the operator's whole budget of 100Mi for one namespace") || strings.Contains(err.Error(), "stop another") {
		t.Errorf("instances larger than the namespace's whole budget: %v", err)
	}

	r.mu.Lock()
	delete(r.running, PluginName("team-b", "one")) // stopped while its module loads
	r.mu.Unlock()
	if err := b.Charge(1); err == nil || !strings.Contains(err.Error(), "stopped while its module was being loaded") {
		t.Fatalf("a stopped plugin's module: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
