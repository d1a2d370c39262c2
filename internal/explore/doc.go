// Package explore drives a plugin module on a cluster in memory from a case's objects to
// convergence, as the host would (every object of its For kind reconciled, each write's watch
// event mapped to requests by the manifest's watches and predicates), and again under faults
// injected at the host-call boundary: a crash after each prefix of a reconcile's writes then a
// restart that lists every object, a stale read, a conflict on a write, two changes seen as one.
// Each run is checked against the run without faults: the same end state, settled within bounds,
// no reconcile trapping or timing out, and no writes from a reconcile once settled. It is what
// `wasmrec explore` runs, and what runs a case with an explore: schedule.
package explore
