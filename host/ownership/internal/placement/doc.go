// Package placement decides, for one replica, which units of work (a plugin, or a shard of one)
// it takes and which it lets go of, from its view of the group: the live replicas, the units,
// who holds each unit's Lease and since when. It does no I/O and reads no clock: package
// ownership builds the View from the Leases it watches and carries the Decision out.
//
// The rules, all of them here:
//   - Each replica holds at most the fair share (units / live replicas, rounded up). Over it, it
//     lets go of its least preferred units: shards of a plugin it holds more than the plugin's
//     share of, then plugins not split, then shards whose next holder would not be crowded by
//     them, then the rest.
//   - The floor: while another replica holds less than the share rounded down, one at or above
//     it takes nothing, and, when the units do not divide evenly, the replica holding most lets
//     one unit go.
//   - A replica that joined takes units a retry period after it was first seen; until then no
//     replica lets a unit go for it, so units keep running where they are.
//   - Preference is rendezvous hashing of the plugin and the replica, turned by the shard index,
//     so a plugin's shards are first preferred by different replicas: stable, spread, and the
//     same on every replica.
//   - A unit let go of is left for a retry period to the replica first in line for it (under its
//     share, holding less of the unit's plugin first), so shards go where they spread.
//   - Spread: a replica at or under its share that holds more than a plugin's share of the
//     plugin's shards lets one go, at most one per retry period, to a replica with room and less
//     of that plugin; when every replica is at its share (a rejoin), it offers the shard to a
//     replica at its share that holds less of the plugin, which takes it over its share and
//     then lets go of one unit that spreads, so the two exchange a unit. A unit let go of to
//     spread is not let go of again for that for a while (no flapping).
package placement
