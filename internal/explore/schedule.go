package explore

import (
	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/internal/plugintest"
)

// schedulesOf lists every single fault the run without faults allows, in the order they would
// strike: for each reconcile, a crash before each of its writes and one after it returns, a
// stale read of each object it read that had an earlier version, a conflict on each write to
// an object that exists; then each change made at once with the next.
func schedulesOf(base *world, changes int) []plugintest.Fault {
	var out []plugintest.Fault
	for _, l := range base.log {
		if l.check {
			continue
		}
		for k := 0; k <= len(l.writes); k++ {
			out = append(out, plugintest.Fault{Type: plugintest.FaultCrash, Reconcile: l.n, AfterWrites: k})
		}
		for _, r := range l.stale {
			k := r.object
			apiVersion := base.kinds[key{group: k.group, kind: k.kind}]
			out = append(out, plugintest.Fault{Type: plugintest.FaultStale, Reconcile: l.n, Read: r.read,
				Object: &plugintest.Ref{APIVersion: apiVersion, Kind: k.kind, Namespace: k.namespace, Name: base.refName(k)}})
		}
		for j, wr := range l.writes {
			if wr.fn != abi.ImportCreate && wr.existed {
				out = append(out, plugintest.Fault{Type: plugintest.FaultConflict, Reconcile: l.n, Write: j + 1})
			}
		}
	}
	for i := 1; i < changes; i++ {
		out = append(out, plugintest.Fault{Type: plugintest.FaultCoalesce, Change: i})
	}
	return out
}

// thin keeps at most n of schedules, evenly spread over them.
func thin(schedules []plugintest.Fault, n int) []plugintest.Fault {
	if len(schedules) <= n {
		return schedules
	}
	out := make([]plugintest.Fault, 0, n)
	for i := range n {
		out = append(out, schedules[i*len(schedules)/n])
	}
	return out
}
