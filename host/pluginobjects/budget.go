package pluginobjects

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// The budgets of plugin objects (pluginObjects in the host config), all and per namespace:
//   - units: a plugin object is one, or one per shard; taken when the object starts;
//   - memory: its instances' (memoryLimit times maxConcurrentReconciles, twice that with a
//     rollout), taken when the object starts, and its modules' compiled code (codeBudget), taken
//     before each module compiles and given back when the plugin lets it go.
//
// All of it is held in r.running under r.mu: a budget's use is the sum over the objects running.

// held is what l holds of the memory budgets. r.mu is held.
func (l *objectRun) held() int64 { return l.memory + l.code }

// use sums what the running objects hold, all and in namespace ns. r.mu is held.
func (r *resources) use(ns string) (memory, memoryHere int64, units, unitsHere int) {
	for _, other := range r.running {
		memory += other.held()
		units += other.units
		if ns != "" && other.namespace == ns {
			memoryHere += other.held()
			unitsHere += other.units
		}
	}
	return memory, memoryHere, units, unitsHere
}

// reserve takes l's memory and units out of the operator's budgets for plugin objects (all of
// them, and a namespace's Plugins) and records l as name's, in one step (the controller's
// workers reconcile objects at once). A plugin that would exceed one is refused, saying what is
// taken and by whom, and tried again when a plugin object stops.
func (r *resources) reserve(u *unstructured.Unstructured, name string, l *objectRun) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ns := u.GetNamespace()
	used, usedHere, units, unitsHere := r.use(ns)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: u.GetName()}}
	var err error
	switch {
	case ns != "" && unitsHere+l.units > r.policy.NamespaceUnitBudget:
		err = fmt.Errorf("%s: it takes %s, and the Plugins of %s hold %d of the operator's budget of %d units for one namespace (pluginObjects.namespaceUnitBudget in the host config; every Plugin not paused holds its units, loaded or still trying to load): %sstop or pause another Plugin of %s, or ask the operator",
			describe(u), unitsOf(l.units), ns, unitsHere, r.policy.NamespaceUnitBudget, lowerShards(l.units), ns)
	case units+l.units > r.policy.UnitBudget:
		err = fmt.Errorf("%s: it takes %s, and plugin objects hold %d of the operator's budget of %d units (pluginObjects.unitBudget in the host config): %sor ask the operator; it is tried again when a plugin object stops",
			describe(u), unitsOf(l.units), units, r.policy.UnitBudget, lowerShards(l.units))
	case ns != "" && l.memory > r.policy.NamespaceMemoryBudget.Value():
		err = fmt.Errorf("%s: its instances may take %s (memoryLimit times maxConcurrentReconciles, twice that with a rollout), more than the operator's whole budget of %s for one namespace (pluginObjects.namespaceMemoryBudget in the host config): lower them, or ask the operator",
			describe(u), approx(l.memory), r.policy.NamespaceMemoryBudget)
	case l.memory > r.policy.MemoryBudget.Value():
		err = fmt.Errorf("%s: its instances may take %s (memoryLimit times maxConcurrentReconciles, twice that with a rollout), more than the operator's whole memory budget of %s (pluginObjects.memoryBudget in the host config): lower them, or ask the operator",
			describe(u), approx(l.memory), r.policy.MemoryBudget)
	case ns != "" && usedHere+l.memory > r.policy.NamespaceMemoryBudget.Value():
		err = fmt.Errorf("%s: its instances may take %s (memoryLimit times maxConcurrentReconciles, twice that with a rollout), and the Plugins of %s hold %s of the operator's budget of %s for one namespace (pluginObjects.namespaceMemoryBudget in the host config; %s): lower them, stop another Plugin of %s, or ask the operator; it is tried again when one stops",
			describe(u), approx(l.memory), ns, approx(usedHere), r.policy.NamespaceMemoryBudget, r.holders(ns), ns)
	case used+l.memory > r.policy.MemoryBudget.Value():
		err = fmt.Errorf("%s: its instances may take %s (memoryLimit times maxConcurrentReconciles, twice that with a rollout), and plugin objects hold %s of the operator's memory budget of %s (pluginObjects.memoryBudget in the host config; %s): lower them, or ask the operator; it is tried again when a plugin object stops",
			describe(u), approx(l.memory), approx(used), r.policy.MemoryBudget, r.holders(""))
	}
	if err != nil {
		r.overBudget[req] = need{memory: l.memory, units: l.units}
		return err
	}
	delete(r.overBudget, req)
	l.namespace = ns
	r.running[name] = l
	return nil
}

// budgetUse is what the running objects of each namespace ("" for the ClusterPlugins) hold of
// the budgets, for the metrics.
func (r *resources) budgetUse() []metrics.BudgetUse {
	r.mu.Lock()
	defer r.mu.Unlock()
	by := map[string]*metrics.BudgetUse{}
	for _, l := range r.running {
		u := by[l.namespace]
		if u == nil {
			u = &metrics.BudgetUse{Namespace: l.namespace}
			by[l.namespace] = u
		}
		u.MemoryBytes += l.held()
		if l.promise() {
			u.PromisedBytes += l.memory
		}
		u.Units += l.units
	}
	out := make([]metrics.BudgetUse, 0, len(by))
	for _, u := range by {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b metrics.BudgetUse) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out
}

// need is what an object refused by reserve asked of the budgets.
type need struct {
	memory int64
	units  int
}

// codeBudget charges an object's compiled modules to the memory budgets, beside its instances
// (plugin.Config.Code). A module that does not fit is not compiled: the object is Degraded
// (OverBudget), or, for a new version, the one serving keeps serving; either is tried again
// as soon as memory is given back (roomMade), and with backoff.
type codeBudget struct {
	r    *resources
	l    *objectRun
	name string // the plugin's
	what string // the object, as messages name it
	// index is set for what its field indexes' values are charged (ForIndex): they take no
	// room promised to objects waiting to load, and refusals say what the values are for.
	index bool
}

// ForIndex is c for the values of the plugin's field indexes (plugin.Config.Code).
func (c codeBudget) ForIndex() wasm.CodeBudget {
	c.index = true
	return c
}

func (c codeBudget) Charge(n int64) error {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[c.name] != c.l {
		return fmt.Errorf("%s: stopped while its module was being loaded", c.what)
	}
	ns := c.l.namespace
	used, usedHere, _, _ := r.use(ns)
	if c.index {
		return c.chargeIndex(n, used, usedHere)
	}
	// Objects that wait to load their first module hold their instances' share, which no
	// instance uses yet: counted here, two Plugins that each fit alone, started together (as
	// after a restart), would each keep the other from compiling for ever. Their shares still
	// count where objects start (reserve), against their own modules, and against index values.
	promised, promisedHere := r.promised(ns, c.l)
	used, usedHere = used-promised, usedHere-promisedHere
	notSelfPromise := func(l *objectRun) bool { return l != c.l && l.promise() }
	const cost = "compiling a module takes about %d times its size, and its code holds about %d times its size after, while the plugin keeps it"
	switch {
	case ns != "" && n > r.policy.NamespaceMemoryBudget.Value():
		return fmt.Errorf("%s: its module needs %s to compile ("+cost+"), more than the operator's whole budget of %s for one namespace (pluginObjects.namespaceMemoryBudget in the host config): use a smaller module, or ask the operator",
			c.what, approx(n), wasm.CompilePeak, wasm.CodeHeld, r.policy.NamespaceMemoryBudget)
	case n > r.policy.MemoryBudget.Value():
		return fmt.Errorf("%s: its module needs %s to compile ("+cost+"), more than the operator's whole memory budget of %s (pluginObjects.memoryBudget in the host config): use a smaller module, or ask the operator",
			c.what, approx(n), wasm.CompilePeak, wasm.CodeHeld, r.policy.MemoryBudget)
	case ns != "" && usedHere+n > r.policy.NamespaceMemoryBudget.Value():
		return fmt.Errorf("%s: its module needs %s more to compile ("+cost+"), and the Plugins of %s hold %s of the operator's budget of %s for one namespace (pluginObjects.namespaceMemoryBudget in the host config; %s): use a smaller module, lower memoryLimit or maxConcurrentReconciles, stop another Plugin of %s, or ask the operator; it is tried again when one stops",
			c.what, approx(n), wasm.CompilePeak, wasm.CodeHeld, ns, approx(usedHere), r.policy.NamespaceMemoryBudget, r.holdersBut(ns, notSelfPromise), ns)
	case used+n > r.policy.MemoryBudget.Value():
		return fmt.Errorf("%s: its module needs %s more to compile ("+cost+"), and plugin objects hold %s of the operator's memory budget of %s (pluginObjects.memoryBudget in the host config; %s): use a smaller module, or ask the operator; it is tried again when a plugin object stops",
			c.what, approx(n), wasm.CompilePeak, wasm.CodeHeld, approx(used), r.policy.MemoryBudget, r.holdersBut("", notSelfPromise))
	}
	c.l.code += n
	return nil
}

// promise reports whether l's instances' share is only promised: it holds no code and has not
// loaded. r.mu is held.
func (l *objectRun) promise() bool { return l.code == 0 && l.waiting() }

// promised sums the instances' shares of the objects other than self that hold no code and
// have not loaded: all, and in namespace ns. r.mu is held.
func (r *resources) promised(ns string, self *objectRun) (all, here int64) {
	for _, other := range r.running {
		if other == self || !other.promise() {
			continue
		}
		all += other.memory
		if ns != "" && other.namespace == ns {
			here += other.memory
		}
	}
	return all, here
}

// chargeIndex is Charge of the values of the plugin's field indexes. r.mu is held.
func (c codeBudget) chargeIndex(n, used, usedHere int64) error {
	r, ns := c.r, c.l.namespace
	const what = "%s: its field indexes' values need %s more (the host keeps them for its lists, a MiB at a time), and "
	switch {
	case ns != "" && usedHere+n > r.policy.NamespaceMemoryBudget.Value():
		return fmt.Errorf(what+"the Plugins of %s hold %s of the operator's budget of %s for one namespace (pluginObjects.namespaceMemoryBudget in the host config; %s): lower memoryLimit or maxConcurrentReconciles, stop another Plugin of %s, or ask the operator",
			c.what, approx(n), ns, approx(usedHere), r.policy.NamespaceMemoryBudget, r.holders(ns), ns)
	case used+n > r.policy.MemoryBudget.Value():
		return fmt.Errorf(what+"plugin objects hold %s of the operator's memory budget of %s (pluginObjects.memoryBudget in the host config; %s): ask the operator",
			c.what, approx(n), approx(used), r.policy.MemoryBudget, r.holders(""))
	}
	c.l.code += n
	return nil
}

func (c codeBudget) Release(n int64) {
	c.r.mu.Lock()
	c.l.code -= n
	c.r.mu.Unlock()
	go c.r.roomMade() // from the goroutine closing a module, which must not wait on others
}

// roomMade has every object waiting for room in the budgets try again at once: those refused
// before they started, those whose module did not fit when it was to compile, and those whose
// move to a new module did not.
func (r *resources) roomMade() {
	r.mu.Lock()
	var waiting []reconcile.Request
	for req, n := range r.overBudget { // those that fit now: the others would be refused again
		used, usedHere, units, unitsHere := r.use(req.Namespace)
		if used+n.memory <= r.policy.MemoryBudget.Value() && units+n.units <= r.policy.UnitBudget &&
			(req.Namespace == "" || usedHere+n.memory <= r.policy.NamespaceMemoryBudget.Value() && unitsHere+n.units <= r.policy.NamespaceUnitBudget) {
			waiting = append(waiting, req)
		}
	}
	runs := slices.Collect(maps.Values(r.running))
	r.mu.Unlock()
	for _, l := range runs {
		if l.sup != nil && l.sup.State().Reason == plugin.ReasonOverBudget {
			l.sup.Retry()
		}
		if l.waitForRoom() {
			waiting = append(waiting, l.req)
		}
	}
	for _, req := range waiting {
		r.ctrl.Enqueue(req)
	}
}

// holders says what holds a namespace's share of the memory budget (ns != ""), its Plugins
// each, or what holds the whole budget, each namespace (and the ClusterPlugins) together: the
// largest first, five at most. r.mu is held.
func (r *resources) holders(ns string) string { return r.holdersBut(ns, nil) }

// holdersBut is holders without the objects skip reports.
func (r *resources) holdersBut(ns string, skip func(*objectRun) bool) string {
	type holder struct {
		name    string
		bytes   int64
		waiting int
	}
	by := map[string]*holder{}
	for _, l := range r.running {
		key := l.namespace
		switch {
		case ns != "" && l.namespace != ns, skip != nil && skip(l):
			continue
		case ns != "":
			key = l.req.Name
		case key == "":
			key = "ClusterPlugins"
		}
		h := by[key]
		if h == nil {
			h = &holder{name: key}
			by[key] = h
		}
		h.bytes += l.held()
		if l.waiting() {
			h.waiting++
		}
	}
	list := slices.Collect(maps.Values(by))
	slices.SortFunc(list, func(a, b *holder) int { return cmp.Or(cmp.Compare(b.bytes, a.bytes), cmp.Compare(a.name, b.name)) })
	var parts []string
	for i, h := range list {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("%d more", len(list)-5))
			break
		}
		part := h.name + " " + approx(h.bytes)
		switch {
		case ns != "" && h.waiting > 0:
			part += " (not loaded yet: a Plugin holds its instances' share while it waits)"
		case h.waiting > 0:
			part += fmt.Sprintf(" (%d not loaded yet)", h.waiting)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// approx is b rounded up to the MiB, as budget messages show amounts.
func approx(b int64) string { return quantity((b + 1<<20 - 1) &^ (1<<20 - 1)) }

// unitsOf says what units n is: a plugin object is one, or one per shard.
func unitsOf(n int) string {
	if n == 1 {
		return "1 unit (a plugin object is one, or one per shard)"
	}
	return fmt.Sprintf("%d units (one per shard)", n)
}

// lowerShards is the advice to lower spec.shards, for an object that has them.
func lowerShards(n int) string {
	if n > 1 {
		return "lower spec.shards, "
	}
	return ""
}

// cpuShare is namespace's share of the host's cores, which its Plugins run within.
func (r *resources) cpuShare(namespace string) *wasm.CPUShare {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.cpu[namespace]
	if s == nil {
		s = wasm.NewCPUShare(fmt.Sprintf("the Plugins of %s (pluginObjects.namespaceCPU in the host config)", namespace), r.policy.NamespaceCPU)
		r.cpu[namespace] = s
	}
	return s
}
