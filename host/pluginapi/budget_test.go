package pluginapi

import (
	"fmt"
	"strings"
	"testing"

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
		running:    map[string]*loaded{},
		overBudget: map[reconcile.Request]bool{},
	}
	reserve := func(ns, name string, shards int) error {
		u := objectOf(t, fmt.Sprintf(`"kind":"Plugin","metadata":{"name":%q,"namespace":%q}`, name, ns), fmt.Sprintf(`{"module":"/m.wasm","shards":%d}`, shards))
		cfg := plugin.Config{Shards: shards}
		return r.reserve(u, PluginName(ns, name), &loaded{units: cfg.Units(), memory: 1})
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
