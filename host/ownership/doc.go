// Package ownership divides units of work (a plugin, or one shard of a plugin) among the
// replicas of a host, with a coordination.k8s.io Lease per unit and one per replica.
//
// Each replica renews its own replica Lease, so that every replica can count the live ones.
// It holds at most its fair share of the units (units / live replicas, rounded up): it takes
// free or expired unit Leases while under its share and hands back its least preferred ones
// while over it, so replicas split the units evenly and rebalance as replicas come and go.
// Which replica prefers which unit is rendezvous hashing of the two names: stable, spread, and
// the same on every replica, so the replica a unit would go to next can keep it warm. What to
// take and what to let go of is decided by package placement from this replica's view; the
// files here do the rest: lease.go the Lease calls, watch.go the watch of the group's Leases
// and the deadlines, claim.go the runs of a claim's units, table.go the loop that ties them.
//
// A unit is run by Claim.Run, and a unit's Lease is handed back only after the run that held
// it has returned; a replica that cannot renew stops its runs at the renew deadline, before
// the lease duration lets another replica take the unit. So a unit never runs on two replicas
// at once, as long as a run stops within LeaseDuration - RenewDeadline of being cancelled.
package ownership
